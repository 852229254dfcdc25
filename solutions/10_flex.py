#!/usr/bin/env python3
# 10 FlexAttention: attention variants as two small Python functions (§12.10, pitfall 10).
#
# What it is: PyTorch's FlexAttention takes the FlashAttention kernel as given and lets you change
# two things, as Python functions of the indices that torch.compile turns into a fused Triton
# kernel:
#   score_mod(score, b, h, q_idx, kv_idx) -> the new score      (ALiBi's bias, a soft cap)
#   mask_mod(b, h, q_idx, kv_idx)         -> keep this pair?    (a sliding window, documents)
# A mask_mod also becomes a BlockMask: per (Q block, K/V block), none / part / all of the pairs
# kept, so whole blocks are skipped, as 03 and 07 skip tiles by hand.
# Positions are the lab's: query q_idx sits at key position q_idx + (T_kv - T_q) (bottom-right
# alignment, attention_math.h); FlexAttention's own causal examples use q_idx >= kv_idx, which is
# top-left: the same only when T_q = T_kv.
#
# Pitfall 10: a score_mod that captures a Python float is compiled for that value; a new value is a
# guard failure and a recompile (after 8 recompiles PyTorch gives up and runs the call unfused).
# `--values N` runs N soft-cap values both ways, compiled with Inductor, and counts the compiles
# from torch._dynamo's own counters: N for the float, 1 for the tensor (pitfall_10 says why it
# pins Dynamo's float handling). The fix: capture a tensor and change its contents.
#
# Exercises (ch12/10_flex.md): the four variants as FlexAttention functions (EXERCISE alibi,
# softcap, window, document).
# Run: python3 labs/10_flex.py --cpu --variant softcap --t 64 --h 2   (your stub, eager on the CPU)
#      python3 solutions/10_flex.py --variant window --causal --window 256 --t 4096 --h 16 --d 128
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common" / "python"))
try:
    from labharness import Section, main, mods, probes, record  # noqa: E402
except ModuleNotFoundError as missing:  # one line and exit 77 (cannot run here), not a traceback
    venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python3"  # where scripts/lab made one
    elsewhere = venv.exists() and Path(sys.prefix).resolve() != venv.parents[1].resolve()  # (not run under it)
    how = f"run it with {venv}" if elsewhere else "scripts/lab run 10 installs what the section needs"
    print(f"10_flex: cannot run here: the Python package '{missing.name}' is missing ({how})")
    sys.exit(77)

ROOT = Path(__file__).resolve().parents[1]


def make_score_mod(variant, torch, p, cap, slopes):
    """The variant's score_mod (None where the variant has none). `cap` and `slopes` are tensors:
    changing their contents changes the function without a recompile."""
    shift = p.t_kv - p.t_q
    if variant == "alibi":
        # BEGIN EXERCISE alibi: ALiBi, score + slope[h]·(kv_idx - position of q_idx); 0 on the diagonal.
        #   The query's key position is q_idx + shift (bottom-right alignment).
        def alibi(score, b, h, q_idx, kv_idx):
            return score + slopes[h] * (kv_idx - (q_idx + shift))
        return alibi
        # STUB: return None
        # END EXERCISE
    if variant == "softcap":
        # BEGIN EXERCISE softcap: the soft cap, cap·tanh(score / cap), with cap a captured TENSOR.
        #   (A float gives the same O, but the check tells them apart: use `cap` as it comes.)
        def soft_cap(score, b, h, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)
        return soft_cap
        # STUB: return None
        # END EXERCISE
    return None


def make_mask_mod(variant, torch, p, doc_ids):
    """The variant's mask_mod: True where the pair attends (None: every pair)."""
    shift, w = p.t_kv - p.t_q, p.window
    if variant == "window":
        # BEGIN EXERCISE window: causal sliding window of W keys ending at the query's position.
        def sliding_window(b, h, q_idx, kv_idx):
            pos = q_idx + shift
            return (kv_idx <= pos) & (kv_idx > pos - w)
        return sliding_window
        # STUB: return None
        # END EXERCISE
    if variant == "document":
        # BEGIN EXERCISE document: same document as the query's position (doc_ids, a tensor over key
        #   positions; clamp the position into [0, T_kv) to index it), and causal if p.causal.
        def same_document(b, h, q_idx, kv_idx):
            pos = q_idx + shift
            keep = doc_ids[kv_idx] == doc_ids[torch.clamp(pos, 0, p.t_kv - 1)]
            return keep & (kv_idx <= pos) if p.causal else keep
        return same_document
        # STUB: return None
        # END EXERCISE
    if p.causal:
        return lambda b, h, q_idx, kv_idx: kv_idx <= q_idx + shift
    return None


