#!/usr/bin/env python3
# 09 FlashAttention-2 forward in Triton (exercise 4): the kernel of 03/04, written one tile at a time.
#
# What it is: the same algorithm as 03 (Q tile outside, K/V streamed inside, online softmax, deferred
# 1/l, causal stop at the diagonal) and 04 (fp16/bf16 storage, fp32 accumulation, Tensor Cores),
# in Triton. A Triton program is one block's work on whole tiles: `tl.load` of a [BLOCK_N, D] tile,
# `tl.dot` of two tiles, `tl.max`/`tl.sum` along a tile's rows. What 04 `mma` writes by hand, the
# compiler does here: how lanes hold the fragments (layouts), ldmatrix/cp.async or TMA copies,
# swizzled shared memory, the software pipeline of the K/V loop (num_stages), and the masks of a
# ragged edge. What stays ours is the lesson: which K/V tiles a Q tile visits, the online rescale,
# and where the division by l goes.
#
# Layouts and conventions are the lab's (common/toolbox/attention_math.h): Q, O [B, T_q, H, D];
# K, V [B, T_kv, H_kv, D]; LSE [B, H, T_q] (natural log); causal is bottom-right aligned (query i
# sits at key position i + T_kv - T_q; a row that sees no key has O = 0, LSE = -inf); GQA maps query
# head h to K/V head h // (H / H_kv). Scores live in the log2 domain (scale·log2 e folded into one
# multiply) so the exponentials are exp2, as in 04.
#
# Two sweeps per Q tile: the K/V tiles every row of the tile sees whole (no mask, the fast loop),
# then the tiles that cross the diagonal or the ragged end of K/V (masked). Causal Q tiles are
# launched longest first. On a GPU the tile shape, warps and pipeline depth are autotuned per shape.
#
# Hopper: the compiler emits wgmma for both products. Triton 3.6's automatic warp specialisation
# (tl.range(..., warp_specialize=True)) was tried and dropped: compiled for sm_90 it gives the same
# PTX as without it at 8 warps, and the compiler fails at 4 (tests/test_python_harness.py compiles
# the kernel for sm_90 and sm_80 on a CPU machine). The variant `triton-tma` reads K/V through
# device-side tensor descriptors, which the compiler lowers to TMA copies on Hopper (_load_kv).
#
# Exercises (ch12/09_triton.md): the online softmax of one K/V tile (EXERCISE online-softmax) and
# the K/V bounds of a Q tile with the causal stop, the two sweeps and the deferred normalisation
# (EXERCISE kv-loop).
# Run: python3 labs/09_triton.py --cpu --t 100 --causal       (your stub, under Triton's interpreter)
#      python3 solutions/09_triton.py --t 4096 --h 32 --causal  (the solution, on a GPU)
import inspect
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common" / "python"))
try:
    from labharness import NotChecked, Section, main  # noqa: E402
    from labharness.backend import import_triton  # noqa: E402
except ModuleNotFoundError as missing:  # one line and exit 77 (cannot run here), not a traceback
    venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python3"  # where scripts/lab made one
    elsewhere = venv.exists() and Path(sys.prefix).resolve() != venv.parents[1].resolve()  # (not run under it)
    how = f"run it with {venv}" if elsewhere else "scripts/lab run 09 installs what the section needs"
    print(f"09_triton: cannot run here: the Python package '{missing.name}' is missing ({how})")
    sys.exit(77)

triton, tl = import_triton()  # under --cpu, with TRITON_INTERPRET=1 set first

LOG2E = 1.4426950408889634
LN2 = tl.constexpr(0.6931471805599453)
BUGS = {"": 0, "no-rescale": 1, "local-causal": 2, "gqa-index": 3}
# A kernel reads a global only as a constexpr: the --bug switches are compiled in or out.
NO_RESCALE, LOCAL_CAUSAL, GQA_INDEX = tl.constexpr(1), tl.constexpr(2), tl.constexpr(3)


