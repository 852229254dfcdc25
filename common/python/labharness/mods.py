"""What the FlexAttention variants of section 10 mean, in float64 numpy, for the reference
(reference.py applies them): each is a score modification f(s, b, h, i, j) or a mask f(b, h, i, j)
over broadcast arrays of query rows i and keys j. Positions are the lab's: query i sits at key
position i + (T_kv - T_q) (bottom-right alignment), as in attention_math.h."""
import numpy as np

from .inputs import splitmix64


def alibi_slopes(h):
    """ALiBi's geometric slopes, 2^(-8(k+1)/H) for head k."""
    return np.array([2.0 ** (-8.0 * (k + 1) / h) for k in range(h)])


def alibi(p):
    slopes, shift = alibi_slopes(p.h), p.t_kv - p.t_q
    return lambda s, b, h, i, j: s + slopes[h] * (j - (i + shift))  # 0 on the diagonal, < 0 behind it


def softcap(cap):
    return lambda s, b, h, i, j: cap * np.tanh(s / cap)


def window(p):
    shift, w = p.t_kv - p.t_q, p.window
    return lambda b, h, i, j: (j <= i + shift) & (j > i + shift - w)


def document_ids(t_kv, docs, seed):
    """Seeded document boundaries over the key positions: `docs` documents, each at least one key."""
    docs = max(1, min(docs, t_kv))
    cuts = set()
    n = 0
    while len(cuts) < docs - 1:
        cuts.add(1 + int(splitmix64(np.uint64(seed * 11 + 3), 1, n)[0] % np.uint64(max(1, t_kv - 1))))
        n += 1
    ids = np.zeros(t_kv, dtype=np.int32)
    for c in sorted(cuts):
        ids[c:] += 1
    return ids


def document(p, ids):
    shift = p.t_kv - p.t_q

    def mask(b, h, i, j):
        pos = np.clip(i + shift, 0, p.t_kv - 1)
        keep = ids[j] == ids[pos]
        return keep & (j <= i + shift) if p.causal else keep
    return mask
