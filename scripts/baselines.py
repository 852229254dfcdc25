#!/usr/bin/env python3
"""Library baselines, timed in the same run as the lab's kernels and written as result records
(schema v1, build "baseline") so every number of ours has the library's beside it.

  baselines.py --section 03_v2_loop_order --spec '{"variants": ["sdpa-efficient"], "b": 1, "h": 32,
                "t": 4096, "d": 64, "dtype": "fp32", "causal": false}' --json out.json
  baselines.py --ceilings --json ceilings.json      # copy bandwidth, fp32 (no TF32) and bf16 GEMM
  baselines.py --serve    # requests on stdin, one JSON line each: {"section", "spec", "json"}

`--serve` is how `scripts/lab bench` calls it: one process for a whole sweep, so PyTorch is
imported once and each library's compiled kernels (FlashAttention-4's CuTe DSL, FlashInfer's JIT
modules, FlexAttention's) stay loaded from one shape to the next. Each request is answered by its
report lines and then a line `SERVE_DONE <exit code>`.

Variants (LIBRARIES below, one function each): sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math
(torch SDPA with one backend forced), eager (unfused: matmul, softmax, matmul, as a user would
write it), flex (FlexAttention, compiled, with a causal or sliding-window block mask: spec key
"window"), fa4 (FlashAttention-4, flash_attn.cute). Tensors use the lab's layout [B, T, H, D] (SDPA
sees a transposed view). Each baseline is checked on a sample of rows against float64 before it is
timed.

A spec with "backward": true times the library's backward instead (section 11): two records per
variant, metrics.pass "backward" (torch.autograd.grad on a saved graph, the forward outside the
timed region; 2.5x the forward FLOPs) and "forward+backward" (3.5x), after dQ, dK, dV are checked
against float64 gradients on sampled query and key rows. Record schema and timing method:
results/README.md. Exit 77 when PyTorch or a GPU is missing.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOL = {"fp32": 1e-4, "fp16": 4e-3, "bf16": 3e-2}  # max |error| vs float64 on the sampled rows


def visible_pairs(tq, tkv, causal, window):
    """(query, key) pairs that attend, exactly, with the lab's bottom-right alignment."""
    total = 0
    for i in range(tq):
        pos = i + tkv - tq
        end = min(tkv, pos + 1) if causal else tkv
        begin = max(0, pos - window + 1) if window else 0
        total += max(0, end - max(begin, 0)) if end > 0 else 0
    return total


def flops(b, h, tq, tkv, d, causal, window=None):
    """The lab's one convention: 4·B·H·T_q·T_kv·D, halved for causal; 4·D per visible pair with a window."""
    if window:
        return 4.0 * b * h * d * visible_pairs(tq, tkv, causal, window)
    f = 4.0 * b * h * tq * tkv * d
    return f / 2 if causal else f


# TFLOP/s of a pass count a multiple of the forward's FLOPs, the convention FlashAttention's papers use:
# the backward's five GEMMs (S, dP, dV, dK, dQ) against the forward's two, and both passes together.
FLOP_FACTOR = {"forward": 1.0, "backward": 2.5, "forward+backward": 3.5}


def pass_flops(pass_name, b, h, tq, tkv, d, causal, window=None):
    """The FLOPs a record of `pass_name` is credited with: FLOP_FACTOR x the forward's (halved for causal)."""
    return FLOP_FACTOR[pass_name] * flops(b, h, tq, tkv, d, causal, window)


def spec_passes(spec):
    """The passes one spec records, in order: the forward, or the backward alone and forward+backward."""
    return ["backward", "forward+backward"] if spec.get("backward") else ["forward"]