@triton.jit
def _load_kv(src, start_n, kv_stride, T_KV, D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
             TMA: tl.constexpr):
    """The [BLOCK_N, D] tile of K or V at keys start_n.. : through a tensor descriptor (variant
    triton-tma: on Hopper a TMA copy, rows past T_kv arrive as zeros), or by pointers, masked on
    MASKED tiles (the ragged end of K/V)."""
    if TMA:
        tile = src.load([start_n, 0])
    else:
        cols = start_n + tl.arange(0, BLOCK_N)
        ptrs = src + cols[:, None] * kv_stride + tl.arange(0, D)[None, :]
        if MASKED:
            tile = tl.load(ptrs, mask=cols[:, None] < T_KV, other=0.0)
        else:
            tile = tl.load(ptrs)
    return tile


@triton.jit
def _kv_sweep(acc, l_i, m_i, q, k_src, v_src, kv_stride, offs_m, q_begin, lo, hi, T_KV, shift, qk_scale,
              D: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
              BUG: tl.constexpr, TMA: tl.constexpr):
    """Folds the K/V tiles [lo, hi) into the running state (acc, l_i, m_i) of the Q tile's rows.
    MASKED tiles may hold keys past T_kv or, under causal, past a row's diagonal."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        # BEGIN EXERCISE online-softmax: fold the K/V tile at keys `cols` into acc, l_i, m_i (log2 domain).
        #   k = _load_kv(k_src, start_n, ...) (and v likewise, both [BLOCK_N, D]);
        #   s = q·kᵀ·qk_scale (tl.dot accumulates in fp32); on MASKED tiles a key is visible when
        #   cols < T_KV and, if CAUSAL, cols <= row + shift (GLOBAL indices); invisible scores are -inf.
        #   m_new = max(m_i, rowmax(s)); p = exp2(s - m_new); alpha = exp2(m_i - m_new) rescales what
        #   l_i and acc summed before; acc += p·v with p cast to v's type. A row that has seen no key
        #   has m_new = -inf: subtract 0 instead, so exp2 never sees -inf - -inf.
        k = _load_kv(k_src, start_n, kv_stride, T_KV, D, BLOCK_N, MASKED, TMA)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            visible = cols[None, :] < T_KV
            if CAUSAL:
                if BUG == LOCAL_CAUSAL:  # tile-local indices: right on the diagonal tile only
                    visible = visible & (offs_n[None, :] <= (offs_m - q_begin)[:, None])
                else:
                    visible = visible & (cols[None, :] <= offs_m[:, None] + shift)
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_use[:, None])
        if BUG == NO_RESCALE:  # sums of earlier tiles keep their old maximum's scale
            l_i = l_i + tl.sum(p, 1)
        else:
            alpha = tl.math.exp2(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
        v = _load_kv(v_src, start_n, kv_stride, T_KV, D, BLOCK_N, MASKED, TMA)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
        # STUB: pass
        # END EXERCISE
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, H, H_KV, T_Q, T_KV, qk_scale,
              D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
              BUG: tl.constexpr, TMA: tl.constexpr):
    """One program: one Q tile of BLOCK_M rows of one (sequence, head)."""
    tile = tl.program_id(0)
    if CAUSAL:  # the bottom tiles see the most keys: start them first
        tile = tl.num_programs(0) - 1 - tile
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    if BUG == GQA_INDEX:
        hk = h % H_KV
    else:
        hk = h // (H // H_KV)
    q_begin = tile * BLOCK_M
    offs_m = q_begin + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q_stride = H * D          # row stride of Q and O
    kv_stride = H_KV * D      # row stride of K and V
    q_base = Q + (b.to(tl.int64) * T_Q * H + h) * D
    o_base = O + (b.to(tl.int64) * T_Q * H + h) * D
    k_base = K + (b.to(tl.int64) * T_KV * H_KV + hk) * D
    v_base = V + (b.to(tl.int64) * T_KV * H_KV + hk) * D
    row_ok = offs_m < T_Q
    q = tl.load(q_base + offs_m[:, None] * q_stride + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    shift = T_KV - T_Q        # bottom-right alignment: query i sits at key position i + shift
    if TMA:  # this head's K and V as [T_kv, D] matrices of row stride H_kv·D, read in [BLOCK_N, D] boxes
        k_src = tl.make_tensor_descriptor(k_base, shape=[T_KV, D], strides=[kv_stride, 1], block_shape=[BLOCK_N, D])
        v_src = tl.make_tensor_descriptor(v_base, shape=[T_KV, D], strides=[kv_stride, 1], block_shape=[BLOCK_N, D])
    else:
        k_src = k_base
        v_src = v_base

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    # BEGIN EXERCISE kv-loop: the K/V bounds of this Q tile, the two sweeps, then O = acc / l and LSE.
    #   Causal: no row of the tile sees past key (last row + shift), so the sweep ends there
    #   (kv_end); the tiles below the FIRST row's diagonal are seen whole by every row (full_end,
    #   rounded down to a tile) and need no mask. Not causal: kv_end = T_KV, full_end = T_KV rounded
    #   down. Sweep [0, full_end) unmasked, then [full_end, kv_end) masked. Then divide by l once;
    #   LSE = (m + log2 l)·ln 2; a row with l = 0 saw no key: O = 0, LSE = -inf. Store with row_ok.
    if CAUSAL:
        q_last = tl.minimum(q_begin + BLOCK_M, T_Q) - 1
        kv_end = tl.maximum(tl.minimum(T_KV, q_last + shift + 1), 0)
        full_end = tl.maximum(tl.minimum(T_KV, q_begin + shift + 1), 0) // BLOCK_N * BLOCK_N
    else:
        kv_end = T_KV
        full_end = T_KV // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _kv_sweep(acc, l_i, m_i, q, k_src, v_src, kv_stride, offs_m, q_begin, 0, full_end, T_KV,
                              shift, qk_scale, D, BLOCK_N, CAUSAL, False, BUG, TMA)
    acc, l_i, m_i = _kv_sweep(acc, l_i, m_i, q, k_src, v_src, kv_stride, offs_m, q_begin, full_end, kv_end,
                              T_KV, shift, qk_scale, D, BLOCK_N, CAUSAL, True, BUG, TMA)
    seen = l_i > 0
    l_div = tl.where(seen, l_i, 1.0)
    out = acc / l_div[:, None]
    lse = tl.where(seen, (m_i + tl.log2(l_div)) * LN2, float("-inf"))
    tl.store(o_base + offs_m[:, None] * q_stride + offs_d[None, :], out.to(O.dtype.element_ty), mask=row_ok[:, None])
    tl.store(LSE + bh.to(tl.int64) * T_Q + offs_m, lse, mask=row_ok)
    # STUB: pass
    # END EXERCISE


# Tile shapes the GPU autotuner tries, per (T_q, T_kv, D, causal): 128-row Q tiles keep a warpgroup's
# Tensor Cores busy; 64- or 128-key K/V tiles; 2 to 4 pipeline stages (K/V tiles in flight).
GPU_TILES = [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3),
             (128, 64, 4, 4), (64, 64, 4, 3), (128, 32, 4, 4), (64, 128, 4, 2)]  # BLOCK_M, BLOCK_N, warps, stages
GPU_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=st)
               for bm, bn, w, st in GPU_TILES]
# The best configuration per shape is kept on disk (cache_results), so a bench tunes each shape once.
_attn_fwd_tuned = triton.autotune(configs=GPU_CONFIGS, key=["T_Q", "T_KV", "H", "H_KV", "D", "CAUSAL", "BUG", "TMA"],
                                  cache_results=True)(_attn_fwd)

# Under the interpreter every program is numpy work on whole tiles: small tiles with BLOCK_M != BLOCK_N
# (so a causal diagonal crosses several K/V tiles) keep the CPU cases quick and the masks exercised.
CPU_TILES = {"BLOCK_M": 32, "BLOCK_N": 16}
CPU_SECONDS_PER_TILE = 4e-3  # one (Q tile, K/V tile) step of _kv_sweep, interpreted, on a laptop core


def cpu_seconds(p):
    """Rough time of --cpu: the (Q tile, K/V tile) steps the kernel takes (causal ones stop at the
    diagonal), a few ms each under the interpreter. The GPU's default shape, B=1 H=8 T=1024, is
    16384 of them: about a minute."""
    import numpy as np
    bm, bn = CPU_TILES["BLOCK_M"], CPU_TILES["BLOCK_N"]
    q_end = np.minimum(np.arange(1, -(-p.t_q // bm) + 1, dtype=np.int64) * bm, p.t_q)  # past each Q tile's last row
    kv_end = np.minimum(q_end + (p.t_kv - p.t_q), p.t_kv).clip(0) if p.causal else np.full_like(q_end, p.t_kv)
    steps = float((-(-kv_end // bn)).sum()) * p.b * p.h
    return steps * CPU_SECONDS_PER_TILE


# The branches of --bug no-rescale and --bug local-causal sit in your online-softmax and are
# optional: a lab without one says so (not checked here, exit 77) rather than run, and pass, a
# pitfall that was never planted.
OWN_BRANCHES = {"no-rescale": "NO_RESCALE", "local-causal": "LOCAL_CAUSAL"}


def planted(bug, code=None):
    """Whether code (default: _kv_sweep's), comments aside, tests for the bug: its constant's name,
    or BUG compared with its value (`if BUG == 1:`)."""
    if code is None:
        code = inspect.getsource(getattr(_kv_sweep, "fn", _kv_sweep))
    value = BUGS[bug]
    uses = rf"\b{OWN_BRANCHES[bug]}\b|\bBUG\s*==\s*{value}\b|\b{value}\s*==\s*BUG\b"
    return re.search(rf"^[^#\n]*({uses})", code, re.MULTILINE) is not None


def forward(ctx):
    if ctx.bug in OWN_BRANCHES and not planted(ctx.bug):
        raise NotChecked(f"--bug {ctx.bug}: your online-softmax has no branch for it; it is optional: "
                         f"`if BUG == {OWN_BRANCHES[ctx.bug]}:`, see ch12/hints/09_triton.md")
    p = ctx.problem
    scale = float(ctx.problem.softmax_scale) * LOG2E
    bug = BUGS[ctx.bug]
    tma = ctx.variant == "triton-tma"
    args = (ctx.q, ctx.k, ctx.v, ctx.o, ctx.lse, p.h, p.h_kv, p.t_q, p.t_kv, scale)
    if not ctx.on_gpu:
        grid = (triton.cdiv(p.t_q, CPU_TILES["BLOCK_M"]), p.b * p.h)
        ctx.metrics["tiles"] = dict(CPU_TILES)
        return lambda: _attn_fwd[grid](*args, D=p.d, CAUSAL=p.causal, BUG=bug, TMA=tma, **CPU_TILES)

    if tma:  # device-side tensor descriptors live in a scratch buffer the launcher asks for
        import torch
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))

    def grid(meta):
        return (triton.cdiv(p.t_q, meta["BLOCK_M"]), p.b * p.h)

    def launch():
        _attn_fwd_tuned[grid](*args, D=p.d, CAUSAL=p.causal, BUG=bug, TMA=tma)
        best = _attn_fwd_tuned.best_config
        if best is not None:
            ctx.metrics["tiles"] = dict(best.kwargs, num_warps=best.num_warps, num_stages=best.num_stages)
    return launch


SECTION = Section(
    name="09_triton",
    title="FlashAttention-2 forward in Triton: tiles, online softmax, causal stop (exercise 4)",
    variants=["triton", "triton-tma"], bugs=["no-rescale", "local-causal", "gqa-index"], head_dims=(64, 128),
    dtypes=("fp16", "bf16"), default={"b": 1, "h": 8, "t": 1024, "d": 64, "dtype": "fp16"},
    cpu_default={"t": 100}, cpu_seconds=cpu_seconds,  # T=100: 4 Q tiles by 7 K/V tiles, both last ones ragged
    build="solution", modules=(triton,), print_metrics=("tiles",),
    # A tile reaches at most BLOCK_M rows past the end of Q and O, BLOCK_N past K and V: a guard region
    # that long after each turns a load or store without its mask into a verdict that names it.
    guard_rows=max([bm for bm, *_ in GPU_TILES] + [bn for _, bn, *_ in GPU_TILES] + list(CPU_TILES.values())),
    guard_hints={"read": "full_end not rounded down to BLOCK_N?", "write": "a store without the row mask (row_ok)?"})

if __name__ == "__main__":
    main(SECTION, forward)
