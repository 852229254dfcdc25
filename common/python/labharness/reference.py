"""fp64 reference, the same-precision unfused estimate and the tolerance rule (reference.cpp,
compare.cpp). Masks follow attention_math.h: causal is bottom-right aligned, query i sits at
absolute position i + (T_kv - T_q) and sees keys j <= that position; a row that sees no key has
O = 0 and LSE = -inf.

A section may add a score modification (ALiBi, a soft cap) or a mask (a window, documents): `mods`
is a dict with optional 'score' f(s, b, h, i, j) -> s' (float64 arrays broadcast over (i, j)) and
'mask' f(b, h, i, j) -> bool (True where the pair attends), applied on top of the causal mask.
"""
import math

import numpy as np

from .inputs import is_poison, round_to

SAMPLE_EDGE_START = 64


def visible(p, rows, t_kv):
    """(len(rows), T_kv) bool: which keys each query row attends (attention_math.h's visible_keys)."""
    j = np.arange(t_kv)[None, :]
    pos = np.asarray(rows)[:, None] + (t_kv - p.t_q)
    vis = np.ones((len(rows), t_kv), dtype=bool)
    if p.causal:
        vis &= j <= pos
    if p.window > 0:
        vis &= j > pos - p.window
    return vis


def _scores_mask(p, b, h, rows, mods):
    vis = visible(p, rows, p.t_kv)
    if mods and mods.get("mask") is not None:
        vis &= mods["mask"](b, h, np.asarray(rows)[:, None], np.arange(p.t_kv)[None, :])
    return vis


def _row_block(p, q, k, v, b, h, rows, mods, same):
    hk = h // (p.h // p.h_kv)
    qr = q[b, rows, h, :]
    kk, vv = k[b, :, hk, :], v[b, :, hk, :]
    vis = _scores_mask(p, b, h, rows, mods)
    ii, jj = np.asarray(rows)[:, None], np.arange(p.t_kv)[None, :]
    if same:  # eager attention's rounding points, float32 arithmetic
        t = p.dtype
        s = round_to(t, round_to(t, qr.astype(np.float32) @ kk.astype(np.float32).T) * np.float32(1 / math.sqrt(p.d)))
        if mods and mods.get("score") is not None:
            s = round_to(t, mods["score"](s.astype(np.float64), b, h, ii, jj).astype(np.float32))
        s = np.where(vis, s, np.float32(-np.inf))
        m = s.max(axis=1, keepdims=True)
        m_safe = np.where(np.isfinite(m), m, np.float32(0))
        e = np.exp(s - m_safe).astype(np.float32)
        l = e.sum(axis=1, keepdims=True, dtype=np.float32)
        l_safe = np.where(l > 0, l, np.float32(1))
        pm = round_to(t, e / l_safe)
        o = round_to(t, pm @ vv.astype(np.float32)).astype(np.float64)
        lse = np.where(l[:, 0] > 0, m[:, 0].astype(np.float64) + np.log(l_safe[:, 0].astype(np.float64)), -np.inf)
        return o, lse
    s = (qr.astype(np.float64) @ kk.astype(np.float64).T) * (1.0 / math.sqrt(p.d))
    if mods and mods.get("score") is not None:
        s = mods["score"](s, b, h, ii, jj)
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m_safe)
    l = e.sum(axis=1, keepdims=True)
    l_safe = np.where(l > 0, l, 1.0)
    o = (e / l_safe) @ vv.astype(np.float64)
    lse = np.where(l[:, 0] > 0, m[:, 0] + np.log(l_safe[:, 0]), -np.inf)
    return o, lse


def reference_rows(p, q, k, v, rows, same=False, mods=None):
    """rows: {(b, h): [i...]}. Returns {(b, h): (O rows (n, D) float64, LSE (n,))}."""
    return {bh: _row_block(p, q, k, v, bh[0], bh[1], idx, mods, same) for bh, idx in rows.items()}


def all_rows(p):
    return {(b, h): np.arange(p.t_q) for b in range(p.b) for h in range(p.h)}


