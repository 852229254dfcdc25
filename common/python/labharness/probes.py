"""Section 10's exercises asked directly, before the run: a student's mask_mod or score_mod
evaluated over the problem's (q_idx, kv_idx) grid against the reference's (mods.py), so that a
wrong one is named by its first differing pair rather than by an O that is off somewhere."""
import warnings

import numpy as np

from . import mods, reference

PROBE_ELEMENTS = 1 << 22  # (query, key) pairs a probe evaluates at most: every row of a small shape


def probe_rows(p, per_row):
    """The query rows a probe evaluates: all of them on a small shape, else the first, the last and
    some spread between, within PROBE_ELEMENTS (per_row: elements a row costs)."""
    n = max(1, PROBE_ELEMENTS // max(1, per_row))
    if p.t_q <= n:
        return np.arange(p.t_q)
    k = max(1, n // 3)
    return np.unique(np.concatenate([np.arange(k), np.linspace(0, p.t_q - 1, k).astype(np.int64),
                                     np.arange(p.t_q - k, p.t_q)]))


def keys_said(keys):
    """A row's keys (sorted indices) in words: 'keys a..b', 'key a', 'no key', or a count where they
    are not one run."""
    if len(keys) == 0:
        return "no key"
    if len(keys) == 1:
        return f"key {keys[0]}"
    if keys[-1] - keys[0] + 1 == len(keys):
        return f"keys {keys[0]}..{keys[-1]}"
    return f"{len(keys)} keys from {keys[0]} to {keys[-1]}"


def mask_probe(variant, torch, p, mask_mod, ids, dev):
    """The variant's mask_mod asked directly, over the (q_idx, kv_idx) grid of this problem (b = h = 0:
    none of the masks reads them), against the reference's mask (the causal window of attention_math.h;
    mods.document): the first pair that differs, with the row's keys both ways, or "" where none does.
    An error in the mask_mod is left to the run, which names its line."""
    if variant not in ("window", "document"):
        return ""
    rows = probe_rows(p, p.t_kv)
    i, j = rows[:, None], np.arange(p.t_kv)[None, :]
    want = reference.visible(p, rows, p.t_kv)
    if variant == "document":
        want = want & mods.document(p, ids)(0, 0, i, j)
    zero = torch.zeros((), dtype=torch.int64, device=dev)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = mask_mod(zero, zero, torch.from_numpy(i).to(dev), torch.from_numpy(j).to(dev))
            got = torch.broadcast_to(torch.as_tensor(got), want.shape).to(torch.bool).cpu().numpy()
    except Exception:
        return ""
    wrong = np.argwhere(got != want)
    if len(wrong) == 0:
        return ""
    r, k = wrong[0]
    q_idx, kv_idx = int(rows[r]), int(k)
    shift = p.t_kv - p.t_q
    pos = q_idx + shift
    where = f"key position {pos}, " if shift else ""
    if variant == "window":
        why = f"({where}W = {p.window})"
    else:
        doc = ids[min(max(pos, 0), p.t_kv - 1)]
        span = np.flatnonzero(ids == doc)
        why = (f"({where}document {doc}: keys {span[0]}..{span[-1]}"
               f"{', and causal' if p.causal else ''})")
    ours, theirs = np.flatnonzero(want[r]), np.flatnonzero(got[r])
    return (f"EXERCISE {variant}: mask_mod(b=0, h=0, q_idx={q_idx}, kv_idx={kv_idx}) = {bool(got[r, k])}, want "
            f"{bool(want[r, k])}: row {q_idx} sees {keys_said(ours)} {why}, your mask lets it see "
            f"{f'{len(theirs)} ({keys_said(theirs)})' if len(theirs) else 'none'}")


def score_probe(variant, torch, p, score_mod, cap, dev):
    """The variant's score_mod asked directly against the reference's (mods.alibi, mods.softcap): alibi
    over every head and the (q_idx, kv_idx) grid with score 0, softcap over scores from 0 out to 4·cap;
    the first value that differs, with the formula's numbers, or "" where none does. An error in the
    score_mod is left to the run, which names its line."""
    if variant == "alibi":
        rows = probe_rows(p, p.h * p.t_kv)
        h, i, j = np.arange(p.h)[:, None, None], rows[None, :, None], np.arange(p.t_kv)[None, None, :]
        score = np.zeros((p.h, len(rows), p.t_kv))
        want = mods.alibi(p)(score, 0, h, i, j)
        args = (torch.zeros(score.shape, dtype=torch.float32), torch.zeros((), dtype=torch.int64),
                torch.from_numpy(h), torch.from_numpy(i), torch.from_numpy(j))
    elif variant == "softcap":
        c = float(cap)
        grid = np.linspace(0.0, 4 * c, 65)[1:]
        score = np.concatenate([[0.0], np.stack([grid, -grid], 1).ravel()])  # outward from 0, each sign
        want = mods.softcap(c)(score, 0, 0, 0, 0)
        zero = torch.zeros((), dtype=torch.int64)
        args = (torch.tensor(score, dtype=torch.float32), zero, zero, zero, zero)
    else:
        return ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = score_mod(*(a.to(dev) for a in args))
            got = torch.broadcast_to(torch.as_tensor(got), want.shape).detach().double().cpu().numpy()
    except Exception:
        return ""
    wrong = np.argwhere(~(np.abs(got - want) <= 1e-4 * np.maximum(1.0, np.abs(want))))  # float32's few roundings
    if len(wrong) == 0:
        return ""
    at = tuple(wrong[0])
    if variant == "alibi":
        hh, q_idx, kv_idx = int(at[0]), int(rows[at[1]]), int(at[2])
        shift = p.t_kv - p.t_q
        slope = mods.alibi_slopes(p.h)[hh]
        return (f"EXERCISE alibi: score_mod(score=0, b=0, h={hh}, q_idx={q_idx}, kv_idx={kv_idx}) = {got[at]:.6g}, "
                f"want {want[at]:.6g} = slopes[{hh}]·(kv_idx - pos) = {slope:.6g}·({kv_idx} - {q_idx + shift}), "
                f"pos = q_idx + T_kv - T_q = {q_idx} + {shift}")
    return (f"EXERCISE softcap: score_mod(score={score[at]:.6g}, b=0, h=0, q_idx=0, kv_idx=0) = {got[at]:.6g}, want "
            f"{want[at]:.6g} = cap·tanh(score / cap) with cap = {float(cap):g}")
