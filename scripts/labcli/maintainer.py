"""The commands of whoever measures the lab on a GPU: bench (the sweeps behind the tables),
tables (TABLES.md, the README's table, the plots), ab (two builds alternating), gpu-check
(everything a GPU machine verifies, in one go) and deps (a vendored copy of the C++ dependencies)."""
import argparse
import csv
import json
import os
import shlex
import shutil
import signal
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from labcli.common import (BUILD, EXIT_BAD_INPUT, EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_PASS, EXIT_TIMEOUT, ROOT,
                           BadInput, LabError, build, folder_problem, git_sha, gpu_devices, has_gpu, is_python,
                           load_cases, no_gpu_reason, on_device, program, repo_relative, resolve_all, run_limited,
                           say, sections, targets)
from labcli.student import grading_example
from baselines import is_unavailable  # noqa: E402  (scripts/baselines.py: no PyTorch at import)
import cases  # noqa: E402


# ------------------------------------------------------------------------------------- bench
def gpu_slug(out):
    """The results folder of the GPU a record names ("NVIDIA H200" -> "h200")."""
    return out.get("gpu", {}).get("slug") or "unknown-gpu"


def bench_tags(names):
    """{section: its bench entries' tags} for those of `names` that have any."""
    tags = {s: sorted({e["tag"] for e in load_cases(s).get("bench", []) if e.get("tag")}) for s in names}
    return {s: t for s, t in tags.items() if t}


def kernel_run_id(variant, args, program=None):
    """What identifies one timed run of a sweep: the variant and the case's arguments (and the
    program, for an entry that runs another section's: a study such as 09's exercise 4)."""
    return (f"{program}:{variant}" if program else variant, " ".join(str(x) for x in args))


def baseline_spec_command(spec):
    """The command a baseline record carries for its spec, as scripts/baselines.py writes it."""
    import baselines  # (no PyTorch at import: it is imported where a baseline runs)
    return baselines.spec_command(spec)


def drop_baseline_records(path, command):
    """Removes the library records of one baseline command from a record file, if there are any:
    a resumed sweep that times a spec again (one of its libraries was missing) keeps none of the
    spec's older records, so the libraries of a row stay those of one run."""
    if path.exists():
        records = json.loads(path.read_text())
        path.write_text(json.dumps([r for r in records if not (r.get("build") == "baseline" and r.get("command") == command)]))


def done_in(records, sha, section=None):
    """The runs a sweep of `section` already has records of from commit `sha`: kernel run ids, and
    the baseline commands with the variants recorded for each. Records of other commits count for
    nothing, nor does a library's record that it could not run (a resume after installing it
    times it)."""
    kernels, baselines = set(), {}
    for r in records:
        if r.get("git_sha") != sha or is_unavailable(r):
            continue
        if r.get("build") == "baseline":
            baselines.setdefault(r.get("command", ""), set()).add(r["variant"])
        elif " --quiet " in r.get("command", ""):
            other = r.get("section") if section and r.get("section") not in (None, section) else None
            kernels.add(kernel_run_id(r["variant"], r["command"].split(" --quiet ", 1)[1].split(), other))
    return kernels, baselines


def compiler_caches(environ, build_dir):
    """The environment a bench gives the Python sections: Triton's kernel cache (with its autotuner's
    choices, 09) and Inductor's (10) in the build folder, so the runs of one bench, and the next
    bench in the same tree, compile a kernel once instead of once per process. A cache folder the
    caller has set is kept."""
    out = {}
    for var, folder in (("TRITON_CACHE_DIR", "triton-cache"), ("TORCHINDUCTOR_CACHE_DIR", "inductor-cache")):
        if not environ.get(var):
            out[var] = str(Path(build_dir) / folder)
    return out