def spec_problem(spec):
    """Why a parsed spec cannot run (one line), or None. Checked before PyTorch is imported."""
    if not isinstance(spec, dict):
        return "a spec is a JSON object"
    unknown = [v for v in spec.get("variants", []) if v not in LIBRARIES]
    if unknown or not spec.get("variants"):
        return f"unknown variant {', '.join(map(repr, unknown)) or '(none given)'} (known: {', '.join(sorted(LIBRARIES))})"
    missing = [k for k in ("b", "h", "t", "d") if not isinstance(spec.get(k), int) or spec[k] < 1]
    if missing:
        return f"spec needs positive integers {', '.join(missing)}"
    if spec.get("dtype", "bf16") not in TOL:
        return f"dtype {spec.get('dtype')!r} is not one of {', '.join(TOL)}"
    if spec.get("backward") not in (None, True, False):
        return "\"backward\" is true or false"
    if spec.get("backward") and spec.get("window"):
        return "a backward spec takes no window (its float64 gradients are of plain or causal attention)"
    if spec.get("backward") and spec.get("dtype", "bf16") == "fp32":
        return "a backward spec is fp16 or bf16 (the lab's backward is a 16-bit section)"
    return None


def visibility_mask(torch, tq, tkv, causal, window, device):
    """[T_q, T_kv] bool, True where the key is masked out (bottom-right aligned, as the reference)."""
    pos = torch.arange(tq, device=device)[:, None] + (tkv - tq)
    j = torch.arange(tkv, device=device)[None, :]
    masked = torch.zeros(tq, tkv, dtype=torch.bool, device=device)
    if causal:
        masked |= j > pos
    if window:
        masked |= j <= pos - window
    return masked


def spec_command(spec):
    """The command a baseline record carries for its spec (bench --resume matches records by it)."""
    return "scripts/baselines.py --spec " + json.dumps(spec, separators=(",", ":"))


def git_sha():
    if os.environ.get("LAB_GIT_SHA"):  # a tree exported without its .git, as the harness reads it
        return os.environ["LAB_GIT_SHA"]
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def gpu_info(torch):
    p = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    slug = name.lower().removeprefix("nvidia ").replace(" ", "-")
    return {"name": name, "cc": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
            "driver": torch.version.cuda and f"cuda {torch.version.cuda}", "slug": slug,
            "torch": torch.__version__}


def time_ms(torch, fn, warmup, iters):
    """Median, min, max ms of fn over iters runs, timed the way the C++ harness times a kernel
    (common/harness/device.cpp): every run queued before the first wait, so each interval is GPU time and
    not Python's dispatch of the call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    times = [start.elapsed_time(stop) for start, stop in events]
    return statistics.median(times), min(times), max(times)


def time_graph_ms(torch, fn, warmup, iters):
    """time_ms of fn captured once in a CUDA graph and replayed: each interval holds the kernels
    alone. A PyTorch call costs tens of µs of Python and dispatch on the host; queued eager calls of
    a decode step as short as that are paced by the host, not the GPU, so their time varies with the
    host's load, and a serving engine replays graphs for that reason. The lab's kernels are launched
    from C++ in a few µs, so their queued launches are GPU-paced already."""
    side = torch.cuda.Stream()  # capture wants the kernels warmed up off the default stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 1)):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return time_ms(torch, graph.replay, warmup, iters)


def faster_of(eager, graph):
    """(median, min, max, timing fields) of the faster of an SDPA call's two timings, each a
    (median, min, max) in ms, both medians kept. A library is measured at its best: replayed from
    a CUDA graph, a short decode step no longer waits for Python (the reason graphs are timed at
    all), but a long call can be faster eager (on the H200, cuDNN's long forwards are slower
    replayed from a graph than launched eagerly)."""
    use_graph = graph[0] <= eager[0]
    med, lo, hi = graph if use_graph else eager
    return med, lo, hi, {"method": "cuda-graph" if use_graph else "queued", "eager_median_ms": eager[0],
                         "graph_median_ms": graph[0]}


def timed(torch, variant, fn, warmup, iters):
    """(median, min, max, timing fields): SDPA and FlashInfer (whose decode a serving engine replays
    from a graph) timed both eagerly and replayed from a CUDA graph, the faster kept (faster_of);
    anything else (and these where capture fails) queued eagerly."""
    eager = time_ms(torch, fn, warmup, iters)
    if variant.startswith("sdpa-") or variant == "flashinfer":
        try:
            return faster_of(eager, time_graph_ms(torch, fn, warmup, iters))
        except Exception as e:  # a backend that cannot be captured keeps its eager time, and says why
            return (*eager, {"method": "queued", "graph_unavailable": f"{type(e).__name__}: {str(e)[:120]}"})
    return (*eager, {"method": "queued"})


# One function per library: (torch, q, k, v, causal, gqa, window) -> a callable computing O
# [B, H, T, D] from q, k, v [B, T, H, D]. A new library is one more function and one more entry.
LIBRARIES = {}


def library(*names):
    def register(fn):
        for name in names:
            LIBRARIES[name] = fn
        return fn
    return register


def no_window(variant, window):
    if window:
        raise ValueError(f"{variant} takes no window (flex and fa4 do)")


@library("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math")
def sdpa(torch, variant, q, k, v, causal, gqa, window=None):
    """PyTorch's scaled_dot_product_attention with one backend forced."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    no_window(variant, window)
    backend = {"sdpa-flash": SDPBackend.FLASH_ATTENTION, "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION, "sdpa-math": SDPBackend.MATH}[variant]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # [B, H, T, D] views

    def run():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=gqa)
    return run


