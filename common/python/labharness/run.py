"""run_section for Python: parse -> validate -> check the output paths -> inputs -> poison ->
launch -> check -> time -> print -> record -> dump (harness.cpp's run_section, step for step)."""
import json
import os
import re
import sys
import time
from types import SimpleNamespace

import numpy as np

from . import backend, inputs, record, reference
from .options import BadInput, CannotRun, NotChecked, parse, parser_default


def _launch_and_fetch(s, o, ctx, launch):
    launch()
    if ctx.torch is not None and ctx.on_gpu:
        ctx.torch.cuda.synchronize()  # a fault inside the kernel surfaces here


def _time(ctx, launch, warmup, iters, flush_l2):
    torch = ctx.torch
    flush = torch.empty(int(ctx.gpu["l2_bytes"]) * 2, dtype=torch.uint8, device="cuda") if flush_l2 else None
    for _ in range(warmup):
        launch()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for a, b in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        a.record()
        launch()
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in zip(starts, ends))
    return {"method": "events", "warmup": warmup, "iters": iters, "median_ms": ms[len(ms) // 2],
            "min_ms": ms[0], "max_ms": ms[-1]}


def run(s, forward, argv):
    o = parse(argv, s)
    p = o.problem
    record.check_outputs(o)
    cpu = o.cpu or backend.cpu_requested(argv)
    if cpu and s.cpu_seconds and not o.quiet:
        slow = slow_on_cpu(s, p, s.cpu_seconds(p))
        if slow:  # said before the minutes of silence, not after them
            print(slow, flush=True)
    build = s.build
    for m in getattr(s, "modules", ()):
        backend.missing(m)
    torch = None
    gpu = {"name": "cpu"}
    if not cpu:
        torch = backend.import_torch(cuda=True, section=s.name)
        gpu = backend.gpu_info(torch)
        need = p.hbm_bytes()
        free, _ = torch.cuda.mem_get_info()
        if need > 0.95 * free:
            raise BadInput(f"{p.describe()} needs {need / 1e9:.3g} GB of device memory but {gpu['name']} has "
                           f"{free / 1e9:.3g} GB free")
    elif s.cpu_backend == "torch":
        torch = backend.import_torch(cuda=False)

    q, k, v = inputs.make_inputs(p, o.seed, o.magnitude)
    # Each buffer with its guard region after it (Section.guard_rows): NaN after Q, K, V, the poison
    # after O and the LSE, all filled here; the kernel gets views of the exact shapes.
    g = s.guard_rows
    shapes = {"q": q.shape, "k": k.shape, "v": v.shape, "o": (p.b, p.t_q, p.h, p.d), "lse": (p.b, p.h, p.t_q)}
    dtypes = {"q": p.dtype, "k": p.dtype, "v": p.dtype, "o": p.dtype, "lse": "fp32"}
    guard = {"q": g * p.h * p.d, "k": g * p.h_kv * p.d, "v": g * p.h_kv * p.d, "o": g * p.h * p.d, "lse": g}
    nan, poison = inputs.NAN_BITS, inputs.POISON_BITS
    whole = {"q": inputs.guarded(inputs.to_storage(q, p.dtype), guard["q"], nan[p.dtype]),
             "k": inputs.guarded(inputs.to_storage(k, p.dtype), guard["k"], nan[p.dtype]),
             "v": inputs.guarded(inputs.to_storage(v, p.dtype), guard["v"], nan[p.dtype]),
             "o": inputs.guarded(inputs.poisoned(shapes["o"], p.dtype), guard["o"], poison[p.dtype]),
             "lse": inputs.guarded(inputs.poisoned(shapes["lse"], "fp32"), guard["lse"], poison["fp32"])}
    ctx = SimpleNamespace(problem=p, options=o, variant=o.variant, bug=o.bug, on_gpu=not cpu, torch=torch,
                          gpu=gpu, metrics={}, host_inputs=(q, k, v))
    if not cpu:
        whole = {n: backend.to_device(torch, x, dtypes[n]) for n, x in whole.items()}
    elif s.cpu_backend == "torch":
        def host(x, dt):
            t = torch.from_numpy(x)
            return t.view(torch.bfloat16) if dt == "bf16" else t
        whole = {n: host(x, dtypes[n]) for n, x in whole.items()}
    views = {n: backend.leading(x, shapes[n]) for n, x in whole.items()}
    if cpu and s.cpu_backend != "torch":
        views = {n: backend.HostTensor(x, dtypes[n]) for n, x in views.items()}
    ctx.q, ctx.k, ctx.v, ctx.o, ctx.lse = (views[n] for n in ("q", "k", "v", "o", "lse"))

    if not o.quiet and cpu:
        shape = ""
        if o.cpu_defaults:  # not the shape that --help states and a GPU run takes
            ours = " ".join(f"{d.upper()}={getattr(o, d)}" for d in o.cpu_defaults)
            gpus = " ".join(f"{d.upper()}={s.default.get(d, parser_default(s, d))}" for d in o.cpu_defaults)
            shape = f", {p.describe()} ({ours} is --cpu's default; a GPU run's {gpus})"
        print(f"== {s.name} on the CPU{shape}: {s.cpu_what} ==")
    launch = forward(ctx)
    t0 = time.perf_counter()
    _launch_and_fetch(s, o, ctx, launch)
    first_s = time.perf_counter() - t0

    def outputs():
        """O (float32, the poison kept) and the LSE as the kernel left them, and how many elements of
        their guard regions it overwrote."""
        got = {n: backend.fetch(torch, whole[n], dtypes[n]) for n in ("o", "lse")}
        size = {n: int(np.prod(shapes[n])) for n in got}
        over = {n: int((~inputs.is_poison(inputs.from_storage(got[n][size[n]:], dtypes[n]))).sum()) for n in got}
        return (inputs.from_storage(got["o"][:size["o"]].reshape(shapes["o"]), p.dtype),
                got["lse"][:size["lse"]].reshape(shapes["lse"]).astype(np.float32), over)
    out_o, out_lse, over = outputs()
    overrun = written_past(s, p, over)
    if g and not overrun:
        overrun = read_past(s, p, ctx, launch, whole, guard, out_o, outputs)
    if not s.writes_lse:
        out_lse = None

    timing = {"method": "none", "warmup": 0, "iters": 0, "median_ms": None, "min_ms": None, "max_ms": None}
    if not cpu and o.iters > 0:
        if ctx.metrics.get("timed_launch"):
            launch = ctx.metrics.pop("timed_launch")
        timing = _time(ctx, launch, o.warmup, o.iters, o.flush_l2)
    ctx.metrics.pop("timed_launch", None)
    if getattr(ctx, "after", None):  # a section's own step after the timing (10: section 07 beside it)
        ctx.after(timing)
    if cpu:
        ctx.metrics["cpu_seconds"] = round(first_s, 3)

    rows = reference.rows_to_check(p, o.check, o.sample_rows, o.seed)
    c = reference.check(p, q, k, v, rows, out_o, out_lse, getattr(ctx, "mods", None))
    # The output may be right; the run is not. Its reasons lead (a cause: memory past a buffer's end,
    # a section's own), the output's check follows (the symptom).
    why = [x for x in (overrun, ctx.metrics.pop("failure", None)) if x]
    if why:
        if not c["passed"]:
            c["details"].insert(0, c["verdict"])
        c["details"][0:0] = why[1:]
        c["verdict"] = why[0]
        c["passed"] = False

    flops = getattr(ctx, "flops", None) or p.flops()
    timed = timing["median_ms"] is not None and timing["median_ms"] > 0
    tflops = flops / (timing["median_ms"] * 1e-3) / 1e12 if timed else None
    gbps = p.hbm_bytes() / (timing["median_ms"] * 1e-3) / 1e9 if timed else None
    if not o.quiet:
        bug = f"   --bug {o.bug}" if o.bug else ""
        print(f"{s.name} [{o.variant}] {build}   {p.describe()}{bug}")
        if not cpu:
            print(f"  gpu      {gpu['name']} (sm_{gpu['cc'].replace('.', '')}, {gpu['sms']} SMs)")
        scope = reference.check_scope(o.check, reference.count_rows(rows), p.b * p.h * p.t_q)
        print(f"  check    {c['verdict']}" + (f" ({scope})" if scope else ""))
        for d in c["details"]:
            print(f"           {d}")
        if timed:
            print(f"  time     {timing['median_ms']:.4g} ms median of {timing['iters']} "
                  f"(min {timing['min_ms']:.4g}, max {timing['max_ms']:.4g})")
            print(f"  rate     {tflops:.3g} TFLOP/s, {gbps:.4g} GB/s of modelled HBM traffic")
        for key, val in ctx.metrics.items():
            if key in getattr(s, "print_metrics", ()):
                print(f"  {key:<8} {val}")
    if o.quiet and not c["passed"]:  # why, even when quiet: the verdict and its first details, as the C++ harness
        print(f"  check    {c['verdict']}")
        for d in reference.shown_details(c["details"], 3):
            print(f"           {d}")
    print(f"{'PASS' if c['passed'] else 'FAIL'}: {s.name} {o.variant}{' (CPU)' if cpu else ''}")

    if o.json:
        metrics = dict(ctx.metrics, tflops=tflops, hbm_gbps=gbps, hbm_bytes_model=p.hbm_bytes(),
                       extra_device_bytes=0, flops_model=flops)
        g = {k: v for k, v in gpu.items() if k != "l2_bytes"}
        rec = record.make(s.name, o.variant, "cpu-model" if cpu else build, g, p.json(), c, timing, metrics,
                          argv_command(argv), o.bug)
        record.append(o.json, rec)
    if o.dump:
        record.dump_npy(o.dump, p, (q, k, v), out_o, out_lse, o, s.name)
    return 0 if c["passed"] else 1


def written_past(s, p, over):
    """One line where the kernel wrote into the guard region after O or the LSE, else ""."""
    said = [f"{n} elements of the guard region after {what} were overwritten"
            for what, n in (("O", over["o"]), ("the LSE", over["lse"])) if n]
    if not said:
        return ""
    what = "O" if over["o"] else "the LSE"
    if over["o"] and over["lse"]:
        what = "O and the LSE"
    hint = s.guard_hints.get("write", "a store without its row mask?")
    return f"{what} written past the last row (T_q = {p.t_q}): {' and '.join(said)}: {hint}"


def read_past(s, p, ctx, launch, whole, guard, out_o, outputs):
    """One line where O's NaN came from reading past the end of K and V, else "". The inputs' guard
    regions hold NaN; O is NaN where a value read from there reached it, or where the kernel makes a
    NaN of its own. Launched again with zeros there: the NaN that go were read past the end."""
    def nans(x):
        return int((np.isnan(x) & ~inputs.is_poison(x)).sum())
    before = nans(out_o)
    if not before:
        return ""
    for n in ("q", "k", "v"):
        backend.set_bits(whole[n], whole[n].shape[0] - guard[n], 0)
    backend.set_bits(whole["o"], 0, inputs.POISON_BITS[p.dtype])
    _launch_and_fetch(s, ctx.options, ctx, launch)
    after = nans(outputs()[0])
    for n in ("q", "k", "v"):  # as the first launch saw them
        backend.set_bits(whole[n], whole[n].shape[0] - guard[n], inputs.NAN_BITS[p.dtype])
    if after >= before:
        return ""
    hint = s.guard_hints.get("read", "a load without its mask?")
    which = f"{before} elements of O are" if not after else f"{before - after} of the {before} NaN elements of O are"
    return (f"{which} NaN because K and V past T_kv (= {p.t_kv}) hold NaN in this check: an unmasked load read keys "
            f"past the end ({hint})")


SLOW_CPU_SECONDS = 20


def _duration(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def slow_on_cpu(s, p, seconds):
    """One line before a --cpu run that will take long, or "" for one that takes seconds."""
    if seconds < SLOW_CPU_SECONDS:
        return ""
    smaller = ("--cpu without " + ", ".join(f"--{d}" for d in s.cpu_default) + " runs a small shape"
               if s.cpu_default else "a smaller --t or --h runs")
    try:  # scripts/lab's time limit for this run, where it started the program
        limit = float(os.environ.get("LAB_TIME_LIMIT_S", ""))
    except ValueError:
        limit = None
    stopped = (f", longer than the {limit:.0f} s scripts/lab gives a run (--timeout): it will be stopped first"
               if limit and seconds > limit else "")
    return (f"note: {p.describe()} under --cpu takes roughly {_duration(seconds)} on one laptop core{stopped}, in "
            f"silence until the verdict; {smaller} in seconds")


def argv_command(argv):
    return " ".join([os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0] else "python3"] + list(argv))


def shared_memory_shortfall(error):
    """Triton's OutOfResources (raised directly, or inside Inductor's error for FlexAttention) as the
    C++ programs say it: a kernel that needs more shared memory per block than this GPU grants
    cannot run here (exit 77); it is not a wrong answer. None for any other error."""
    m = re.search(r"out of resource: shared memory, Required: (\d+), Hardware limit: (\d+)", str(error))
    if not m:
        return None
    need, limit = (int(x) for x in m.groups())
    return (f"this kernel needs {(need + 1023) // 1024} KB of shared memory per block and this GPU allows "
            f"{limit // 1024} KB; smaller blocks or fewer stages (num_stages) would fit, or add --cpu")


def where_in_lab(error, program=None):
    """An error as the student can act on it: the innermost line of the section's own file that it
    passed through, and the original error where a wrapper hides it (Triton's interpreter raises
    InterpreterError(repr(e)) from e): "labs/09_triton.py:94 in _kv_sweep: AttributeError: ...".
    An error torch.compile (Dynamo) met while tracing a score_mod or mask_mod names the line it was
    tracing, which no traceback frame shows, and says what went wrong rather than its advice."""
    import traceback
    program = os.path.realpath(program or sys.argv[0])
    chain, e = [], error
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    root = chain[-1]
    here = None
    for exc in chain:
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.realpath(frame.filename) == program:
                here = frame
    traced = _traced_line(chain, program)  # inside the call that compiled it: the innermost
    if traced:
        here = traced
    text = str(root)
    lines = [" ".join(x.split()) for x in text.strip().splitlines() if x.strip()]
    if hasattr(root, "real_stack") or "TORCHDYNAMO_VERBOSE" in text:
        # Dynamo's message leads with what went wrong; its stacks and advice follow
        what = [x for x in lines if x.startswith("Explanation: ")][:1]
        said = ": ".join([lines[0]] + [x[len("Explanation: "):] for x in what]) if lines else ""
    else:  # (Triton's CompilationError quotes the source first: what is wrong comes last)
        said = lines[-1] if lines else ""
    said = f"{type(root).__name__}: {said}".rstrip(": ")
    if re.search(r"data-dependent (control flow|branching)", text, re.I):  # a Python `if` on a tensor
        said += (" (a score_mod or mask_mod sees its indices as tensors: write the condition with &, |, "
                 "torch.where, not a Python if)")
    elif "data-dependent expression" in text or "calling .item() on a Tensor" in text:  # a tensor made a number
        said = said.split(" We don't support vmap", 1)[0]  # (vmap's advice goes on to PyTorch's bug tracker)
        said += (" (a score_mod or mask_mod gets its score and indices as tensors: compute with torch ops such "
                 "as torch.tanh and torch.where, not math.*, float(), int() or .item())")
    if here is None:
        return said
    return f"{os.path.relpath(here.filename)}:{here.lineno} in {here.name}: {said}"


def _traced_line(chain, program):
    """The line of `program` that torch.compile was tracing when it failed, or None: Dynamo keeps
    the traced frames in `real_stack` and writes them into its message ("from user code:", and
    "Caused by: <code>  # <path, cut at the front>:<line> in <function>"), innermost last."""
    from traceback import FrameSummary
    found = []
    for exc in chain:
        text = str(exc)
        found += [f for f in getattr(exc, "real_stack", None) or () if os.path.realpath(f.filename) == program]
        found += [FrameSummary(program, int(line), fn) for path, line, fn in
                  re.findall(r'File "([^"]+)", line (\d+), in (\S+)', text) if os.path.realpath(path) == program]
        found += [FrameSummary(program, int(line), fn) for path, line, fn in
                  re.findall(r"Caused by: .*#\s*(\S+):(\d+) in (\S+)", text)
                  if program.endswith(path) and path.endswith(os.path.basename(program))]
        found += [FrameSummary(program, int(line), fn) for path, line, fn in
                  re.findall(r'File "([^"]+)", line (\d+), in (\S+)', _graph_stack(exc))
                  if os.path.realpath(path) == program]
    return found[-1] if found else None


def _graph_stack(exc):
    """Where the source of the graph line an error was raised on came from ("" if it was not raised
    in one): FlexAttention runs a score_mod eagerly as a traced graph (torch.fx) under vmap, so no
    frame of the student's function is on the stack; the graph's node keeps that frame in its
    stack_trace, the node named by the failing line ("item = child_3.item()")."""
    import linecache
    stacks, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code.co_filename
        if code.startswith("<eval_with_key>"):  # the generated forward of a GraphModule
            try:
                source = linecache.getlines(code)
                name = re.match(r"\s*(\w+) = ", source[tb.tb_lineno - 1]) if tb.tb_lineno <= len(source) else None
                graph = getattr(tb.tb_frame.f_locals.get("self"), "graph", None)
                stacks += [str(n.meta.get("stack_trace") or "") for n in (graph.nodes if graph and name else ())
                           if n.name == name.group(1)]
            except Exception:  # noqa: BLE001  (a hint only: the error itself is said either way)
                pass
        tb = tb.tb_next
    return "\n".join(stacks)


def main(section, forward, argv=None):
    """The section program's entry: runs it and exits with the lab's codes, never a traceback
    (LAB_TRACEBACK=1 shows one, for whoever debugs the harness)."""
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        from .options import parser_for
        parser_for(section).print_help()
        sys.exit(0)
    try:
        with np.errstate(all="ignore"):  # a NaN the kernel makes is the verdict's to say, not numpy's warning
            code = run(section, forward, argv)
    except BadInput as e:
        print(f"bad input: {e}", file=sys.stderr)
        code = 2
    except CannotRun as e:
        print(f"cannot run here: {e}", file=sys.stderr)
        code = 77
    except NotChecked as e:
        print(f"not checked here: {e}")
        code = 77
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception as e:  # noqa: BLE001  (one line, not a traceback)
        if os.environ.get("LAB_TRACEBACK"):
            raise
        short = shared_memory_shortfall(e)
        if short:
            print(f"cannot run here: {short}", file=sys.stderr)
            sys.stdout.flush()
            sys.exit(77)
        print(f"error: {where_in_lab(e)} (LAB_TRACEBACK=1 shows the whole traceback)", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.exit(code)