def reads_cap_as_a_number(torch, p, slopes):
    """Pitfall 10, checked: whether the softcap score_mod reads `cap` as a Python number. The output
    cannot tell (the same O either way); a gradient can: none reaches a tensor read as a number."""
    import warnings
    cap = torch.tensor(20.0, requires_grad=True)
    idx = torch.zeros((), dtype=torch.int64)
    try:  # torch warns of a requires_grad tensor read as a number: that is what the probe looks for
        with torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = make_score_mod("softcap", torch, p, cap, slopes)(torch.tensor(30.0), idx, idx, idx, idx)
            if not (torch.is_tensor(y) and y.requires_grad):
                return True
            y.sum().backward()
    except Exception:  # the run itself shows what the function raises, with its line
        return False
    return cap.grad is None or float(cap.grad) == 0.0


def flex_fns(torch):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    return flex_attention, create_block_mask


def forward(ctx):
    import torch
    p, o = ctx.problem, ctx.options
    flex_attention, create_block_mask = flex_fns(torch)
    dev = ctx.q.device
    cap = torch.tensor(float(o.softcap), device=dev)
    slopes = torch.tensor(mods.alibi_slopes(p.h), dtype=torch.float32, device=dev)
    ids = mods.document_ids(p.t_kv, o.docs, o.seed)
    doc_ids = torch.tensor(ids, device=dev)
    # the fp64 reference's view of the same variant (common/python/labharness/mods.py)
    ref = {"alibi": {"score": mods.alibi(p)}, "softcap": {"score": mods.softcap(o.softcap)},
           "document": {"mask": mods.document(p, ids)}}
    ctx.mods = ref.get(o.variant)
    if o.variant == "document":
        ctx.metrics["documents"] = int(ids.max()) + 1
        # the lab's FLOP convention for a mask: 4·D per visible pair
        import numpy as np
        rows = np.arange(p.t_q)[:, None]
        vis = mods.document(p, ids)(0, 0, rows, np.arange(p.t_kv)[None, :])
        ctx.flops = 4.0 * p.d * float(vis.sum()) * p.b * p.h

    score_mod = make_score_mod(o.variant, torch, p, cap, slopes)
    mask_mod = make_mask_mod(o.variant, torch, p, doc_ids)
    needs = {"alibi": score_mod, "softcap": score_mod, "window": mask_mod, "document": mask_mod}
    if needs[o.variant] is None:  # the check's verdict, so that each variant's stub fails in its own words
        maker = "make_score_mod" if o.variant in ("alibi", "softcap") else "make_mask_mod"
        ctx.metrics["failure"] = f"EXERCISE {o.variant} is not written yet: {maker}() returns None for it, so nothing runs"
        return lambda: None
    # The exercise's function asked directly against the reference's: a wrong mask or score names the
    # first (q_idx, kv_idx) where it differs (the run goes on: the check says what the output shows).
    probe = (probes.score_probe(o.variant, torch, p, score_mod, cap, dev) if score_mod is not None else "") or \
        (probes.mask_probe(o.variant, torch, p, mask_mod, ids, dev) if mask_mod is not None else "")
    if probe:
        ctx.metrics["failure"] = probe
    elif o.variant == "softcap" and reads_cap_as_a_number(torch, p, slopes):  # the run goes on: O is right
        ctx.metrics["failure"] = ("EXERCISE softcap reads cap as a Python number (float(cap), cap.item()): O is "
                                  "right, but on a GPU every new cap value compiles the kernel again (pitfall 10); "
                                  "use the tensor cap as it comes")

    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=p.t_q, KV_LEN=p.t_kv, device=dev)
        sparsity = float(block_mask.sparsity())  # % of (Q block, K/V block) pairs skipped whole
        if 0 <= sparsity <= 100:  # (shapes smaller than one 128 x 128 block give no meaningful figure)
            ctx.metrics["blocks_skipped_pct"] = round(sparsity, 1)
    if ctx.on_gpu:
        attend = torch.compile(flex_attention)  # the fused Triton kernel
    else:
        import warnings  # eager on purpose here: PyTorch's advice to compile is for speed, not needed
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        attend = flex_attention  # eager: the unfused reference implementation (fine on small shapes)
    qt, kt, vt = (x.transpose(1, 2) for x in (ctx.q, ctx.k, ctx.v))  # [B, H, T, D] views
    gqa = p.h != p.h_kv

    try:  # the LSE: return_aux where this PyTorch has it (return_lse is deprecated there)
        from torch.nn.attention.flex_attention import AuxRequest
        want_lse = {"return_aux": AuxRequest(lse=True)}
    except ImportError:
        want_lse = {"return_lse": True}

    # Below 128 query rows the compiled path picks FlexAttention's decoding kernel, which packs a GQA
    # group's rows into one block of next_pow2(T_q * group) rows; past 128 such a block no longer
    # divides the block mask's 128-row blocks and PyTorch 2.11 finds no kernel configuration at all
    # (NoValidChoicesError). The main kernel handles every shape, so such shapes are sent there.
    if ctx.on_gpu and gqa and p.t_q < 128 and p.t_q * (p.h // p.h_kv) > 128:
        want_lse["kernel_options"] = {"FORCE_USE_FLEX_ATTENTION": True}

    def launch():
        out, aux = attend(qt, kt, vt, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa, **want_lse)
        lse = aux.lse if hasattr(aux, "lse") else aux
        ctx.o.copy_(out.transpose(1, 2))
        ctx.lse.copy_(lse.float())
    # timed: the attention call alone (the copies into the lab's [B, T, H, D] layout are not FlexAttention's)
    ctx.metrics["timed_launch"] = lambda: attend(qt, kt, vt, score_mod=score_mod, block_mask=block_mask,
                                                 enable_gqa=gqa, **want_lse)
    if o.values > 0:
        pitfall_10(ctx, torch, flex_attention, qt, kt, vt, gqa)
    if o.against_07:
        ctx.after = lambda timing: against_07(ctx, timing)
    return launch


def capture_float(torch, cap):
    def soft_cap(score, b, h, q_idx, kv_idx):  # `cap` is a Python float: a constant of the graph
        return cap * torch.tanh(score / cap)
    return soft_cap


def capture_tensor(torch, cap):
    def soft_cap(score, b, h, q_idx, kv_idx):  # `cap` is a tensor: an input of the graph
        return cap * torch.tanh(score / cap)
    return soft_cap


def pitfall_10(ctx, torch, flex_attention, q, k, v, gqa):
    """N soft-cap values through a captured Python float, then through a captured tensor, each way
    compiled with Inductor (the fused kernel a user gets): compiles counted by torch._dynamo's own
    counters (frames compiled), each launch timed (wall clock, compile included). The float must
    compile once per value and the tensor once, else the run fails: the lesson is what it measures."""
    from torch._dynamo.utils import counters
    n = ctx.options.values
    values = [10.0 + 2.5 * i for i in range(n)]
    sync = torch.cuda.synchronize if ctx.on_gpu else (lambda: None)
    if not ctx.on_gpu:  # Inductor's C++ build on a machine without CUDA warns of it once: not ours to say
        import logging
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    # Dynamo's defaults turn a float closure into a symbolic input at its second value ("automatic
    # dynamic": specialize_float is False), and Inductor's flex_attention lowering cannot compile a
    # score_mod that reads a symbolic float (InductorError ... unbacked_bindings). specialize_float=True
    # makes a captured float what the pitfall is about, a constant of the graph guarded by value: one
    # compile per new value. The recompile limit (8 per function by default; past it Dynamo stops
    # compiling and runs flex_attention unfused) is raised to N so that every value shows its compile.
    config = dict(specialize_float=True, recompile_limit=max(int(torch._dynamo.config.recompile_limit), n))
    # Inductor's graph cache on disk would turn the compiles of an earlier run of the same values into
    # look-ups: off here, so every launch that compiles shows what a compile costs.
    import torch._inductor.config as inductor_config
    if not ctx.options.quiet:  # said before the compiles' silence, not after it
        print(f"note: --values {n} compiles FlexAttention {n + 1} times with Inductor (once per captured float "
              f"value, then once with the value as a tensor); each takes "
              f"seconds{'' if ctx.on_gpu else ' on a CPU, the first one the longest'}", flush=True)
    results, last = {}, {}
    for how in ("float", "tensor"):
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(flex_attention, backend="inductor")
        cap_t = torch.tensor(values[0], device=q.device)
        times = []
        with torch._dynamo.config.patch(**config), inductor_config.patch(fx_graph_cache=False):
            for i, c in enumerate(values):
                if how == "float":
                    score_mod = capture_float(torch, c)
                else:
                    cap_t.fill_(c)
                    score_mod = capture_tensor(torch, cap_t)
                t0 = time.perf_counter()
                try:
                    out = compiled(q, k, v, score_mod=score_mod, enable_gqa=gqa)
                    sync()
                except Exception as e:  # a compiler error says which value of which way it met
                    lines = [x for x in str(e).strip().splitlines() if x.strip()]  # the first says what
                    why = lines[0][:200] if lines else ""
                    raise RuntimeError(f"pitfall 10: torch.compile(flex_attention) failed on the captured {how} "
                                       f"= {c} (value {i + 1} of {n}): {type(e).__name__}: {why}") from None
                times.append((time.perf_counter() - t0) * 1e3)
        last[how] = out.float()
        frames = counters["frames"]
        later = sorted(times[1:])
        results[how] = {"compiles": int(frames.get("ok", 0)),
                        "not_compiled": int(frames.get("total", 0)) - int(frames.get("ok", 0)),
                        "graphs": int(counters["stats"].get("unique_graphs", 0)),
                        "first_ms": round(times[0], 2),
                        "median_later_ms": round(later[len(later) // 2], 3) if later else None,
                        "total_ms": round(sum(times), 1)}
    torch._dynamo.reset()
    diff = float((last["float"] - last["tensor"]).abs().max())
    ctx.metrics["pitfall_10"] = dict(values=n, backend="inductor", last_value_max_abs_diff=diff, **results)
    if not ctx.options.quiet:  # (the record holds the same numbers)
        print(f"  pitfall 10 ({n} soft-cap values, torch.compile backend inductor):")
        for how, r in results.items():
            print(f"    captured {how:<6}: {r['compiles']} compile(s), first launch {r['first_ms']} ms, "
                  f"later launches {r['median_later_ms']} ms median, all {r['total_ms']} ms")
    want = {"float": n, "tensor": 1}
    wrong = [f"captured {how} compiled {results[how]['compiles']} time(s), expected {w}" for how, w in want.items()
             if results[how]["compiles"] != w or results[how]["not_compiled"]]
    tol = 2.0 ** -6 if ctx.problem.dtype == "bf16" else 2.0 ** -9  # a few roundings of O (|O| < 2)
    if diff > tol:
        wrong.append(f"the two ways differ by {diff:.3g} on the last value (> {tol:.3g})")
    if wrong:
        ctx.metrics["failure"] = "pitfall 10: " + "; ".join(wrong)


def against_07(ctx, timing):
    """Section 07's `window` kernel on the same problem, in the same run. With --json its record
    joins ours as variant `07-window` of this section (field metrics.kernel_of says whose kernel
    it is), so this section's table holds both times on one row."""
    import json
    import tempfile
    p, o = ctx.problem, ctx.options
    # scripts/lab's build: the solution's 07, or in a student release (no solutions) the student's own
    bin_dir = Path(os.environ.get("LAB_BUILD_DIR") or ROOT / "build") / "bin"
    exe = next((bin_dir / n for n in ("07_sliding_window", "lab_07_sliding_window") if (bin_dir / n).exists()),
               bin_dir / "07_sliding_window")
    if not exe.exists():  # (a release has no solution to build: the student's own lab is what runs)
        print(f"  07       no build of section 07 in {bin_dir}: no comparison (scripts/lab run 07 builds yours)")
        return
    args = [str(exe), "--variant", "window", "--b", str(p.b), "--h", str(p.h), "--h-kv", str(p.h_kv),
            "--t", str(p.t_q), "--t-kv", str(p.t_kv), "--d", str(p.d), "--dtype", p.dtype, "--causal",
            "--window", str(p.window), "--warmup", str(o.warmup), "--iters", str(o.iters), "--quiet",
            "--seed", str(o.seed)] + ([] if ctx.on_gpu else ["--cpu"])
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / "07.json"
        r = subprocess.run(args + (["--json", str(tmp)] if o.json else []), capture_output=True, text=True)
        recs = json.loads(tmp.read_text()) if o.json and tmp.exists() else []
    line = (r.stdout + r.stderr).strip().splitlines()
    ctx.metrics["against_07"] = {"exit": r.returncode, "line": line[-1] if line else ""}
    for rec in recs:
        rec.update(section="10_flex", variant="07-window")
        rec["metrics"]["kernel_of"] = "07_sliding_window"
        record.append(o.json, rec)
    print(f"  07       {line[-1] if line else '(no output)'} (exit {r.returncode}"
          f"{'; its record is in --json as variant 07-window' if recs else ''})")


def validate(p, o):
    if o.variant == "window" and p.window < 1:
        return "--variant window needs --causal --window W"
    if o.variant != "window" and p.window > 0:
        return "--window belongs to --variant window"
    if not (math.isfinite(o.softcap) and o.softcap > 0):  # cap·tanh(s/cap) is NaN at an infinite cap
        return "--softcap must be a finite number > 0"
    if o.docs < 1:
        return "--docs must be >= 1"
    if o.variant == "document" and o.docs > p.t_kv:  # each document holds at least one key
        return f"--docs must be <= T_kv ({p.t_kv} here): each document holds at least one key"
    if o.values < 0 or o.values > 64:
        return "--values must be in [0, 64]"
    if o.values == 1:  # the float's second value is its first recompile
        return "--values 1 shows no recompile: give 2 or more soft-cap values"
    if o.values and o.variant != "softcap":  # the demo runs soft caps whatever the variant
        return "--values runs pitfall 10 on soft caps: it needs --variant softcap"
    if o.against_07 and o.variant != "window":
        return "--against-07 compares the window variant with section 07"
    return ""


def extra_options(ap):
    ap.add_argument("--softcap", type=float, default=20.0, help="Soft cap of --variant softcap (default %(default)s)")
    ap.add_argument("--docs", type=int, default=3, help="Documents of --variant document (seeded cuts) (default %(default)s)")
    ap.add_argument("--values", type=int, default=0,
                    help="Pitfall 10 (--variant softcap): run N >= 2 soft-cap values through a captured float "
                         "and a captured tensor")
    ap.add_argument("--against-07", action="store_true", help="Also time section 07's window kernel on this problem")


def cpu_seconds(p):
    """Rough time of --cpu: the eager path builds every score of [B, H, T_q, T_kv] in fp32, whatever
    the mask (about 0.2 µs each on a laptop core: the default shape takes seconds, T=4096 half a
    minute)."""
    return 2e-7 * p.b * p.h * p.t_q * p.t_kv


SECTION = Section(
    name="10_flex",
    title="FlexAttention: score_mod / mask_mod variants, block masks, and the recompile pitfall (§12.10)",
    variants=["softcap", "alibi", "window", "document"], bugs=[], head_dims=(64, 128), dtypes=("fp16", "bf16"),
    default={"b": 1, "h": 8, "t": 1024, "d": 64, "dtype": "bf16"}, supports_window=True,
    build="solution",
    validate=validate, extra_options=extra_options, cpu_backend="torch",
    cpu_what="FlexAttention's eager (unfused) implementation on the CPU: small shapes", cpu_seconds=cpu_seconds,
    print_metrics=("blocks_skipped_pct", "documents"))

if __name__ == "__main__":
    main(SECTION, forward)