@library("eager")
def eager(torch, variant, q, k, v, causal, gqa, window=None):
    """Unfused attention as a user writes it: S = QK^T, softmax, PV, S and P in HBM."""
    no_window(variant, window)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1])
    group = q.shape[2] // k.shape[2]
    ke = kt.repeat_interleave(group, dim=1) if group > 1 else kt
    ve = vt.repeat_interleave(group, dim=1) if group > 1 else vt
    tq, tkv = q.shape[1], k.shape[1]
    mask = visibility_mask(torch, tq, tkv, causal, None, q.device) if causal else None  # bottom-right aligned

    def run():
        s = (qt @ ke.transpose(-1, -2)) * scale
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s, dim=-1) @ ve
    return run


@library("flex")
def flex(torch, variant, q, k, v, causal, gqa, window=None):
    """FlexAttention with a (sliding-window) causal block mask, compiled once."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    tq, tkv = q.shape[1], k.shape[1]
    off, w = tkv - tq, window or 0

    def keep(b, h, q_idx, kv_idx):
        visible = kv_idx <= q_idx + off if causal else kv_idx >= 0
        return visible & (kv_idx > q_idx + off - w) if w else visible
    block_mask = create_block_mask(keep, B=None, H=None, Q_LEN=tq, KV_LEN=tkv, device=q.device)
    compiled = torch.compile(flex_attention)
    return lambda: compiled(qt, kt, vt, block_mask=block_mask, enable_gqa=gqa)


@library("fa4")
def fa4(torch, variant, q, k, v, causal, gqa, window=None):
    """FlashAttention-4 (the flash-attn-4 package, module flash_attn.cute), which takes the lab's
    [B, T, H, D] layout as it is, a sliding window as window_size, and differentiates through
    torch.autograd. Not importable: the baseline records the error."""
    from flash_attn.cute import flash_attn_func  # ImportError: recorded as "baseline unavailable"
    # The lab's window W: a query at position p sees keys p-W+1 .. p (bottom-right aligned, as FA4's).
    window_size = (window - 1, 0 if causal else None) if window else (None, None)

    def run():
        out = flash_attn_func(q, k, v, causal=causal, window_size=window_size)
        return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)  # (O, LSE) -> O [B, H, T, D]
    return run


def make_fn(torch, variant, q, k, v, causal, gqa, window=None):
    """q [B, T, H, D] etc. Returns a callable computing O [B, H, T, D] with the chosen library."""
    if variant not in LIBRARIES:
        raise SystemExit(f"baselines: unknown variant '{variant}' (known: {', '.join(sorted(LIBRARIES))})")
    return LIBRARIES[variant](torch, variant, q, k, v, causal, gqa, window)


def sample_error(torch, out, q, k, v, causal, rows=128, window=None):
    """Max |out - float64| over `rows` query rows of batch 0, every head."""
    tq, tkv, h, d = q.shape[1], k.shape[1], q.shape[2], q.shape[3]
    group = h // k.shape[2]
    idx = torch.unique(torch.cat([torch.tensor([0, tq - 1]), torch.randint(0, tq, (rows,))])).to(q.device)
    worst = 0.0
    for head in range(h):
        qh = q[0, idx, head].double()
        kh, vh = k[0, :, head // group].double(), v[0, :, head // group].double()
        s = qh @ kh.T / math.sqrt(d)
        s = s.masked_fill(visibility_mask(torch, tq, tkv, causal, window, q.device)[idx], float("-inf"))
        ref = torch.softmax(s, dim=-1) @ vh
        worst = max(worst, (out[0, head, idx].double() - ref).abs().max().item())
    return worst


# The gradients' tolerance: max |g - float64| over the sampled rows <= GRAD_TOL x max |float64| of the
# same gradient, relative because dK and dV shrink like 1/sqrt(T) (P is about 1/T per key), so any absolute
# bound a correct bf16 backward meets at T = 16384 would pass a zero. A zero or a wrong gradient is off by
# about max |float64|; a correct one by a few 16-bit roundings of P and dS.
GRAD_TOL = {"fp16": 1e-2, "bf16": 5e-2}


def reference_grads(torch, q, k, v, do, causal, rows=128):
    """float64 dQ on sampled query rows and dK, dV on sampled key rows, batch 0, every head:
    {"q_rows", "k_rows", "dq" [rows, H, D], "dk", "dv" [rows, H_kv, D]}. q, k, v, do [B, T, H, D].
    dK and dV of a key sum over every query row, so all rows are visited, a chunk of them at a time
    (one [chunk, T_kv] float64 block of P alive at once, never the whole matrix).
    D_i = dO_i · O_i takes O as the forward stores it, rounded to the inputs' type, as every
    FlashAttention backward (and the lab's) does. With the exact O instead, that rounding alone
    moves dQ by about scale · |D's rounding| · mean(K), which at long non-causal rows (where dQ
    itself is small) is over 5 % of max |dQ| in bf16 and 1 % in fp16: every library would fail."""
    tq, tkv, h, d = q.shape[1], k.shape[1], q.shape[2], q.shape[3]
    h_kv = k.shape[2]
    group, scale = h // h_kv, 1 / math.sqrt(d)
    pick = lambda n: torch.unique(torch.cat([torch.tensor([0, n - 1]), torch.randint(0, n, (rows,))])).to(q.device)
    q_rows, k_rows = pick(tq), pick(tkv)
    mask = visibility_mask(torch, tq, tkv, causal, None, q.device)
    chunk = max(1, (1 << 26) // tkv)

    def probs(qc, kh, m):  # softmax of the scaled scores; a row that sees no key is all zero (as the lab's O)
        s = (qc @ kh.T * scale).masked_fill(m, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)

    stored = lambda o: o.to(q.dtype).double()  # O as the forward writes it

    dq = torch.zeros(len(q_rows), h, d, dtype=torch.float64, device=q.device)
    dk = torch.zeros(len(k_rows), h_kv, d, dtype=torch.float64, device=q.device)
    dv = torch.zeros_like(dk)
    for head in range(h):
        g = head // group
        qh, doh = q[0, :, head].double(), do[0, :, head].double()
        kh, vh = k[0, :, g].double(), v[0, :, g].double()
        p = probs(qh[q_rows], kh, mask[q_rows])  # dQ_i = scale * sum_j P_ij (dP_ij - D_i) K_j
        dp = doh[q_rows] @ vh.T
        delta = (doh[q_rows] * stored(p @ vh)).sum(-1, keepdim=True)
        dq[:, head] = (p * (dp - delta)) @ kh * scale
        for c in range(0, tq, chunk):  # dV_j = sum_i P_ij dO_i, dK_j = scale * sum_i dS_ij Q_i
            qc, doc = qh[c:c + chunk], doh[c:c + chunk]
            p = probs(qc, kh, mask[c:c + chunk])
            delta = (doc * stored(p @ vh)).sum(-1, keepdim=True)
            pk = p[:, k_rows]
            dv[:, g] += pk.T @ doc
            dk[:, g] += (pk * (doc @ vh[k_rows].T - delta)).T @ qc * scale
    return {"q_rows": q_rows, "k_rows": k_rows, "dq": dq, "dk": dk, "dv": dv}


def grad_errors(ref, dq, dk, dv):
    """{name: {"max_abs_err", "max_abs_ref", "passed" (bool, set by the caller's tolerance)}} of a library's
    dQ, dK, dV [B, T, H, D] against reference_grads on its sampled rows (batch 0)."""
    out = {}
    for name, got, rows in (("dq", dq, ref["q_rows"]), ("dk", dk, ref["k_rows"]), ("dv", dv, ref["k_rows"])):
        want = ref[name]
        out[name] = {"max_abs_err": (got[0, rows].double() - want).abs().max().item(),
                     "max_abs_ref": want.abs().max().item()}
    return out


def grads_pass(errors, dtype_name):
    return all(e["max_abs_err"] <= GRAD_TOL[dtype_name] * max(e["max_abs_ref"], 1e-30) for e in errors.values())


UNAVAILABLE = "baseline unavailable"  # the check rule of a record whose library could not run here


def is_unavailable(record):
    """A library's record that says it could not run here (not installed, refused the shape)."""
    return record.get("build") == "baseline" and record.get("check", {}).get("rule") == UNAVAILABLE


def unavailable(rec, warmup, reason):
    rec.update(check={"passed": False, "max_abs_err": None, "rel_l2_err": None, "ref_err_bound": None,
                      "rule": UNAVAILABLE, "rows_checked": 0, "verdict": reason[:200]},
               timing={"method": "queued", "warmup": warmup, "iters": 0, "median_ms": None, "min_ms": None, "max_ms": None},
               metrics={"tflops": None, "hbm_gbps": None, "hbm_bytes_model": None, "extra_device_bytes": None,
                        **rec.get("metrics", {})})
    return rec


def run_backward_spec(torch, spec, base, q, k, v, warmup, iters):
    """Records of each variant's backward alone and forward+backward (metrics.pass says which), after
    its dQ, dK, dV pass the float64 check. Timed queued with CUDA events (time_ms): a backward takes
    milliseconds, so the host's dispatch of autograd is hidden behind the GPU's queue."""
    b, h, t, d = spec["b"], spec["h"], spec["t"], spec["d"]
    p = base["problem"]
    dtype_name, causal = p["dtype"], p["causal"]
    gen = torch.Generator(device="cuda").manual_seed(4321)
    do = ((torch.rand(q.shape, device="cuda", generator=gen) * 2 - 1)).to(q.dtype)  # dO [B, T, H, D]
    ref = reference_grads(torch, q, k, v, do, causal)
    q, k, v = (x.detach().requires_grad_(True) for x in (q, k, v))
    do_t = do.transpose(1, 2)  # the layout of the libraries' O [B, H, T, D]
    records = []
    for variant in spec["variants"]:
        recs = {name: {**base, "variant": variant, "metrics": {"pass": name}} for name in spec_passes(spec)}
        try:
            fn = make_fn(torch, variant, q, k, v, causal, p["h_kv"] != h, None)
            out = fn()
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), do_t, retain_graph=True)
            torch.cuda.synchronize()
            errors = grad_errors(ref, dq, dk, dv)
            del dq, dk, dv
            times = {"backward": time_ms(torch, lambda: torch.autograd.grad(out, (q, k, v), do_t, retain_graph=True),
                                         warmup, iters),
                     "forward+backward": time_ms(torch, lambda: torch.autograd.grad(fn(), (q, k, v), do_t),
                                                 warmup, iters)}
        except Exception as e:  # a backend that refuses the shape is recorded as such, not skipped silently
            why = f"{type(e).__name__}: {str(e)[:200]}"
            records += [unavailable(r, warmup, why) for r in recs.values()]
            print(f"  {variant:<15} unavailable: {why[:120]}", flush=True)
            continue
        passed = grads_pass(errors, dtype_name)
        worst = max(e["max_abs_err"] for e in errors.values())
        for name, rec in recs.items():
            med, lo, hi = times[name]
            f = pass_flops(name, b, h, t, p["t_kv"], d, causal)
            rec.update(check={"passed": passed, "max_abs_err": worst, "rel_l2_err": None,
                              "ref_err_bound": GRAD_TOL[dtype_name], "grad_errors": errors,
                              "rule": "max|g-fp64| <= tol x max|fp64| for g in dQ, dK, dV on sampled rows (D from the stored O)",
                              "rows_checked": (len(ref["q_rows"]) + len(ref["k_rows"])) * h},
                       timing={"method": "queued", "warmup": warmup, "iters": iters, "median_ms": med,
                               "min_ms": lo, "max_ms": hi},
                       metrics={"pass": name, "tflops": f / (med * 1e-3) / 1e12, "hbm_gbps": None,
                                "hbm_bytes_model": None, "extra_device_bytes": None, "flops_model": f,
                                "flops_convention": f"{name}: {FLOP_FACTOR[name]}x forward FLOPs"})
            records.append(rec)
            rel = ", ".join(f"{g} {e['max_abs_err'] / max(e['max_abs_ref'], 1e-30):.1e}" for g, e in errors.items())
            print(f"  {variant:<15} {name:<17} {med:9.4f} ms  {rec['metrics']['tflops']:7.2f} TFLOP/s  "
                  f"err/max {rel}{'' if passed else '  FAIL'}", flush=True)
        del out
    return records


def run_spec(torch, spec, section, warmup, iters):
    b, h, t, d = spec["b"], spec["h"], spec["t"], spec["d"]
    h_kv, t_kv = spec.get("h_kv", h), spec.get("t_kv", t)
    dtype_name, causal, window = spec.get("dtype", "bf16"), spec.get("causal", False), spec.get("window")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (TF32 would be a different precision)
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(1234)
    mk = lambda *shape, off: ((torch.rand(*shape, device="cuda", generator=gen) * 2 - 1) + off).to(dtype)
    q, k, v = mk(b, t, h, d, off=0.25), mk(b, t_kv, h_kv, d, off=0.25), mk(b, t_kv, h_kv, d, off=0.5)
    if spec.get("backward"):
        base = {"schema_version": 1, "section": section, "build": "baseline", "git_sha": git_sha(),
                "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": gpu_info(torch),
                "problem": {"b": b, "h": h, "h_kv": h_kv, "t_q": t, "t_kv": t_kv, "d": d, "dtype": dtype_name,
                            "causal": causal, "window": None, "page_size": None},
                "command": spec_command(spec)}
        return run_backward_spec(torch, spec, base, q, k, v, warmup, iters)
    records = []
    for variant in spec["variants"]:
        rec = {"schema_version": 1, "section": section, "variant": variant, "build": "baseline",
               "git_sha": git_sha(), "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "gpu": gpu_info(torch),
               "problem": {"b": b, "h": h, "h_kv": h_kv, "t_q": t, "t_kv": t_kv, "d": d, "dtype": dtype_name,
                           "causal": causal, "window": window, "page_size": None},
               "command": spec_command(spec)}
        try:
            fn = make_fn(torch, variant, q, k, v, causal, h_kv != h, window)
            out = fn()
            torch.cuda.synchronize()
            err = sample_error(torch, out, q, k, v, causal, window=window)
            med, lo, hi, how = timed(torch, variant, fn, warmup, iters)
        except Exception as e:  # a backend that refuses the shape is recorded as such, not skipped silently
            rec.update(check={"passed": False, "max_abs_err": None, "rel_l2_err": None, "ref_err_bound": None,
                              "rule": UNAVAILABLE, "rows_checked": 0, "verdict": f"{type(e).__name__}: {str(e)[:200]}"},
                       timing={"method": "queued", "warmup": warmup, "iters": 0, "median_ms": None, "min_ms": None, "max_ms": None},
                       metrics={"tflops": None, "hbm_gbps": None, "hbm_bytes_model": None, "extra_device_bytes": None})
            records.append(rec)
            print(f"  {variant:<15} unavailable: {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        f = flops(b, h, t, t_kv, d, causal, window)
        e = {"fp32": 4, "fp16": 2, "bf16": 2}[dtype_name]
        nbytes = (2 * b * t * h * d + 2 * b * t_kv * h_kv * d) * e
        rec.update(check={"passed": err <= TOL[dtype_name], "max_abs_err": err, "rel_l2_err": None,
                          "ref_err_bound": TOL[dtype_name], "rule": "max|out-fp64| on sampled rows <= dtype tolerance",
                          "rows_checked": 130 * h},
                   timing={**how, "warmup": warmup, "iters": iters, "median_ms": med, "min_ms": lo, "max_ms": hi},
                   metrics={"tflops": f / (med * 1e-3) / 1e12, "hbm_gbps": nbytes / (med * 1e-3) / 1e9,
                            "hbm_bytes_model": nbytes, "extra_device_bytes": None})
        records.append(rec)
        eager = (f"  ({how['method']}; eager {how['eager_median_ms']:.4f} ms, graph {how['graph_median_ms']:.4f} ms)"
                 if "graph_median_ms" in how else "")
        print(f"  {variant:<15} {med:9.4f} ms  {rec['metrics']['tflops']:7.2f} TFLOP/s  err {err:.2e}{eager}", flush=True)
        del out
    return records


def ceilings(torch, iters=20):
    """The GPU's ceilings measured now: every "% of ceiling" is relative to the same run."""
    n = 1 << 30  # 1 GiB each way
    src, dst = torch.empty(n, dtype=torch.uint8, device="cuda"), torch.empty(n, dtype=torch.uint8, device="cuda")
    src.random_()
    med, _, _ = time_ms(torch, lambda: dst.copy_(src), 3, iters)
    out = {"copy_gbps": 2 * n / (med * 1e-3) / 1e9}  # bytes read + bytes written
    torch.backends.cuda.matmul.allow_tf32 = False
    for name, dtype in (("fp32_gemm_tflops", torch.float32), ("bf16_gemm_tflops", torch.bfloat16)):
        m = 8192
        a, b = torch.randn(m, m, device="cuda").to(dtype), torch.randn(m, m, device="cuda").to(dtype)
        med, _, _ = time_ms(torch, lambda: a @ b, 3, iters if dtype != torch.float32 else 5)
        out[name] = 2 * m ** 3 / (med * 1e-3) / 1e12
    return out


SERVE_DONE = "SERVE_DONE"


def append_records(path, records):
    path = Path(path)
    old = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps(old + records, indent=1) + "\n")


def serve(torch, warmup, iters):
    """Answers requests from stdin until it closes (--serve): each request's spec is checked and run
    as `--spec` would, its records appended to its file; a failed request never ends the server."""
    for line in sys.stdin:
        if not line.strip():
            continue
        code = 0
        try:
            request = json.loads(line)
            spec = request["spec"]
            problem = spec_problem(spec)
            if problem:
                print(f"baselines: {problem}")
                code = 2
            else:
                append_records(request["json"], run_spec(torch, spec, request.get("section") or "baseline",
                                                         warmup, iters))
        except (Exception, SystemExit) as e:  # (make_fn's SystemExit: an unknown variant)
            print(f"baselines: {type(e).__name__}: {str(e)[:200]}")
            code = 2 if isinstance(e, (SystemExit, json.JSONDecodeError, KeyError)) else 1
        torch.cuda.empty_cache()  # the next shape starts with the memory this one took
        print(f"{SERVE_DONE} {code}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--section", help="the section whose shapes this mirrors (record field)")
    ap.add_argument("--spec", action="append", default=[], help="JSON shape + variants (repeatable)")
    ap.add_argument("--ceilings", action="store_true", help="measure copy bandwidth and GEMM rates")
    ap.add_argument("--json", help="append records (or write the ceilings) here")
    ap.add_argument("--serve", action="store_true", help="answer requests from stdin (scripts/lab bench)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    if not a.serve and not a.json:
        print("baselines: --json FILE is required (or --serve)")
        sys.exit(2)
    specs = []
    for text in a.spec:  # bad input is refused before PyTorch is even imported
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as e:
            print(f"baselines: --spec is not JSON ({e.msg}): {text[:80]}")
            sys.exit(2)
        problem = spec_problem(spec)
        if problem:
            print(f"baselines: {problem}")
            sys.exit(2)
        specs.append(spec)
    try:
        import torch
    except ImportError:
        print("baselines: cannot run here: PyTorch is not importable")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("baselines: cannot run here: no CUDA device visible to PyTorch")
        sys.exit(77)
    if a.serve:
        serve(torch, a.warmup, a.iters)
        return
    path = Path(a.json)
    if a.ceilings:
        c = ceilings(torch)
        c.update(gpu=gpu_info(torch), time_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), git_sha=git_sha())
        path.write_text(json.dumps(c, indent=1) + "\n")
        print(f"  ceilings: copy {c['copy_gbps']:.0f} GB/s, fp32 GEMM {c['fp32_gemm_tflops']:.1f} TFLOP/s, "
              f"bf16 GEMM {c['bf16_gemm_tflops']:.0f} TFLOP/s")
        return
    records = []
    for spec in specs:
        records += run_spec(torch, spec, a.section or "baseline", a.warmup, a.iters)
    append_records(path, records)



# FlashInfer: what production decode calls (§12.10.3). Batch decode over a paged KV cache in the NHD
# layout of sections 05/06 ([pages, page_size, H_kv, D]), pages in order, every sequence full length.
# flashinfer-python compiles its kernels on first use and keeps them in its own cache
# (~/.cache/flashinfer), so one bench compiles once. Not importable: the baseline records the error.
FLASHINFER_PAGE = 16
_flashinfer_workspace = {}


def flashinfer_decode_fn(torch, q, k, v, causal):
    """q [B, 1, H, D], k/v [B, T_kv, H_kv, D]. Returns a callable computing O [B, H, 1, D]."""
    import flashinfer  # ImportError: recorded as "baseline unavailable" with its message
    b, tq, h, d = q.shape
    t_kv, h_kv = k.shape[1], k.shape[2]
    if tq != 1:
        raise ValueError("the flashinfer baseline is decode: one query row per sequence (t = 1)")
    page = FLASHINFER_PAGE
    pages = -(-t_kv // page)
    pad = pages * page - t_kv

    def paged(x):  # [B, T_kv, H_kv, D] -> [B * pages, page, H_kv, D], the tail page zero-padded
        if pad:
            x = torch.cat([x, x.new_zeros(b, pad, h_kv, d)], dim=1)
        return x.reshape(b * pages, page, h_kv, d).contiguous()
    k_cache, v_cache = paged(k), paged(v)
    dev = q.device
    indptr = torch.arange(0, b + 1, device=dev, dtype=torch.int32) * pages
    indices = torch.arange(0, b * pages, device=dev, dtype=torch.int32)
    last = torch.full((b,), t_kv - (pages - 1) * page, device=dev, dtype=torch.int32)
    ws = _flashinfer_workspace.setdefault("buf", torch.empty(256 << 20, dtype=torch.uint8, device=dev))
    # GQA groups of 4+ query heads: FlashInfer's tensor-core decode path (its own advice for grouped heads)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, kv_layout="NHD", use_tensor_cores=h // h_kv >= 4)
    q3 = q[:, 0].contiguous()  # [B, H, D]
    if hasattr(wrapper, "plan"):
        wrapper.plan(indptr, indices, last, h, h_kv, d, page, pos_encoding_mode="NONE", q_data_type=q.dtype,
                     kv_data_type=k.dtype)
        return lambda: wrapper.run(q3, (k_cache, v_cache)).unsqueeze(2)
    wrapper.begin_forward(indptr, indices, last, h, h_kv, d, page, pos_encoding_mode="NONE", data_type=k.dtype)
    return lambda: wrapper.forward(q3, (k_cache, v_cache), pos_encoding_mode="NONE").unsqueeze(2)

@library("flashinfer")
def flashinfer(torch, variant, q, k, v, causal, gqa, window=None):
    no_window(variant, window)
    return flashinfer_decode_fn(torch, q, k, v, causal)


if __name__ == "__main__":
    main()