def bench_baselines(data, tag, quick, no_baselines):
    """The baseline specs a bench run times beside the section: the case file's `baselines` for the
    sweep, and for a `--tag` study named in `baseline_tags` (a study on the sweep's shapes, which is
    compared with the libraries only if they are timed in its own run: the specs of its own
    entries' shapes); none for --quick."""
    if quick or no_baselines:
        return []
    if tag and tag not in data.get("baseline_tags", []):
        return []
    if tag:
        studied = [e["args"] for e in data.get("bench", []) if e.get("tag") == tag]
        return [spec for spec in data.get("baselines", []) if any(spec_matches_entry(spec, a) for a in studied)]
    return data.get("baselines", [])


def spec_matches_entry(spec, args):
    """Whether a baseline spec is the problem of a bench entry's arguments (same B, H, H_kv, T_q,
    T_kv, D, dtype, mask). An entry that leaves a size to the program's default matches nothing."""
    def value(flag, default=None):
        at = args.index(flag) + 1 if flag in args else len(args)
        return args[at] if at < len(args) else default
    try:
        entry = {k: int(value(f"--{k}")) for k in ("b", "h", "t", "d")}
        entry.update(h_kv=int(value("--h-kv", entry["h"])), t_kv=int(value("--t-kv", entry["t"])),
                     window=int(value("--window")) if "--window" in args else None)
    except (TypeError, ValueError):
        return False
    entry.update(dtype=value("--dtype"), causal="--causal" in args)
    want = {"b": spec["b"], "h": spec["h"], "t": spec["t"], "d": spec["d"], "dtype": spec.get("dtype", "bf16"),
            "h_kv": spec.get("h_kv", spec["h"]), "t_kv": spec.get("t_kv", spec["t"]),
            "window": spec.get("window"), "causal": bool(spec.get("causal"))}
    return entry == want


class BaselineServer:
    """scripts/baselines.py --serve, started at a bench's first library spec and kept for the rest:
    PyTorch imports once, and a library's compiled kernels (FlashAttention-4 compiles each of its
    kernels at first use, 15 to 30 s) are reused by every later shape. One spec at a time; a spec
    that outlives the time limit kills the server (the next spec starts a new one)."""

    def __init__(self, command=None):
        self.command = command or [sys.executable, str(ROOT / "scripts" / "baselines.py"), "--serve"]
        self.proc = None
        self.lines = None

    def start(self):
        import queue
        import subprocess
        import threading
        env = dict(os.environ, LAB_GIT_SHA=os.environ.get("LAB_GIT_SHA") or git_sha())
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env, start_new_session=True)
        self.lines = queue.Queue()  # a reader thread: a wait for a line can then have a time limit

        def read(out, lines):
            for line in out:
                lines.put(line)
            lines.put(None)  # the server ended
        threading.Thread(target=read, args=(self.proc.stdout, self.lines), daemon=True).start()

    def stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def run(self, section, spec, json_path, timeout):
        """(exit code, output, seconds) of one spec, as run_limited gives them."""
        import queue
        t0 = time.time()
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        request = json.dumps({"section": section, "spec": spec, "json": str(json_path)})
        out = []
        try:
            self.proc.stdin.write(request + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # the server died: its output (below) says why
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, t0 + timeout - time.time()))
            except queue.Empty:
                self.stop()
                out.append(f"TIMEOUT: stopped after {timeout:.0f} s")
                return EXIT_TIMEOUT, "\n".join(out) + "\n", time.time() - t0
            if line is None:  # ended without answering (cannot run here, or a crash): its lines say why
                code = self.proc.wait()
                self.proc = None
                if code < 0 or code not in (EXIT_BAD_INPUT, EXIT_CANNOT_RUN):
                    out.append(f"CRASHED: the baseline server ended with exit {code}")
                return code or EXIT_FAIL, "\n".join(out) + "\n", time.time() - t0
            if line.startswith("SERVE_DONE"):
                return int(line.split()[1]), "\n".join(out) + "\n", time.time() - t0
            out.append(line.rstrip("\n"))