def sample_rows(p, budget, seed):
    """compare.cpp's sample: first/last row, rows around powers of two from 64, then seeded picks."""
    heads = p.b * p.h
    per_head = max(4, budget // max(1, heads))
    state = [(seed * 0x2545F4914F6CDD1D + 77) & 0xFFFFFFFFFFFFFFFF]

    def nxt():
        x = state[0]
        x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 7
        x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
        state[0] = x
        return x
    out = {}
    for bh in range(heads):
        want = [0, p.t_q - 1]
        edge = SAMPLE_EDGE_START
        while edge < p.t_q and len(want) < per_head // 2:
            want += [edge - 1, edge, edge + 1]
            edge *= 2
        while len(want) < per_head:
            want.append(nxt() % p.t_q)
        out[(bh // p.h, bh % p.h)] = np.array(sorted({i for i in want if 0 <= i < p.t_q}))
    return out


def rows_to_check(p, mode, budget, seed):
    if mode == "none":
        return {}
    macs = float(p.b) * p.h * p.t_q * p.t_kv * p.d
    full = mode == "full" or (mode == "auto" and macs <= 4e9)
    return all_rows(p) if full else sample_rows(p, budget, seed)


def default_atol(dtype):
    return 1e-5 if dtype == "fp32" else 1e-4


def _g(x):
    return "NaN" if x != x else f"{x:.3g}"  # one spelling of NaN, whatever its sign bit


def _v(x):
    return "NaN" if x != x else f"{x:.6g}"


def count_rows(rows):
    """Query rows in {(b, h): [i...]}: a row is one (b, h, i), as compare.cpp's RowId, so that every
    row of a problem is B*H*T_q (len(rows) counts (b, h) pairs, one per head)."""
    return sum(len(idx) for idx in rows.values())


def check_scope(mode, rows_checked, rows_total):
    """What a check covered, said after its verdict ("" under --check none, whose verdict says so)."""
    if mode == "none":
        return ""
    if rows_checked >= rows_total:
        return "checked every row"
    return f"checked {rows_checked} of {rows_total} rows, a sample; --check full checks every row"


def shown_details(details, n):
    """At most n of a check's detail lines (a --quiet failure): the first ones, the last of them replaced
    by the worst element's line when that lies further down (compare.cpp's shown_details)."""
    shown = list(details[:n])
    worst = [d for d in details[n:] if d.startswith("worst: ")]
    if shown and worst:
        shown[-1] = worst[0]
    return shown


class CheckResult(dict):
    """The check's numbers with the record's field names (record.cpp's check object)."""


LOG2_E = 1.4426950408889634
# compare.cpp's: O right and the LSE wrong: the row's keys, the LSE's formula, then the scores
LSE_ONLY = ("; O within its bound (O is an average, which hides what the LSE shows): look at the row's keys, one too "
            "many or too few (a mask, a window bound, a key's address), at how the LSE is made of the row's max "
            "and sum where that is your code (the natural log: m + ln l, or m·ln 2 + ln l with the max in base 2), "
            "then at the scores")

LN_2 = 0.6931471805599453
LSE_OFFSET_SHOWN = 3  # heads named with their constant
# compare.cpp's: O right, the LSE off by one constant along every row: what softmax cancels
LSE_OFFSET = (": every score of such a row moved by one amount, or its sum l scaled by one factor, which softmax "
              "cancels and the LSE keeps: look for a term constant along the row added to the scores (a position "
              "bias such as ALiBi's slope·(kv_idx - pos) written with q_idx for pos, the query's key position "
              "q_idx + T_kv - T_q: off by slope·(T_kv - T_q)), or for a factor of P that l keeps and the LSE does not "
              "take back (P scaled by 2^k for fp8: k·ln 2)")


def lse_offset(heads, bound, name_b):
    """compare.cpp's lse_offset: with O right, the LSE off by one constant per head on every row of it
    (each row's error over the bound, one sign, a spread within what rounding gives) is said with the
    constants and what moves every score of a row by one amount; "" when the errors are not so.
    heads: (b, h, rows, mean, min, max) of the signed LSE error of each (b, h); name_b: name b too."""
    off = [x for x in heads if max(abs(x[4]), abs(x[5])) > bound]
    if not off:
        return ""
    for _, _, n, mean, lo, hi in off:  # two rows at least: one row alone is constant by itself
        if n < 2 or not (lo > bound or hi < -bound) or hi - lo > 2 * bound + 0.01 * abs(mean):
            return ""
    means = [x[3] for x in off]
    spread = 2 * bound + 0.01 * max(abs(m) for m in means)
    if len(off) == len(heads) and max(means) - min(means) <= spread:  # one constant everywhere
        c = sum(means) / len(means)
        k = round(c / LN_2)
        twos = f" = {k}·ln 2" if k != 0 and abs(k) <= 32 and abs(c - k * LN_2) <= spread else ""
        where = f"the LSE is off by the same amount, {c:+.3g}{twos}, on every row checked"
    else:
        name = (lambda b, h: f"b={b} h={h}") if name_b else (lambda b, h: f"h={h}")
        listed = ", ".join(f"{name(b, h)}: {mean:+.3g}" for b, h, _, mean, _, _ in off[:LSE_OFFSET_SHOWN])
        where = (f"the LSE is off by one constant per head, the same on every row of it ({listed}"
                 f"{', …' if len(off) > LSE_OFFSET_SHOWN else ''})")
    return "; O within its bound, and " + where + LSE_OFFSET


def check(p, q, k, v, rows, out_o, out_lse, mods=None):
    """compare.cpp's check_rows. out_o: float32 [B,T_q,H,D] (poison kept); out_lse: [B,H,T_q] or None."""
    atol = default_atol(p.dtype)
    r = CheckResult(passed=False, max_abs_err=0.0, rel_l2_err=0.0, ref_err_bound=None, lse_max_abs_err=0.0,
                    lse_err_bound=None, rule=f"max|out-fp64| <= 2*max|unfused {p.dtype} - fp64| + {atol:g}",
                    rows_checked=0, unwritten=0, verdict="", details=[])
    o_unwritten = int(is_poison(out_o).sum())
    lse_unwritten = int(is_poison(out_lse).sum()) if out_lse is not None else 0
    r["unwritten"] = o_unwritten + lse_unwritten
    o_total = out_o.size
    if not rows:
        r["passed"] = r["unwritten"] == 0
        r["verdict"] = ("not checked (--check none); every output element written" if r["passed"]
                        else "output not written (poison left in place)")
        return r
    exact = reference_rows(p, q, k, v, rows, False, mods)
    same = reference_rows(p, q, k, v, rows, True, mods)
    same_err = same_lse_err = diff2 = ref2 = 0.0
    max_err = lse_err = 0.0
    o_nan = lse_bad = o_zero = o_checked = 0
    o_nan_keyless = 0  # of o_nan, those on rows that see no key (O must be 0 there)
    lse_sized = lse_base2 = 0  # rows whose LSE is far from 0; of them, those log2(e) times it
    # rows whose LSE is a NaN that is not the poison (computed: -inf - -inf where empty states merge);
    # of them, those that see no key; the first of them, for the verdict
    lse_nan_computed = lse_nan_keyless = 0
    lse_nan_first = None
    lse_heads = []  # per (b, h) with a row that sees a key: (b, h, rows, mean, min, max) of LSE - fp64
    n_rows = count_rows(rows)
    bad = []
    for (b, h), idx in rows.items():
        ref_o, ref_lse = exact[(b, h)]
        got = out_o[b, idx, h, :].astype(np.float64)
        err = np.abs(got - ref_o)
        same_err = max(same_err, float(np.max(np.abs(same[(b, h)][0] - ref_o))))
        fin = np.isfinite(got)
        o_nan += int((~fin).sum())
        o_nan_keyless += int((~fin[np.isinf(ref_lse)]).sum())
        o_zero += int((got == 0).sum())
        o_checked += got.size
        max_err = math.inf if not fin.all() else max(max_err, float(err.max()))
        diff2 += float((np.where(fin, err, 0) ** 2).sum())
        ref2 += float((ref_o ** 2).sum())
        bad.append((b, h, idx, got, ref_o, err))
        if out_lse is not None:
            g = out_lse[b, h, idx].astype(np.float64)
            empty = np.isinf(ref_lse)
            computed = np.isnan(g) & ~is_poison(out_lse[b, h, idx])
            if computed.any() and lse_nan_first is None:
                lse_nan_first = f"LSE[b={b}, h={h}, i={idx[int(np.argmax(computed))]}]"
            lse_nan_computed += int(computed.sum())
            lse_nan_keyless += int((computed & empty).sum())
            lse_bad += int((empty & ~(np.isneginf(g))).sum())
            if (empty & ~np.isneginf(g)).any():
                lse_err = math.inf
            live = ~empty
            if live.any():
                same_lse_err = max(same_lse_err, float(np.max(np.abs(same[(b, h)][1][live] - ref_lse[live]))))
                gl = g[live]
                lse_bad += int((~np.isfinite(gl)).sum())
                # an LSE left in base 2 ((m + log2 l) without the ln 2) is log2(e) times the natural one
                sized = np.abs(ref_lse[live]) > 0.5
                lse_sized += int(sized.sum())
                want2 = ref_lse[live][sized] * LOG2_E
                lse_base2 += int((np.abs(gl[sized] - want2) <= 1e-3 * np.abs(want2)).sum())
                e = np.abs(gl - ref_lse[live])
                lse_err = math.inf if not np.isfinite(gl).all() else max(lse_err, float(e.max()))
                if np.isfinite(gl).all():  # the signed error of the head's rows, for a constant offset
                    dl = gl - ref_lse[live]
                    lse_heads.append((b, h, dl.size, float(dl.mean()), float(dl.min()), float(dl.max())))
    bound = 2 * same_err + atol
    lse_bound = 2 * same_lse_err + atol
    rel = math.sqrt(diff2 / ref2) if ref2 > 0 else math.sqrt(diff2)
    if o_nan:
        rel = math.inf
    # The first few elements over the bound, then the worst one (where max_err comes from), unless it
    # is among them: the first few of an off-by-one are often small errors far from the worst.
    def element(b, h, idx, got, ref_o, err, n, c):
        unwritten = is_poison(np.float32(got[n, c]))  # no error to speak of where nothing (or NaN) was stored
        return (f"O[b={b}, i={idx[n]}, h={h}, d={c}] = {'unwritten' if unwritten else _v(got[n, c])}, "
                f"expected {_v(ref_o[n, c])}" +
                ("" if unwritten or err[n, c] != err[n, c] else f" (error {_g(err[n, c])})"))
    shown_o = 6
    details, listed, worst, worst_err = [], set(), None, -1.0
    for b, h, idx, got, ref_o, err in bad:
        if err.size == 0:
            continue
        key = np.where(np.isnan(err), np.inf, err)  # NaN counts as inf; argmax keeps the first of a tie
        at = np.unravel_index(int(np.argmax(key)), key.shape)
        if key[at] > worst_err:
            worst, worst_err = (b, h, idx, got, ref_o, err, int(at[0]), int(at[1])), float(key[at])
        for n, c in zip(*np.nonzero(~(err <= bound))):
            if len(details) >= shown_o:
                break
            listed.add((b, h, int(n), int(c)))
            details.append(element(b, h, idx, got, ref_o, err, n, c))
    if details and (worst[0], worst[1], worst[6], worst[7]) not in listed:
        if len(details) == shown_o:
            details.pop()
        details.append("worst: " + element(*worst))
    o_ok = o_unwritten == 0 and o_nan == 0 and max_err <= bound
    lse_ok = out_lse is None or (lse_unwritten == 0 and lse_bad == 0 and lse_err <= lse_bound)
    if not lse_ok and not lse_unwritten:  # the first few LSE rows over their bound, after O's elements
        shown = 0
        for (b, h), idx in rows.items():
            ref_lse = exact[(b, h)][1]
            for n, i in enumerate(idx):
                if shown >= 3:
                    break
                g, e = float(out_lse[b, h, i]), float(ref_lse[n])
                wrong = not (g == -math.inf) if math.isinf(e) else not (abs(g - e) <= lse_bound)
                if wrong:
                    details.append(f"LSE[b={b}, h={h}, i={i}] = {_v(g)}, expected {_v(e)} "
                                   + ("(the row sees no key)" if math.isinf(e) else
                                      "(a NaN computed, not the poison)" if g != g else f"(error {_g(abs(g - e))})"))
                    shown += 1
    # With O wrong, whether LSE is right says where to look: a right LSE means each row's max and sum are.
    # A NaN LSE that is not the poison was computed: said as such, with its rows.
    lse_too = ("" if out_lse is None else
               f"; LSE not written either ({lse_unwritten} of {out_lse.size} elements still hold the poison)"
               if lse_unwritten else
               "; LSE within its bound (each row's max and sum are right)" if lse_ok else
               f"; LSE NaN as well on {lse_nan_computed} rows (first: {lse_nan_first}; a NaN computed, not the poison)"
               if lse_nan_computed else
               f"; LSE too far as well (max error {_g(lse_err)})")
    if o_unwritten == o_total:
        verdict = (f"output not written: all {o_total} elements of O still hold the poison (nothing stored O: an "
                   "exercise still the stub, or a store that is never reached?)")
    elif o_unwritten:
        verdict = f"output partly not written: {o_unwritten} of {o_total} elements of O still hold the poison"
    elif o_nan == o_checked and out_lse is not None and not lse_unwritten and lse_ok:
        # right max and sum rule out the stub and an overflow: what is left is O's own making
        verdict = (f"all {o_checked} elements of O are NaN or inf on the rows checked: every row's max and sum are "
                   "right (LSE within its bound), so look at how O is made from P and V: a key outside the row's "
                   "mask must give P = 0, not NaN (and 0 * NaN is NaN too)")
    elif o_nan == o_checked:  # the look of an exercise left as its stub (or of a NaN everywhere)
        verdict = (f"all {o_checked} elements of O are NaN or inf on the rows checked: nothing finite came out "
                   "(an exercise still the stub, a value it never writes, or a NaN or overflow that reached every row)"
                   + lse_too)
    elif o_nan and o_nan_keyless == o_nan:  # 1/l with l = 0 (T_q > T_kv causal, a window)
        verdict = (f"{o_nan} elements of O are NaN or inf, all on rows that see no key: such a row's sum l is 0, so its "
                   f"O must be 0 and its LSE -inf, never a division by l{lse_too}")
    elif o_nan:
        verdict = f"{o_nan} elements of O are NaN or inf on the rows checked (a reference value is finite){lse_too}"
    elif not o_ok and o_zero == o_checked:
        verdict = (f"O too far from fp64: every one of the {o_checked} elements checked is 0 "
                   "(nothing was accumulated: an exercise still the stub, or one that skips every key?)")
    elif not o_ok:
        verdict = f"O too far from fp64: max error {_g(max_err)} > bound {_g(bound)} ({r['rule']}){lse_too}"
    elif not lse_ok:
        verdict = (f"LSE not written: {lse_unwritten} of {out_lse.size} elements still hold the poison" if lse_unwritten
                   else f"LSE is NaN on {lse_nan_computed} rows, all rows that see no key (first: {lse_nan_first}), with O "
                   "within its bound: a NaN computed, not the poison left in place; such a row's LSE must be -inf: look for "
                   "-inf - -inf (or exp of it) where its empty states merge (every split or warp of the row saw no key)"
                   if lse_nan_computed and lse_nan_keyless == lse_nan_computed
                   else f"LSE is NaN on {lse_nan_computed} of {n_rows} rows checked (first: {lse_nan_first}), with O within "
                   "its bound: a NaN computed, not the poison left in place; look for -inf - -inf (or exp of it) where a "
                   "state that saw no key (LSE -inf: an empty split, a warp with no key) is merged"
                   if lse_nan_computed
                   else f"LSE too far from fp64: max error {_g(lse_err)} > bound {_g(lse_bound)}" +
                   ("; O within its bound, and every LSE is log2(e) = 1.4427 times the expected one: a log in base 2 "
                    "(m + log2 l) where the output holds the natural log (times ln 2)"
                    if 0 < lse_sized == lse_base2 else
                    (lse_bad == 0 and lse_offset(lse_heads, lse_bound, p.b > 1)) or LSE_ONLY))
    else:
        verdict = f"max error {_g(max_err)} <= bound {_g(bound)}"
    r.update(passed=bool(o_ok and lse_ok), max_abs_err=max_err, rel_l2_err=rel, ref_err_bound=bound,
             lse_max_abs_err=lse_err, lse_err_bound=lse_bound, rows_checked=n_rows, verdict=verdict, details=details)
    return r