def cmd_bench(a):
    names = resolve_all([a.section])
    others = sorted({e["program"] for s in names for e in load_cases(s).get("bench", []) if e.get("program")})
    build(targets(sorted(set(names) | set(others)), lab=False))
    failed = 0
    if any(is_python(s) for s in names):
        os.environ.update(compiler_caches(os.environ, BUILD))
    wanted = {v for s in names for spec in bench_baselines(load_cases(s), a.tag, a.quick, a.no_baselines)
              for v in spec["variants"]}
    if wanted and has_gpu():  # the libraries this sweep compares with, installed where missing
        from labcli import setup
        setup.ensure_baseline_packages(wanted)
    ceilings_note = None
    if a.ceilings:  # measured in the same run: every "% of ceiling" is relative to these
        staged = BUILD / "ceilings.json"
        staged.unlink(missing_ok=True)
        code, out, _ = run_limited([sys.executable, ROOT / "scripts" / "baselines.py", "--ceilings",
                                    "--json", staged], a.timeout)
        if code == EXIT_CANNOT_RUN:  # said once a kernel has run: without a GPU the kernels' reason is the one line
            ceilings_note = out.strip()
        else:
            say(out.strip())
        if staged.exists():  # beside the records of this GPU, where `tables` reads it (or in --out)
            dest = Path(a.out) if a.out else ROOT / "results" / gpu_slug(json.loads(staged.read_text()))
            dest.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staged), dest / "ceilings.json")
    for s in names:
        data = load_cases(s)
        sweep = data.get("bench", [])
        if not sweep:
            say(f"lab: {s} has no benchmark sweep in its case file")
            continue
        tmp = BUILD / f"bench_{s}.json"
        tmp.unlink(missing_ok=True)
        t0 = time.time()
        name = f"{s}.{a.tag or 'quick'}.json" if (a.tag or a.quick) else f"{s}.json"  # never over a full sweep

        def save():  # after every run: a sweep cut short (a time limit) keeps what it measured
            if not tmp.exists():
                return None
            records = [dict(r, command=repo_relative(r["command"])) if "command" in r else r
                       for r in json.loads(tmp.read_text())]
            dest = Path(a.out) if a.out else ROOT / "results" / gpu_slug(records[0])
            dest.mkdir(parents=True, exist_ok=True)
            (dest / name).write_text(json.dumps(records, indent=1) + "\n")
            return dest, len(records)
        if a.tag:
            sweep = [e for e in sweep if e.get("tag") == a.tag]
        else:
            sweep = [e for e in sweep if not e.get("tag")]
        if a.quick:  # one shape per section: the entries marked "quick", else the first
            sweep = [e for e in sweep if e.get("quick")] or sweep[:1]
        done_kernels, done_baselines = set(), {}
        if a.resume:  # a sweep cut short: keep what it measured at this commit, run the rest
            found = [Path(a.out) / name] if a.out else sorted((ROOT / "results").glob(f"*/{name}"))
            found = [f for f in found if f.exists()]
            if len(found) == 1:
                prior = [r for r in json.loads(found[0].read_text()) if r.get("git_sha") == git_sha()]
                done_kernels, done_baselines = done_in(prior, git_sha(), s)
                if prior:
                    tmp.write_text(json.dumps(prior))
                say(f"lab: resuming {found[0]}: {len(prior)} records of {git_sha()} kept")
            elif len(found) > 1:
                say(f"lab: --resume: {name} is in several folders ({', '.join(map(str, found))}); say --out")
                return EXIT_BAD_INPUT
        specs = bench_baselines(data, a.tag, a.quick, a.no_baselines)  # what a user would pick instead
        server = BaselineServer()

        def time_baselines(chosen):
            for spec in chosen:
                specs.remove(spec)
                command = baseline_spec_command(spec)
                if set(spec["variants"]) <= done_baselines.get(command, set()):
                    continue
                drop_baseline_records(tmp, command)  # a spec's libraries are timed in one run
                code, out, secs = server.run(s, spec, tmp, a.timeout)
                say(f"  baseline {s} {','.join(spec['variants'])} {spec.get('dtype')} T={spec['t']} "
                    f"{'causal' if spec.get('causal') else ''}: exit {code} {secs:.0f} s")
                say("\n".join("           | " + line for line in out.strip().splitlines()[-len(spec['variants']):]))
                save()
        for n, entry in enumerate(sweep, 1):
            other = entry.get("program")  # another section's program on this section's shape
            for v in entry.get("variants", data["variants"] if not other else []):
                if kernel_run_id(v, entry["args"], other) in done_kernels:
                    continue
                cmd = program(other or s, True) + ["--variant", v, "--json", tmp, "--quiet"] + entry["args"]
                code, out, secs = run_limited(cmd, a.timeout)
                if code == EXIT_CANNOT_RUN:  # the reason alone: no run line for a run that did not happen
                    why = no_gpu_reason(out) or (out.strip().splitlines() or ["the program cannot run here"])[-1]
                    say(f"lab: bench times kernels and needs a GPU: {why}")
                    server.stop()
                    return EXIT_CANNOT_RUN
                if ceilings_note:
                    say(ceilings_note)
                    ceilings_note = None
                if entry.get("expect") == "fail" and code == EXIT_FAIL:
                    code = EXIT_PASS  # a --bug run recorded for its error: failing the check is the point
                left = (time.time() - t0) / n * (len(sweep) - n)
                say(f"  [{n}/{len(sweep)}] {other or s} {v:<8} {' '.join(entry['args']):<52} exit {code} {secs:5.1f} s"
                    f"  (~{left:.0f} s left)")
                if code != EXIT_PASS:
                    failed += 1
                    say("\n".join("           | " + line for line in out.strip().splitlines()[-6:]))
                save()
            # The libraries on this shape right after ours: the pair is timed minutes apart at most,
            # and a sweep cut short by a time limit keeps both sides of every row it reached.
            time_baselines([spec for spec in specs if spec_matches_entry(spec, entry["args"])])
        time_baselines(list(specs))  # specs on shapes no entry has
        server.stop()
        saved = save()
        if not saved:
            continue
        dest, count = saved
        say(f"lab: wrote {count} records to {dest / name}")
        missing = sorted({(r["variant"], r["check"].get("verdict", "")) for r in json.loads((dest / name).read_text())
                          if is_unavailable(r)})
        if missing:  # a table row without its library: say so at the end, not only in the run's lines
            say(f"lab: {len(missing)} librar{'y' if len(missing) == 1 else 'ies'} could not run here: " +
                "; ".join(f"{v} ({why[:80]})" for v, why in missing) +
                f". Once installed, `scripts/lab bench {s}{' --tag ' + a.tag if a.tag else ''} --resume"
                f"{' --out ' + str(a.out) if a.out else ''}` times them, beside the other libraries of their shapes.")
        if a.ncu and not (a.tag or a.quick):
            measure_dram(s, data, dest, a.timeout)
    if ceilings_note:  # no kernel ran (all done before, --resume): the ceilings' reason still said
        say(ceilings_note)
    return EXIT_PASS if not failed else EXIT_FAIL


# ------------------------------------------------------------------------------------- tables
def cmd_tables(a):
    from labcli import setup
    if not setup.ensure_python_deps():
        raise LabError("tables needs numpy and matplotlib (pip install -r scripts/requirements.txt)")
    import tables
    folder = Path(a.results) if a.results else ROOT / "results" / a.gpu
    why = folder_problem(folder, must_exist=True)  # TABLES.md and the plots are written there
    if why:
        raise BadInput(f"tables: results: {why}")
    readme = None if a.no_readme else Path(a.readme or ROOT / "README.md")
    if readme is not None and not readme.is_file():  # updated last: found before any table is written
        why = folder_problem(readme.parent, must_exist=True, writable=False)
        raise BadInput(f"tables: --readme {readme}: {why or ('a folder, not a file' if readme.is_dir() else 'no such file')}")
    return tables.run(folder, readme, None if a.no_readme else ROOT / "ch12", say=say)


# --------------------------------------------------------------------------------- gpu-check
GPU_CHECK_STEPS = ("ctest", "check", "stubs", "sanitize", "bench")

def cmd_gpu_check(a):
    """What a GPU machine verifies, in one go: build, ctest (gpu label included), every
    section's case list on the solution (with its --bug cases), every stub failing cleanly,
    compute-sanitizer on small cases (4 runs at a time per GPU), and the benchmark sweeps. Logs
    and JSON go to --out."""
    why = folder_problem(a.out)
    if why:
        raise BadInput(f"gpu-check: --out: {why}")
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "gpu-check.log", "w")
    deadline = time.time() + a.deadline_s if a.deadline_s else None

    def run_step(cmd, timeout):
        """(exit, output, seconds) of one step's command; None where --deadline-s leaves no time."""
        if deadline is not None:  # never start what cannot finish inside the caller's time limit
            left = deadline - time.time()
            if left < 30:
                return None
            timeout = min(timeout, left)
        return run_limited(cmd, timeout)

    def report(title, cmd, result):
        say(f"== {title}")
        if result is None:
            say("   -> skipped: out of time (--deadline-s)")
            log.write(f"\n===== {title}: skipped, out of time\n")
            return EXIT_TIMEOUT
        code, text, secs = result
        log.write(f"\n===== {title} (exit {code}, {secs:.1f} s)\n$ {' '.join(map(str, cmd))}\n{text}")
        log.flush()
        tail = text.strip().splitlines()[-a.tail:]
        say("\n".join("   " + line for line in tail))
        say(f"   -> exit {code} in {secs:.0f} s")
        return code

    def step(title, cmd, timeout):
        return report(title, cmd, run_step(cmd, timeout))

    summary = {}
    names = sections() if not a.sections else resolve_all(a.sections)
    lab = [sys.executable, str(ROOT / "scripts" / "lab")]
    steps = set(a.only or GPU_CHECK_STEPS)
    if a.no_ctest:
        steps.discard("ctest")
    if a.no_bench:
        steps.discard("bench")
    if a.grading_example:
        steps.add("grading")
    # ctest needs every target; the other steps only the named sections' two programs
    build(None if "ctest" in steps else targets(names))
    if "ctest" in steps:  # the gpu check_* tests repeat the two check steps below: left to them
        summary["ctest"] = step("ctest -L gpu (but the check_* tests; the cpu label is CI's)",
                                ["ctest", "--test-dir", BUILD, "--output-on-failure", "-j", "4", "-L", "gpu", "-E", r"\.check_"], 1800)
    if "check" in steps:
        summary["check --solution"] = step("check --solution " + " ".join(names),
                                           lab + ["check", *names, "--solution", "--require-gpu", "--jobs", str(4 * a.gpus), "--gpus", str(a.gpus),
                                                 "--report", out / "check-solutions.json"], 1800)
    if "stubs" in steps:
        summary["check stubs (each case must fail cleanly)"] = step("check stubs --expect-fail",
                                           lab + ["check", *names, "--expect-fail", "--require-gpu", "--jobs", str(4 * a.gpus), "--gpus", str(a.gpus),
                                                 "--report", out / "check-stubs.json"], 1800)
    # compute-sanitizer: every tool on every variant and shape of each section, as (what, command).
    # Small, independent runs: 4 at a time per GPU (as check's), dealt round the GPUs; each is
    # reported in the listed order once it and those before it are done.
    devices, sanitizer_runs = gpu_devices(a.gpus), []
    for s in names if "sanitize" in steps else []:
        data = load_cases(s)
        shapes = cases.sanitize_shapes(data)  # small ragged shapes (the case file's where the default does not apply)
        for tool in ("memcheck", "racecheck", "synccheck"):
            for v in data.get("sanitize", {}).get("variants", data["variants"]):
                for shape in shapes:
                    cmd = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "9", *program(s, True),
                           "--variant", v, "--iters", "1", "--warmup", "0"] + shape
                    what = f"{tool} {s} {v}" + (f" ({' '.join(shape)})" if len(shapes) > 1 else "")
                    sanitizer_runs.append((what, on_device(cmd, devices[len(sanitizer_runs) % len(devices)])))
    pool = ThreadPoolExecutor(4 * len(devices))
    try:
        pending = [pool.submit(run_step, cmd, 600) for _, cmd in sanitizer_runs]
        for (what, cmd), future in zip(sanitizer_runs, pending):
            summary["sanitizer " + what] = report("compute-sanitizer " + what, cmd, future.result())
    finally:  # Ctrl-C: the runs not started are dropped at once; the driver's stop kills those running
        pool.shutdown(wait=False, cancel_futures=True)
    if "grading" in steps:
        summary["grading example"] = grading_example(out / "grading", names, lab, step, a.gpus)
    if "bench" in steps:
        summary["bench"] = step("bench " + " ".join(names), lab + ["bench", *names, "--ceilings", "--ncu", "--out", out / "results"], 3000)
    log.close()
    (out / "gpu-check-summary.json").write_text(json.dumps({k: int(v) for k, v in summary.items()}, indent=1) + "\n")
    say("== summary")
    for k, v in summary.items():
        say(f"   exit {v:<3} {k}")
    bad = [k for k, v in summary.items() if v not in (EXIT_PASS, EXIT_CANNOT_RUN)]
    unrun = [k for k, v in summary.items() if v == EXIT_CANNOT_RUN]
    if bad:
        say("gpu-check: UNEXPECTED: " + "; ".join(bad))
        return EXIT_FAIL
    if unrun:  # nothing failed, but not everything ran: "cannot run here", not a pass nor a failure
        say("gpu-check: nothing failed, but could not run here: " + "; ".join(unrun))
        return EXIT_CANNOT_RUN
    say("gpu-check: all as expected")
    return EXIT_PASS


# ------------------------------------------------------------------------------------------ ab
def parse_ab_case(text):
    """'label=06_paged --variant split --b 8' -> ('label', {'A': ('06_paged', [...]), 'B': the same}).
    'label=05_decode ARGS | 06_paged ARGS' gives build B its own command: two programs of one tree
    compared the same way (pass one build folder twice), e.g. 06 against 05 on the same shape."""
    label, sep, command = text.partition("=")
    words = shlex.split(command)
    sides = [words[:words.index("|")], words[words.index("|") + 1:]] if "|" in words else [words, words]
    if not sep or not label.strip() or not all(sides) or "|" in sides[1]:
        raise BadInput(f"ab: a case is LABEL=PROGRAM ARGS... [| PROGRAM_B ARGS...] (programs of the "
                         f"builds' bin/), not {text!r}")
    return label.strip(), {"A": (sides[0][0], sides[0][1:]), "B": (sides[1][0], sides[1][1:])}


def cmd_ab(a):
    """A/B: is build B faster than build A? Every case runs on both builds, one after the other, the
    order flipping every round (A B, B A, A B, ...) so that neither build always runs first; each
    run is the program's own timing (warm-up, median of the timed runs) and its own check of the
    output. Per case: the median over the rounds of each build's time, and A / B (above 1: B is
    faster): the comparison every "A/B" in the handouts is. Writes every run and the summary to --out."""
    if a.rounds < 1:
        raise BadInput("ab: --rounds must be at least 1")
    why = folder_problem(a.out)
    if why:
        raise BadInput(f"ab: --out: {why}")
    builds = {"A": Path(a.build_a), "B": Path(a.build_b)}
    specs = [parse_ab_case(c) for c in a.case]
    if len({label for label, _ in specs}) != len(specs):
        raise BadInput("ab: two cases have the same label")
    for label, commands in specs:
        for tag, b in builds.items():
            if not (b / "bin" / commands[tag][0]).exists():
                raise BadInput(f"ab: build {tag} has no {b / 'bin' / commands[tag][0]}")
    out = Path(a.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    runs = {(label, tag): [] for label, _ in specs for tag in builds}
    sha = git_sha()  # (once: ab.json is rewritten after every round)

    def summarize():  # per case: each build's median over the rounds so far, and A / B
        summary, failed = [], False
        for label, commands in specs:
            line = {tag: " ".join([prog, *args]) for tag, (prog, args) in commands.items()}
            row = {"label": label, "command": line["A"]}
            if line["B"] != line["A"]:
                row["command_b"] = line["B"]
            for tag in builds:
                times = [x["ms"] for x in runs[(label, tag)] if x["ms"] is not None]
                row[tag] = {"median_ms": statistics.median(times) if times else None, "runs_ms": times,
                            "passed": all(x["passed"] for x in runs[(label, tag)])}  # (a run with no time did not pass)
            ok = row["A"]["passed"] and row["B"]["passed"]
            row["a_over_b"] = row["A"]["median_ms"] / row["B"]["median_ms"] if ok else None
            failed = failed or not ok
            summary.append(row)
        return summary, failed

    for r in range(a.rounds):
        for label, commands in specs:
            for tag in ("A", "B") if r % 2 == 0 else ("B", "A"):
                record = out / "runs" / f"{label}.{tag}.{r}.json"
                record.unlink(missing_ok=True)
                prog, args = commands[tag]
                code, text, _ = run_limited([builds[tag] / "bin" / prog, *args, "--json", record], a.timeout)
                try:
                    rec = json.loads(record.read_text())[-1]  # (--json appends to a list of records)
                    ms, passed = float(rec["timing"]["median_ms"]), bool(rec["check"]["passed"])
                except (OSError, ValueError, KeyError, TypeError, IndexError):
                    ms, passed = None, False
                if code != EXIT_PASS or ms is None:
                    passed = False
                    say(f"  {label} {tag} round {r}: exit {code}: {text.strip().splitlines()[-1:]}")
                runs[(label, tag)].append({"round": r, "ms": ms, "passed": passed, "exit": code})
        # After every round, so that an A/B stopped by a time limit keeps the rounds it finished.
        summary, failed = summarize()
        (out / "ab.json").write_text(json.dumps({"builds": {t: str(b) for t, b in builds.items()}, "rounds": a.rounds,
                                                 "rounds_done": r + 1, "git_sha": sha, "cases": summary}, indent=1) + "\n")
        if r + 1 < a.rounds:
            say(f"  round {r + 1} of {a.rounds} done: " + ", ".join(
                f"{row['label']} {row['a_over_b']:.3f}" if row["a_over_b"] else f"{row['label']} -" for row in summary))
    width = max(len(label) for label, _ in specs)
    for row in summary:
        side = lambda t: (f"{row[t]['median_ms']:9.4f} ms pass" if row[t]["passed"] else "         FAIL") + \
            " [" + ", ".join(f"{x:.4f}" for x in row[t]["runs_ms"]) + "]"
        ok = row["a_over_b"] is not None
        say(f"{row['label']:<{width}}  A/B " + (f"{row['a_over_b']:6.3f}" if ok else "   -  ") + f"  A {side('A')}  B {side('B')}")
    return EXIT_FAIL if failed else EXIT_PASS


def measure_dram(section, data, dest, timeout):
    """Nsight Compute's DRAM bytes (read + written, summed over every kernel of one forward) for the
    section's representative shape (case file "ncu", else its first bench shape), beside the byte
    model: traffic measured, not asserted. Clocks are left as they are (--clock-control none)."""
    import tables
    entry = data.get("ncu") or data["bench"][0]
    path = dest / "ncu.json"
    found = json.loads(path.read_text()) if path.exists() else []
    for v in entry.get("variants", data["variants"]):
        rec = BUILD / "ncu_record.json"
        rec.unlink(missing_ok=True)
        cmd = ["ncu", "--clock-control", "none", "--metrics", "dram__bytes_read.sum,dram__bytes_write.sum", "--csv",
               "--print-units", "base", *program(section, True), "--variant", v, "--iters", "0", "--check", "none",
               "--quiet", "--json", rec] + strip_timing_args(entry["args"])
        code, out, secs = run_limited(cmd, timeout)
        total = {"dram__bytes_read.sum": 0.0, "dram__bytes_write.sum": 0.0}
        kernels = set()
        for row in csv.reader(line for line in out.splitlines() if line.startswith('"')):
            if len(row) > 3 and row[-3] in total:
                total[row[-3]] += float(row[-1].replace(",", ""))
                kernels.add(row[0])
        if code != 0 or not rec.exists() or not kernels:
            say(f"  ncu {section} {v}: no measurement (exit {code}): {out.strip().splitlines()[-1:] }")
            continue
        r = json.loads(rec.read_text())[-1]
        measured = total["dram__bytes_read.sum"] + total["dram__bytes_write.sum"]
        # An entry stands for the run the tables look it up by (tables.dram_key): the problem and the
        # run's own settings (08's --consumers / --kv-tile as its label, 05/06's split count).
        found = [e for e in found if tables.dram_entry_key(e) != tables.dram_key(r)]
        found.append({"section": section, "variant": v, "label": tables.variant_label(r),
                      "splits": r["metrics"].get("splits"), "problem_key": tables.key_to_json(tables.problem_key(r)),
                      "dram_bytes": measured,
                      "dram_read": total["dram__bytes_read.sum"], "dram_write": total["dram__bytes_write.sum"],
                      "kernels": len(kernels), "hbm_bytes_model": r["metrics"]["hbm_bytes_model"],
                      "command": repo_relative(" ".join(map(str, cmd)))})
        say(f"  ncu {section} {v}: DRAM {measured / 1e9:.3f} GB measured vs {r['metrics']['hbm_bytes_model'] / 1e9:.3f} GB "
            f"modelled ({len(kernels)} kernels, {secs:.0f} s)")
    path.write_text(json.dumps(found, indent=1) + "\n")


def strip_timing_args(args):
    out, skip = [], False
    for x in args:
        if skip:
            skip = False
        elif x in ("--iters", "--warmup"):
            skip = True
        else:
            out.append(x)
    return out


def cmd_bench_all(a):
    """bench takes several sections: run them one by one (ceilings once), worst exit code wins."""
    if not (ROOT / "solutions").is_dir():
        say("lab: bench times the reference solutions, which a student release does not have")
        return EXIT_CANNOT_RUN
    names = resolve_all(a.section)  # every name before the first sweep: a typo is not found after one
    why = folder_problem(a.out) if a.out is not None else ""
    if why:
        raise BadInput(f"bench: --out: {why}")
    if a.tag and not any(a.tag in t for t in bench_tags(names).values()):  # (else a sweep of nothing, exit 0)
        which = "any section" if "all" in a.section else " ".join(names)
        raise BadInput(f"bench: no bench entry of {which} is tagged '{a.tag}' (the tags: " +
                       ("; ".join(f"{s} {', '.join(t)}" for s, t in bench_tags(sections()).items()) or "none") + ")")
    if not has_gpu():  # said before a build that would be for nothing
        say("lab: bench times kernels and needs a GPU: no NVIDIA GPU found (nvidia-smi lists none)")
        return EXIT_CANNOT_RUN
    codes = []
    for n, s in enumerate(a.section):
        one = argparse.Namespace(**vars(a))
        one.section, one.ceilings = s, a.ceilings and n == 0
        codes.append(cmd_bench(one))
    return max(codes) if codes else EXIT_PASS



# ---------------------------------------------------------------------------------------- deps
def cmd_deps(a):
    """deps --vendor DIR: a self-contained copy of the C++ dependencies in DIR/.deps, for a GPU
    machine without package access (copy the lab tree there with it; the build finds it by itself)."""
    from labcli import setup
    setup.vendor(a.vendor)
    return EXIT_PASS
