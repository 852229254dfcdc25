"""The commands of students and instructors: run, check, test, compare, make-labs, grade,
grading-example and release."""
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from labcli.common import (BUILD, EXIT_BAD_INPUT, EXIT_CANNOT_RUN, EXIT_FAIL, EXIT_PASS, EXIT_TIMEOUT, ONLY_A_GPU,
                           ROOT, BadInput, HangWatch, LabError, build, cmake_env, cwd_relative, folder_problem, gpu_devices,
                           git_sha, has_gpu, is_python, limit_children, load_cases, no_gpu_reason, on_device, program,
                           resolve, resolve_all, run_limited, say, sections, source_name, targets, tree_relative,
                           usable_cores)
from labcli.common import included_labs as labs_included_in
import cases  # noqa: E402  (scripts/cases.py, on the path through labcli.common)
import make_labs  # noqa: E402


# ------------------------------------------------------------------------------------------ run
def python_parses(names, solution):
    """A Python lab that does not parse is its build failure, said once (not by every case)."""
    for s in names:
        if not is_python(s):
            continue
        path = program(s, solution)[-1]
        try:
            compile(Path(path).read_bytes(), str(path), "exec")
        except (SyntaxError, ValueError) as e:  # ValueError: a null byte
            where = f"{Path(path).relative_to(ROOT)}" + (f":{e.lineno}" if getattr(e, "lineno", None) else "")
            text = (getattr(e, "text", None) or "").rstrip()
            raise LabError(f"{where}: {type(e).__name__}: {getattr(e, 'msg', e)}; nothing run",
                           detail=text or None)


def python_packages(names, args=()):
    """A Python section's packages, installed when missing, for the path this machine takes."""
    if any(is_python(s) for s in names):
        from labcli import setup
        setup.ensure_section_packages(has_gpu() and "--cpu" not in args, [s for s in names if is_python(s)])


def cpu_fallback(section, verb, solution=False):
    """What --cpu runs of a section: a CUDA section's CPU model is the algorithm in C++ around the
    student's exercise code, not their kernel; a Python section's --cpu runs the student's own code
    (Triton's interpreter, or FlexAttention's eager path), or the solution's with --solution."""
    if is_python(section):
        return f"{verb} {'the solution of' if solution else 'your'} {section} on the CPU instead (--cpu)"
    return f"{verb} the CPU model of {section} instead (--cpu; the kernel itself needs a GPU)"


def needs_solutions(a):
    """--solution and --solution-too read solutions/, which a student release has not: one line."""
    for flag in ("solution", "solution_too"):
        if getattr(a, flag, False) and not (ROOT / "solutions").is_dir():
            raise BadInput(f"--{flag.replace('_', '-')}: this tree has no solutions/ (a student release); "
                           "run your lab without it")


class LiveOutput:
    """A program's output shown line by line as it comes (a long run is not silent until its end),
    except a "cannot run here:" line, held back: where it means no GPU, the CPU model runs instead
    and that line is not the verdict."""

    def __init__(self):
        self.partial, self.held = b"", []

    def __call__(self, chunk):
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            if line.startswith(b"cannot run here:"):
                self.held.append(line)
            else:
                say(line.decode(errors="replace"))

    def end(self, show_held=True):
        if self.partial:
            say(self.partial.decode(errors="replace"))
        for line in self.held if show_held else ():
            say(line.decode(errors="replace"))


RUN_TIMEOUT = 600  # run's --timeout where the student gives none (scripts/lab's default)


def run_shown(cmd, a, live, on_cpu, extra_env):
    """One of `run`'s runs, its output handed to `live` as it comes: (exit, output, the seconds of the
    time limit it met, if it met one). On the CPU model, a small shape still running after
    CPU_PROBE_LIMIT seconds is stuck (check's probe gets the same time) and is stopped then, not after
    --timeout's minutes; only at run's default --timeout: one the student gives holds whole (the
    timeout's hint says to give one where a run only needs longer). A GPU run is not judged so: a
    CPU's seconds say nothing of it."""
    early = on_cpu and a.timeout == RUN_TIMEOUT
    code, out, secs = run_limited(cmd, a.timeout, echo=live, extra_env=extra_env,
                                  stuck=(CPU_PROBE_LIMIT, stuck_on_a_small_shape) if early else None)
    return code, out, CPU_PROBE_LIMIT if early and code == EXIT_TIMEOUT and secs < a.timeout else a.timeout


def cmd_run(a):
    section = resolve(a.section)
    needs_solutions(a)
    build(targets([section], solution=a.solution, lab=not a.solution))
    python_parses([section], a.solution)
    python_packages([section], a.args)
    cmd = program(section, a.solution) + a.args
    live = LiveOutput()
    limit = {TIME_LIMIT_VARIABLE: f"{a.timeout:.0f}"}  # a Python section's slow-shape note compares with it
    code, out, limit_met = run_shown(cmd, a, live, "--cpu" in a.args, limit)
    reason = no_gpu_reason(out) if code == EXIT_CANNOT_RUN else None
    fall_back = reason and ONLY_A_GPU not in reason and "--cpu" not in a.args  # else --cpu: "needs a GPU"
    live.end(show_held=not fall_back)
    if fall_back:
        if is_python(section) and reason.startswith("needs torch") and not has_gpu():
            reason = "no GPU here"  # torch is only the GPU path's; the CPU path needs none
        say(f"lab: {reason}; {cpu_fallback(section, 'running', getattr(a, 'solution', False))}")
        live = LiveOutput()
        code, out, limit_met = run_shown(cmd + ["--cpu"], a, live, True, limit)
        live.end()
    if code == EXIT_TIMEOUT:
        say(timeout_hint(limit_met, f"run {section[:2]}" + (" --solution" if a.solution else ""),
                         shlex.join(["--"] + a.args) if a.args else "", still_working(out)))
    on_cpu = bool(fall_back) or "--cpu" in a.args
    # a failure, or a CPU model that passed its part (what only a GPU runs may still be unwritten)
    unfinished = code == EXIT_FAIL or (code == EXIT_CANNOT_RUN and on_cpu and not_checked_reason(out))
    if unfinished and not a.solution and (left := stub_left(section, on_cpu)):
        say(left)
        if mine := written_variant_not_run(section, a.args):
            say(f"lab: this run was the default variant, {load_cases(section)['variants'][0]}; your {mine}: "
                f"scripts/lab run {section[:2]} -- --variant {mine}")
    elif code == EXIT_PASS and not a.solution and re.search(r"^PASS: ", out, re.M):
        # one shape is not the exercise's verdict (and a run with no PASS line, --help say, ran none of it)
        say(f"lab: this run passed; scripts/lab check {section[:2]} runs the section's case list (ragged shapes, "
            f"masks, edge cases): your exercise is done when that passes")
        if left := stub_left(section, on_cpu):  # a pass on the CPU model leaves 04's GPU-only mma unread
            say(left)
    return EXIT_FAIL if code < 0 else code


def still_the_stub(section):
    return (f"lab: labs/{source_name(section)} is still the stub: fill its EXERCISE regions (ch12/{section}.md), "
            f"then scripts/lab check {section[:2]}")  # a crash (killed by a signal) is a failure: exit 1, as a check


def included_labs(section):
    """The other sections whose lab files this section's lab file #includes (06: 05_decode; 07 and 12:
    08_tma_skeleton): their exercises run in this section's program too."""
    try:
        text = (ROOT / "labs" / source_name(section)).read_text(errors="replace")
    except OSError:
        return []
    return [stem for stem in labs_included_in(text) if stem in sections()]


def stub_left(section, on_cpu=False):
    """After a failure of the student's lab (or, on_cpu, a CPU-model run that checked what it could):
    the lines that say which of its exercises are still the stub (all: still_the_stub), or None where
    every one has been started or nothing tells. On the CPU model, the exercises only a GPU runs (the
    case file's gpu_exercises) are said apart: a CPU check's failure cannot come from them, and its
    pass says nothing of them, written or not (a written one is named as not checked here)."""
    lab = ROOT / "labs" / source_name(section)
    if make_labs.is_untouched_stub(lab):
        return still_the_stub(section)
    left = make_labs.untouched_exercises(lab)
    if left is None:
        return None
    gpu = load_cases(section).get("gpu_exercises", []) if on_cpu else []
    lines = []
    # written, so no longer named as the stub, yet never run here: a clean CPU check says nothing of them
    if written := [e for e in gpu if e not in left]:
        one = len(written) == 1
        lines.append(f"lab: EXERCISE {', '.join(written)} in labs/{source_name(section)} {'is' if one else 'are'} "
                     f"written and compiled but not checked here (only a GPU runs {'it' if one else 'them'}): "
                     f"scripts/lab check {section[:2]} on a GPU checks {'it' if one else 'them'}")
    for names, where in (([e for e in left if e not in gpu], ""), ([e for e in left if e in gpu], "a GPU's ")):
        if names:
            one = len(names) == 1
            only = f"only a GPU runs {'it' if one else 'them'}, and " if where else ""
            lines.append(f"lab: EXERCISE {', '.join(names)} in labs/{source_name(section)} {'is' if one else 'are'} "
                         f"still the stub: {only}{where or 'the '}check cannot pass until "
                         f"{'it is' if one else 'they are'} written (ch12/{section}.md)")
    return "\n".join(lines) or None


def written_variant_not_run(section, args):
    """Where a section's variants are its exercises (10's alibi, softcap, ...): a variant the student
    has written, when this run, given no --variant, ran the default one, still the stub. Else None."""
    if any(x == "--variant" or x.startswith("--variant=") for x in args):
        return None
    lab = ROOT / "labs" / source_name(section)
    left = make_labs.untouched_exercises(lab)
    variants = load_cases(section)["variants"]
    if not left or variants[0] not in left:
        return None
    exercises = set(re.findall(r"BEGIN EXERCISE ([\w-]+)", lab.read_text(errors="replace")))
    return next((v for v in variants if v in exercises and v not in left), None)


# ---------------------------------------------------------------------------------------- check
def case_variants(case, data, on_gpu):
    """The variants a case runs on this machine: its own list (default: the section's); without a
    GPU only those of the section's cpu_variants (default: the first variant), so that a variant
    whose CPU model runs other code of the student's (05's split: the merge) is checked there too."""
    own = case.get("variants", data["variants"])
    if on_gpu:
        return own
    cpu = data.get("cpu_variants", data["variants"][:1])
    return [v for v in own if v in cpu]


def expand_cases(data, solution, bugs, on_gpu, expect="pass"):
    """(label, variant, args, expect, weight) for each run the case list asks for."""
    runs = []
    for case in data["cases"]:
        if not on_gpu and not case.get("cpu", True):
            continue
        for v in case_variants(case, data, on_gpu):
            runs.append((case["name"], v, case.get("args", []), expect, case.get("weight", 1)))
    for case in data.get("bad_inputs", []):  # refused before any GPU work: exit 2, on any machine
        runs.append((f"bad input: {case['name']}", data["variants"][0], case["args"], "bad-input", 0))
    if bugs:  # the solution's by default; a student's lab with --bugs (the bug switches are given code)
        for case in data.get("bugs", []):
            if not on_gpu and not case.get("cpu", True):
                continue
            for v in case_variants(case, data, on_gpu):
                runs.append((f"bug {case['bug']}: {case['name']}", v, case.get("args", []) + ["--bug", case["bug"]],
                             "fail", case.get("weight", 1)))
    return runs


def unit_test_program(section, solution):
    """The section's exercise test program for this build (tests/: build/bin/[lab_]NAME), or None."""
    name = load_cases(section).get("unit_tests")
    return None if not name else BUILD / "bin" / (name if solution else f"lab_{name}")


def unit_test_targets(names, solution):
    """Their CMake targets, where the build has its tests (LAB_BUILD_TESTS, on by default)."""
    try:
        if "LAB_BUILD_TESTS:BOOL=OFF" in (BUILD / "CMakeCache.txt").read_text(errors="replace"):
            return []
    except OSError:
        pass  # not configured yet: the first configure builds the tests
    found = []
    for s in names:
        try:
            tests = None if is_python(s) else unit_test_program(s, solution)
        except BadInput:
            continue  # no case file: the section's check says so
        if tests is not None:
            found.append(tests.name)
    return found


# A CPU model that ran the student's host code, found it right, and leaves a GPU-only rest (07's
# and 12's mma softmax): the line before its "not checked here:" (common/harness/harness.cpp).
CPU_PART_PASSED = re.compile(r"^CPU part passed: ", re.MULTILINE)


def not_checked_reason(output):
    """A program's "not checked here: <why>" (a part of the student's code that only a GPU runs)."""
    for line in output.splitlines():
        if line.startswith("not checked here:"):
            return line[len("not checked here:"):].strip()
    return None


def probe_args(section):
    """A run that tells whether the program can run here: its case list's first case (valid for that
    section by definition, and small), run once without timing."""
    return load_cases(section)["cases"][0].get("args", []) + ["--iters", "0", "--quiet"]


def gpu_available(section, solution, timeout):
    code, out, _ = run_limited(program(section, solution) + probe_args(section), timeout)
    return code != EXIT_CANNOT_RUN, no_gpu_reason(out) or ("" if code != EXIT_TIMEOUT else PROBE_HUNG)


PROBE_HUNG = "the first case did not finish"  # gpu_available's reason where its probe run timed out
CHECK_TIMEOUT = 300  # check's --timeout: seconds per run
# The CPU model's probe is the case list's first case, a tiny shape that takes a second or so (a
# Python section's imports included): waiting check's minutes for it only delays "it hangs".
CPU_PROBE_LIMIT = 60


def probe_hung(section, cmd, a, limit=None):
    """The result of a check whose probe run (the first case) timed out: every case would too, so
    none is run; one failed row, exit 124, and the hint, instead of a silent wait per case."""
    limit = limit or a.timeout
    say(f"== {section}: FAIL: {PROBE_HUNG} in {limit:.0f} s: no case run")
    say(timeout_hint(limit, f"check {section[:2]}" + (" --solution" if a.solution else "")))
    return [result_row(section, "(the first case, as a probe)", "-", "pass", EXIT_TIMEOUT, False, None, limit, 0, cmd)]


def result_row(section, case, variant, expect, code, ok, not_checked, secs, weight, cmd):
    """One run's row of a check's results: its command as run, as typed from the repository's root
    (`rerun`, the report's) and from the user's folder (`rerun_here`, printed)."""
    return {"section": section, "case": case, "variant": variant, "expect": expect, "exit": code, "ok": ok,
            "not_checked": not_checked, "seconds": round(secs, 2), "weight": weight, "command": " ".join(map(str, cmd)),
            "rerun": rerun_line(cmd), "rerun_here": rerun_line(cmd, cwd_relative)}


def rerun_line(cmd, relative=tree_relative):
    """A case's command as typed from the repository's root (relative=cwd_relative: from the user's
    folder, as printed): its paths relative to it, the interpreter as `python3` (the lab's own
    .venv/bin/python3 where the driver runs under it: the system's lacks the packages), and no
    --quiet (run alone, the program's whole report is wanted)."""
    def shown(x):
        if str(x) == sys.executable:
            x = sys.executable if ROOT in Path(sys.executable).parents else "python3"
        return relative(x)
    return " ".join(shlex.quote(shown(x)) for x in cmd if str(x) != "--quiet")


HANGS_IN_A_ROW = 2  # timed-out runs of a case list, one after the other, that stop its check
# Runs of one variant that raised the same Python error (a typo, a wrong call: every case of that
# variant will raise it) after which its other runs are not started; the other variants go on.
SAME_ERRORS_IN_A_ROW = 3
# Runs of a Python section's check at once on a GPU where --jobs is not given: each case is a
# process of its own that compiles its kernels on the CPU (about 25 s a case for 10's
# FlexAttention: its list took over 10 minutes one at a time), on small shapes. A C++ section's
# cases start in a second, and some of them fill a small GPU's memory: one at a time, as the CPU
# models (each uses every core).
GPU_CHECK_JOBS = 4


class ErrorWatch:
    """A Python error that every run of a variant raises (a typo in its exercise): once its first
    `limit` runs that ended raised the same error line, and none of its runs ended otherwise, its
    other runs are not started. Runs may end in any order (several at once)."""

    def __init__(self, limit):
        self.limit, self._lock = limit, threading.Lock()
        self.first, self.skipped_runs = {}, collections.Counter()  # variant -> its first erring run; runs not run
        self._seen, self._mixed, self._stop = {}, set(), set()  # variant -> (error line, count)

    def stopped(self, variant):
        return variant in self._stop

    def ended(self, position, variant, error):
        if variant is None:
            return
        with self._lock:
            line, count = self._seen.get(variant, (None, 0))
            if error is None or (line is not None and error.group(0) != line):
                self._mixed.add(variant)  # a run of it passed or failed otherwise: each run tells
                return
            self._seen[variant] = (error.group(0), count + 1)
            self.first[variant] = min(position, self.first.get(variant, position))
            if count + 1 >= self.limit and variant not in self._mixed:
                self._stop.add(variant)

    def skipped(self, variant):
        if variant in self._stop:
            self.skipped_runs[variant] += 1


def check_jobs(jobs, on_gpu, python):
    """How many of a check's programs run at once: --jobs, else GPU_CHECK_JOBS for a Python section
    on a GPU, else 1."""
    return jobs or (GPU_CHECK_JOBS if on_gpu and python else 1)


def check_section(section, a):
    data = load_cases(section, a.cases)
    exe = program(section, a.solution)
    on_gpu, reason = (False, "forced by --cpu") if a.cpu else gpu_available(section, a.solution, a.timeout)
    if reason == PROBE_HUNG:
        return probe_hung(section, exe + probe_args(section), a)
    if not on_gpu and a.require_gpu:
        say(f"lab: cannot run here: {reason} (--require-gpu)")
        return None
    if not on_gpu:
        limit = CPU_PROBE_LIMIT if a.timeout == CHECK_TIMEOUT else a.timeout  # a --timeout given holds for it too
        code, out, _ = run_limited(exe + probe_args(section) + ["--cpu"], limit)
        if code == EXIT_TIMEOUT:
            return probe_hung(section, exe + probe_args(section) + ["--cpu"], a, limit)
        # 77 with "cannot run here": nothing of the section runs on this machine. 77 with "not
        # checked here" is a verdict on the student's code (its host part passed, the rest needs a
        # GPU): the cases still run, each a verdict of its own.
        if code == EXIT_CANNOT_RUN and not_checked_reason(out) is None:
            say(f"lab: {section}: not checked here: {no_gpu_reason(out) or 'needs a GPU'}")
            return None
    if not on_gpu and not a.cpu:
        say(f"lab: {reason}; {cpu_fallback(section, 'checking', a.solution)}")
    bugs = (a.solution or getattr(a, "bugs", False)) and not a.no_bugs
    runs = expand_cases(data, a.solution, bugs, on_gpu, "fail" if a.expect_fail else "pass")
    tests = unit_test_program(section, a.solution)
    if tests is not None and tests.exists() and not a.expect_fail:  # the exercises' own tests first
        runs.insert(0, ("the exercises' unit tests", "-", [], "pass", 0))
    where = "" if on_gpu else " on the CPU" if is_python(section) else " (CPU model)"  # a Python lab runs as written
    say(f"== check {section} ({'solution' if a.solution else 'your lab'}{where.replace(' (', ', ').rstrip(')')}): "
        f"{len(runs)} runs")
    results, t0 = [], time.time()

    def command(variant, args, expect):
        if variant == "-":
            return [tests]
        if expect == "bad-input":  # nothing but the arguments under test: the output must be one line
            return exe + args + ([] if on_gpu else ["--cpu"])
        return exe + ["--variant", variant, "--iters", "0", "--quiet"] + args + ([] if on_gpu else ["--cpu"])

    # --jobs N: N programs at once (each its own process group and time limit), spread over --gpus
    # GPUs. The verdicts do not depend on either. Reported in case order.
    devices = gpu_devices(getattr(a, "gpus", 1) if on_gpu else 1)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=check_jobs(getattr(a, "jobs", None), on_gpu, is_python(section)))
    # A lab that hangs hangs on every case: once HANGS_IN_A_ROW runs in a row have timed out, no
    # other run starts (one already running ends at its time limit), instead of one time limit per case.
    watch = HangWatch(HANGS_IN_A_ROW)
    errors = ErrorWatch(SAME_ERRORS_IN_A_ROW)

    def run_one(n, variant, cmd):
        if watch.stopped() or errors.stopped(variant):
            return None
        got = run_limited(cmd, a.timeout)
        watch.ended(n, got[0] == EXIT_TIMEOUT)
        errors.ended(n, variant, PYTHON_ERROR_LINE.search(got[1]))
        return got
    pending = [pool.submit(run_one, n, v if expect != "bad-input" else None,
                           on_device(command(v, args, expect), devices[n % len(devices)]))
               for n, (_, v, args, expect, _) in enumerate(runs)]
    seen_failures = {}  # (variant, its verdict with the numbers masked) -> the run that showed it first
    # Variants that failed a case without a bug: a --bug run of theirs proves nothing (a stub "catches"
    # every bug), so it is neither passed nor failed but counted apart. The cases come first.
    failing = set()
    listed_gpu_only = set()  # variants whose first needs-gpu run is listed (the rest only counted)
    not_run = 0

    # a case's name need not say it is causal; its line does (a mask bug fails only those). A
    # bad-input case runs no variant: its arguments are refused before any is chosen.
    def label(name, variant, args, expect):
        if expect == "bad-input":
            return f"{'-':<{variant_width}} {name}"
        return (f"{variant:<{variant_width}} {name}" +
                (" causal" if "--causal" in args and "causal" not in name else ""))
    variant_width = max([8] + [len(v) for _, v, _, _, _ in runs])  # columns line up for any case list
    count_width = max(2, len(str(len(runs))))
    for n, ((name, variant, args, expect, weight), job) in enumerate(zip(runs, pending), 1):
        cmd = command(variant, args, expect)
        got = job.result()
        if got is None:
            not_run += 1
            errors.skipped(variant)
            continue
        code, out, secs = got
        # Neither a pass nor a failure, named at the end as "not checked here": without a GPU, a run
        # whose host part passed and whose rest only a GPU runs; on a GPU, a run this GPU cannot do
        # (a Hopper-only variant, more shared memory per block than it has). --require-gpu, as a
        # GPU machine's own tests run it, counts the latter as a failure.
        # (On a GPU, "not checked here" is an optional --bug branch the student's code does not have.)
        gpu_only = None
        if expect != "bad-input" and code == EXIT_CANNOT_RUN and not (on_gpu and getattr(a, "require_gpu", False)):
            gpu_only = not_checked_reason(out) or (no_gpu_reason(out) if on_gpu else None)
        if expect == "pass":
            ok = code == EXIT_PASS
        elif expect == "bad-input":
            ok = code == EXIT_BAD_INPUT and out.strip().startswith("bad input:") and len(out.strip().splitlines()) == 1
        else:  # a --bug run (or a stub) must be caught by the self-check: exit 1, not a crash or a hang
            ok = code == EXIT_FAIL and not raised_an_error(out)
        cpu_part = bool(gpu_only) and not on_gpu and CPU_PART_PASSED.search(out) is not None
        if expect == "pass" and not ok and not gpu_only:
            failing.add(variant)
        premature = expect == "fail" and name.startswith("bug ") and variant in failing
        if premature:
            ok = False
        status = ("early" if premature else "ok" if ok else "cpu-ok" if cpu_part else
                  ("needs-gpu" if not on_gpu and gpu_only.startswith("needs a GPU") else "not-here")
                  if gpu_only else "TIMEOUT" if code == EXIT_TIMEOUT else "FAIL")
        # A failure already shown (the same variant's same verdict, its numbers aside: a stub fails
        # every case alike) is named on its line, not repeated: the first distinct failures stay on
        # screen. Another variant's failure is another exercise's: always shown.
        shown = (not ok and not gpu_only and not premature) or a.verbose
        same = (variant, failure_key(out)) if shown and not a.verbose else None
        again = f"  (the same kind of failure as [{seen_failures[same]}])" if same in seen_failures else ""
        # A variant whose exercises run only on a GPU (04's mma) would fill the screen with one line a
        # case: its first is listed, the rest are counted in the summary.
        if status == "needs-gpu" and not a.verbose:
            if variant in listed_gpu_only:
                again = None
            else:
                listed_gpu_only.add(variant)
                again = f"  (the other {variant} runs that need a GPU: counted at the end, not listed)"
        # the fixed columns first, the case's name (any length) last
        if again is not None:
            say(f"  [{n:>{count_width}}/{len(runs)}] {status:<9} exit {code:<3} {secs:6.1f} s  "
                f"{label(name, variant, args, expect)}" + again)
        if shown and not again:
            if same:
                seen_failures[same] = n
            for line in excerpt(out):
                say(f"           | {line}")
        results.append(result_row(section, name, variant, expect, code, ok, gpu_only or None, secs, weight, cmd))
        results[-1]["cpu_part_passed"] = cpu_part
        results[-1]["premature"] = premature
    pool.shutdown()
    passed = sum(r["ok"] for r in results)
    unchecked = [r for r in results if r["not_checked"]]
    # Cases (and variants) of the list that only a GPU runs are not run here at all: said, not hidden.
    gpu_runs = 0 if on_gpu else len(expand_cases(data, a.solution, bugs, True)) - len(expand_cases(data, a.solution, bugs, False))
    # "not checked here" whatever was checked before the stop: without a GPU a run may have checked
    # its host part (07's tile span) or nothing (04's mma exercises live on fragments); its own
    # reason, quoted, says which. With a GPU, this GPU cannot run it.
    cpu_part = [r for r in unchecked if r["cpu_part_passed"]]  # their host part right, the rest GPU-only
    unchecked = [r for r in unchecked if not r["cpu_part_passed"]]
    early = sum(r["premature"] for r in results)
    say(f"== {section}{where}: {passed} passed{stub_passes(results, a.solution) if not cpu_part else ''}, "
        f"{len(results) - passed - len(unchecked) - len(cpu_part) - early} failed"
        + (f", {early} --bug {'runs' if early > 1 else 'run'} not counted (marked early: the same variant fails "
           f"without a bug, so its catching one proves nothing yet)" if early else "")
        + (f", {len(cpu_part)} passed as far as the CPU model goes ({cpu_part[0]['not_checked']})" if cpu_part else "")
        + (f", {len(unchecked)} not checked here ({unchecked[0]['not_checked']})" if unchecked else "")
        + (f"; {gpu_runs} GPU-only {'runs' if gpu_runs > 1 else 'run'} of the case list not run here"
           if gpu_runs > 0 else "")
        + (f"; stopped after {HANGS_IN_A_ROW} runs in a row timed out: {not_run} {'runs' if not_run > 1 else 'run'} "
           f"not run" if not_run and watch.stopped() else "")
        + "".join(f"; {k} {'runs' if k > 1 else 'run'} of {v} not run: its first {SAME_ERRORS_IN_A_ROW} raised the "
                  f"same error (fix it first: [{errors.first[v] + 1}])"
                  for v, k in errors.skipped_runs.items() if not watch.stopped())
        + f" ({time.time() - t0:.0f} s)")
    if any(r["exit"] == EXIT_TIMEOUT for r in results):
        say(timeout_hint(a.timeout, f"check {section[:2]}" + (" --solution" if a.solution else "")))
    return results


def stub_passes(results, solution):
    """A stub's passes are its bad-input cases alone (the harness refuses their arguments before the
    student's code runs): said, so that "6 passed" is not read as progress."""
    passed = [r for r in results if r["ok"]]
    if solution or not passed or any(r.get("expect") != "bad-input" for r in passed):
        return ""
    return (" (all bad-input cases, which pass before your code runs)" if len(passed) > 1 else
            " (a bad-input case, which passes before your code runs)")


# The driver's time limit, told to the program it runs: a Python section that expects a --cpu run
# to take longer says so before it starts (common/python/labharness/run.py).
TIME_LIMIT_VARIABLE = "LAB_TIME_LIMIT_S"


# A run's shape (common/harness/problem.cpp), in its problem line and a CPU model's "still running"
# lines: "B=1 H=8 T=16 D=64", "B=1 H=4 H_kv=2 T=64 D=64", "B=1 H=8 T_q=64 T_kv=100 D=64".
SHAPE_LINE = re.compile(r"\bB=(\d+) H=(\d+)(?: H_kv=\d+)? (?:T=(\d+)|T_q=(\d+) T_kv=(\d+)) D=(\d+)")
# B·H·T_q·T_kv·D under which a CPU model finishes in a few seconds on a laptop core: a run of such a
# shape that is still running near the time limit is stuck, however many "still running" lines it printed.
SMALL_CPU_WORK = 1e9


# A Python section's line before a --cpu run it expects to take long (labharness.run.slow_on_cpu), and
# a CPU model's line every few seconds of a long run, its shape in it (common/harness/parallel.h,
# SlowRunNotice; harness.cpp names the shape there, its problem line comes only after the run).
SLOW_SHAPE_NOTE = re.compile(r"^note: .* takes roughly ", re.MULTILINE)
STILL_RUNNING = re.compile(r"^\s*\.\.\. .* still running: ", re.MULTILINE)


def still_working(out):
    """Whether a program's output says it was busy on a large shape (a Python section's slow-shape
    note, a CPU model's "still running" lines on a shape large enough to need the time), not stuck."""
    if SLOW_SHAPE_NOTE.search(out):
        return True
    if not STILL_RUNNING.search(out):
        return False
    shape = SHAPE_LINE.search(out)
    if shape is None:  # no shape to judge by: take the program's word
        return True
    b, h, t, t_q, t_kv, d = (int(x) if x else 0 for x in shape.groups())
    return b * h * (t * t if t else t_q * t_kv) * d >= SMALL_CPU_WORK


def stuck_on_a_small_shape(out):
    """Whether a run's output so far says it is stuck: "still running" on a shape the CPU finishes in
    seconds (SMALL_CPU_WORK)."""
    return STILL_RUNNING.search(out) is not None and not still_working(out)


def timeout_hint(seconds, command, program_args="", working=False):
    """The line after a run stopped at its time limit: what that most often is (a program that said
    it was working on a large shape was not stuck), and how to give it longer."""
    longer = f"scripts/lab {command} --timeout {2 * seconds:.0f}" + (f" {program_args}" if program_args else "")
    if working:
        return (f"lab: the program was still working when stopped after {seconds:.0f} s: this shape is large for "
                f"the CPU (the lines above say so); a smaller --t runs in seconds, or give it longer: {longer}")
    return (f"lab: the program did not finish in {seconds:.0f} s: most often an endless loop, or a wait that never "
            f"completes, in the exercise; if it only needs longer: {longer}")


# The Python harness's line for an exception its program raised (labharness.run.main): exit 1, as a
# failed self-check's, but nothing was checked: a --bug branch that raises NameError is not caught.
PYTHON_ERROR_LINE = re.compile(r"^error: .*\(LAB_TRACEBACK=1 shows the whole traceback\)$", re.M)


def raised_an_error(out):
    return PYTHON_ERROR_LINE.search(out) is not None


def failure_key(out):
    """What makes two failed runs' output the same failure: the verdict (the check line, else the
    FAIL line, else the last line; a crash's note included), its numbers masked. None: no output."""
    lines = [l.strip() for l in out.strip().splitlines() if l.strip()]
    if not lines:
        return None
    verdict = next((l for l in lines if l.startswith("check ")), None) or \
        next((l for l in lines if l.startswith("FAIL")), None) or lines[-1]
    crash = [l for l in lines if l.startswith(("CRASHED", "TIMEOUT", "STOPPED")) and l != verdict]
    number = r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?(?![\w.])|\bnan\b|-?\binf\b"
    return re.sub(number, "#", " | ".join([verdict] + crash))


def excerpt(out, head=5, tail=2):
    """A failed run's output for the case line: its first lines (where the first failure is said, as
    the unit tests print it) and its last (the verdict), not the end alone."""
    lines = out.strip().splitlines()
    summary = 0  # the unit tests' per-exercise lines just above their verdict stay whole
    while summary + 1 < len(lines) and lines[-2 - summary].startswith("exercise "):
        summary += 1
    tail = max(tail, summary + 1)
    if len(lines) <= head + tail + 1:
        return lines
    return lines[:head] + [f"... ({len(lines) - head - tail} more lines: run it alone to see them all)"] + lines[-tail:]


def writable_report(path):
    """--report PATH: checked before anything runs (exit 2, nothing run), never left half written."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        raise BadInput(f"--report {path}: is a folder; give a file name, e.g. {p / 'check.json'}")
    why = folder_problem(p.parent, must_exist=True)
    if why:
        raise BadInput(f"--report {path}: {why}")
    if p.exists() and not os.access(p, os.W_OK):
        raise BadInput(f"--report {path}: cannot be written")
    return p


def cmd_check(a):
    names = resolve_all(a.section)
    needs_solutions(a)
    report = writable_report(a.report)
    if getattr(a, "cases", None):  # a hidden case file that cannot be read (a typo) is bad input before any build
        try:
            cases.load(a.cases)
        except cases.CaseFileError as e:
            raise BadInput(str(e))
    build(targets(names, solution=a.solution, lab=not a.solution) + unit_test_targets(names, a.solution))
    python_parses(names, a.solution)
    python_packages(names)
    results, unchecked, on_cpu = [], [], set()
    for s in names:  # a section that cannot run here is named at the end; the others are still checked
        got = check_section(s, a)
        if got is None:
            unchecked.append(s)
            continue
        results += got
        if any("--cpu" in r.get("command", "").split() for r in got):  # its cases ran the CPU model
            on_cpu.add(s)
        if any(r.get("not_checked") for r in got):
            unchecked.append(f"{s} ({sum(bool(r.get('not_checked')) for r in got)} runs: "
                             f"{next(r.get('not_checked') for r in got if r.get('not_checked'))})")
    if report:  # its commands as from the repository's root, wherever check ran
        tmp = report.with_name(report.name + ".tmp")
        rows = [{k: v for k, v in r.items() if k != "rerun_here"} for r in results]
        tmp.write_text(json.dumps(rows, indent=1) + "\n")
        tmp.replace(report)
    failed = [r for r in results if not r["ok"] and not r.get("not_checked") and not r.get("premature")]
    passed = sum(r["ok"] for r in results)
    if len(names) > 1 or not results:  # one section's own line above already says it all
        say(f"{passed} passed{stub_passes(results, a.solution)}, {len(failed)} failed" +
            (f"; not checked here: {'; '.join(unchecked)}" if unchecked else ""))
    if failed:
        # each failing section's first failure: fixing 09 leaves 10's line on screen too
        firsts = {}
        for r in failed:
            firsts.setdefault(r.get("section"), r)
        for s, r in firsts.items():
            if r.get("rerun_here"):
                of = f" of {s}" if len(firsts) > 1 and s else ""
                say(f"the first failure{of}, to run it alone: {r['rerun_here']}")
        if not a.solution:
            for s in dict.fromkeys(r.get("section") for r in failed if r.get("section")):
                if left := stub_left(s, s in on_cpu):
                    say(left)
                for other in included_labs(s):  # a wrong 05 fails 06's cases too, with 06's names on them
                    say(f"lab: {s} runs the exercises of your labs/{other}.cu too: if scripts/lab check {other[:2]} "
                        "fails, fix that first")
        return EXIT_TIMEOUT if any(r.get("exit") == EXIT_TIMEOUT for r in failed) else EXIT_FAIL
    if not a.solution:  # not all checked on the CPU model: what only a GPU runs may still be the stub
        for s in dict.fromkeys(r.get("section") for r in results if r.get("not_checked")):
            if s in on_cpu and (left := stub_left(s, True)):
                say(left)
    return EXIT_CANNOT_RUN if unchecked else EXIT_PASS


# ------------------------------------------------------------------------------ test, make-labs
def cmd_test(a):
    from labcli import setup
    setup.ensure_python_deps()
    build()
    args = ["ctest", "--test-dir", str(BUILD), "--output-on-failure", "-j", str(a.jobs)]
    if a.label:
        args += ["-L", a.label]
    say(f"lab: running the tests (ctest{' -L ' + a.label if a.label else ''})")
    # ctest's output as it comes, but its closing list of skipped tests (63 GPU tests on a machine
    # without one) as one line: a count and how to list them.
    proc = subprocess.Popen(args, env=cmake_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    skipped, in_list = 0, False
    for line in proc.stdout:
        if line.startswith("The following tests did not run:"):
            in_list = True
            continue
        if in_list and line.rstrip().endswith("(Skipped)"):
            skipped += 1
            continue
        in_list = False
        sys.stdout.write(line)
        sys.stdout.flush()
    code = proc.wait()
    if skipped:
        say(f"lab: {skipped} tests skipped: each needs what this machine lacks (a GPU, mostly); "
            f"ctest --test-dir {BUILD} -N -L gpu lists the GPU ones")
    if code != 0:
        raise LabError(f"some tests failed (listed above); rerun one with: ctest --test-dir {BUILD} -R NAME "
                       f"--output-on-failure")
    return EXIT_PASS


def changed_since_commit(root, folder):
    """Names of the files of `folder` that git says differ from the commit (edited, staged or new):
    in labs/, a student's work. None where git cannot tell (no git, not a checkout)."""
    try:
        r = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-z", "--untracked-files=all", "--",
                            str(folder.relative_to(root))], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    return {Path(entry[3:]).name for entry in r.stdout.split("\0") if len(entry) > 3}


def cmd_make_labs(a):
    return update_labs(ROOT, a.check, a.force, BUILD)


GENERATED_STUBS = "labs-generated.json"  # in the build folder: the digests of the stubs make-labs wrote


def lab_digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def lab_states(root, build_dir):
    """(stale, work): the lab files of `root` that differ from the stubs its solutions/ generate,
    split in two. Work: changed since the commit, and not as make-labs last wrote them (their
    digests in build_dir/labs-generated.json), so a student's; never called stale, never
    overwritten unasked. Stale: the rest, stubs the solutions have moved past."""
    labs = root / "labs"
    try:
        differ = make_labs.generate_all(root / "solutions", labs, check_only=True)
    except make_labs.ExerciseError as e:
        raise LabError(f"make-labs: {e}")
    mine = changed_since_commit(root, labs)
    try:
        stubs = json.loads((build_dir / GENERATED_STUBS).read_text())
    except (OSError, ValueError):
        stubs = {}
    work = [f for f in differ if (mine is None or f in mine) and lab_digest(labs / f) != stubs.get(f)]
    return [f for f in differ if f not in work], work


def update_labs(root, check, force, build_dir):
    """make-labs in the tree `root`: labs/ regenerated from solutions/ (check: only compared)."""
    if not (root / "solutions").is_dir():
        raise LabError("make-labs needs solutions/ (this is a student release, whose labs/ are already made)",
                       EXIT_CANNOT_RUN)  # as grade and bench: a tree that cannot do it, not a wrong answer
    labs = root / "labs"
    stale, work = lab_states(root, build_dir)
    if check:
        if work:
            say("lab: not compared (your work: changed since the commit): " + ", ".join(work))
        if stale:
            say("lab: labs/ is out of date with solutions/ (run scripts/lab make-labs): " + ", ".join(stale))
            return EXIT_FAIL
        say("lab: labs/ matches solutions/" + (" (but for your work)" if work else ""))
        return EXIT_PASS
    if work and not force:
        raise BadInput("make-labs would overwrite your work in " + ", ".join(f"labs/{f}" for f in work) +
                       " (changed since the commit); nothing written. --force starts them over "
                       "(your files are copied to build/labs-backup/ first)")
    if work:
        backup = build_dir / "labs-backup" / time.strftime("%Y%m%d-%H%M%S")
        backup.mkdir(parents=True, exist_ok=True)
        for f in work:
            if (labs / f).exists():
                shutil.copy2(labs / f, backup / f)
        say(f"lab: your work in {', '.join(work)} copied to {backup}")
    changed = make_labs.generate_all(root / "solutions", labs)
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / GENERATED_STUBS).write_text(
        json.dumps({f.name: lab_digest(f) for f in sorted(labs.glob("[0-9][0-9]_*"))}, indent=1) + "\n")
    say("lab: wrote " + (", ".join(changed) if changed else "nothing (labs/ already up to date)"))
    return EXIT_PASS


# -------------------------------------------------------------------------------------- compare
def compare_shapes(data):
    """The shapes a comparison runs: the case file's "compare" list, else its bench sweep (untagged)."""
    entries = data.get("compare") or [e for e in data.get("bench", []) if not e.get("tag")]
    return [((e.get("variants") or data["variants"] or [""])[0], strip_timing(e["args"])) for e in entries]


def strip_timing(args):
    out, skip = [], False
    for x in args:
        if skip:
            skip = False
        elif x in ("--iters", "--warmup", "--json"):
            skip = True
        else:
            out.append(x)
    return out


def compare_plan(specs, shapes_of=None):
    """[(section, variant, shape args)] for compare: 'NN' or 'NN:VARIANT' per section, on its own
    shapes, or on the shapes of section `shapes_of` (then a section's variant is the one named, else
    its first). A variant the section does not have is bad input."""
    plan = []
    common = compare_shapes(load_cases(resolve(shapes_of))) if shapes_of else None
    for spec in specs:
        name, _, variant = spec.partition(":")
        s = resolve(name)
        data = load_cases(s)
        if variant and variant not in data["variants"]:
            raise BadInput(f"compare: {s} has no variant '{variant}' (its variants: {', '.join(data['variants'])})")
        if common is None:
            plan += [(s, variant or v, shape) for v, shape in compare_shapes(data)]
        else:
            plan += [(s, variant or data["variants"][0], shape) for _, shape in common]
    return plan


def cmd_compare(a):
    """Your builds of the sections (and the solution's, --solution-too) on the same shapes, one
    table: the chapter's exercise 2 (how much does FA2's loop order buy over FA1's?), and with
    --shapes-of the sections side by side on one section's shapes (exercise 4)."""
    plan = compare_plan(a.section, a.shapes_of)
    names = list(dict.fromkeys(s for s, _, _ in plan))
    needs_solutions(a)
    builds = [("lab", False)] + ([("solution", True)] if a.solution_too else [])
    if not has_gpu():  # said before a build that would be for nothing
        say("lab: compare times kernels and needs a GPU: no NVIDIA GPU found (nvidia-smi lists none)")
        return EXIT_CANNOT_RUN
    build(targets(names, solution=a.solution_too, lab=True))
    on_gpu, reason = gpu_available(names[0], False, 120)
    if not on_gpu:
        say(f"lab: compare times kernels and needs a GPU: {reason}")
        return EXIT_CANNOT_RUN
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for s, variant, shape in plan:
            for label, solution in builds:
                rec = Path(tmp) / f"{s}-{label}-{len(rows)}.json"
                cmd = program(s, solution) + (["--variant", variant] if variant else []) + \
                    ["--quiet", "--warmup", str(a.warmup), "--iters", str(a.iters), "--json", rec] + shape
                code, out, _ = run_limited(cmd, a.timeout)
                ms = gflops = None
                try:
                    r = json.loads(rec.read_text())[-1]
                    ms = r["timing"]["median_ms"]
                    gflops = r["metrics"]["flops_model"] / (ms * 1e-3) / 1e9 if ms else None
                except (OSError, ValueError, KeyError, IndexError, TypeError):
                    pass
                verdict = {EXIT_PASS: "", EXIT_FAIL: "FAIL", EXIT_BAD_INPUT: "not this shape",
                           EXIT_CANNOT_RUN: "cannot run here"}.get(code, f"exit {code}")
                failed = failed or code not in (EXIT_PASS, EXIT_BAD_INPUT, EXIT_CANNOT_RUN)
                rows.append((f"{s} {variant}".strip(), label, " ".join(shape), ms, gflops, verdict))
                say(f"  {s} {label} {' '.join(shape)}: " + (f"{ms:.4g} ms" if ms else verdict or "no time"))
    head = ("section", "build", "shape", "ms", "GFLOP/s", "")
    cells = [head] + [(s, b, sh, f"{ms:.4g}" if ms else "-", f"{g:.1f}" if g else "-", v)
                      for s, b, sh, ms, g, v in rows]
    widths = [max(len(str(r[i])) for r in cells) for i in range(len(head))]
    say("")
    for n, r in enumerate(cells):
        say("  ".join(str(c).rjust(w) if i in (3, 4) else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if n == 0:
            say("  ".join("-" * w for w in widths[:5]))
    return EXIT_FAIL if failed else EXIT_PASS


# ---------------------------------------------------------------------------------------- grade
def resume_plan(grade, plan, out_root, known, expected, is_stub=None):
    """(the plan's submissions --resume grades, {name: report} of those it keeps): a grade is kept
    where its grading finished under the conditions `expected` holds, of the lab files the
    submission holds now (grade.resume_reason). One line each, saying which and why."""
    todo, kept = [], {}
    for given, path, name in plan:
        why, report = grade.resume_reason(out_root / name, path, dict(expected, path=str(path)), known, is_stub)
        if why is None:
            shown = grade.outcome_text(report)
            say(f"   {name}: graded before, unchanged; kept ({shown if grade.is_triage(report) else 'total ' + shown})")
            kept[name] = report
        else:
            say(f"   {name}: {'not graded before' if why == 'no grade before' else 'regraded: ' + why}")
            todo.append((given, path, name))
    say(f"lab: --resume: {len(kept)} of {len(plan)} submission(s) kept (graded before, unchanged); "
        f"{len(todo)} to grade")
    return todo, kept


def not_on_cpu(names):
    """{Python section: why its --cpu path cannot run here}: a package that path imports is not
    installed (the grader installs nothing; `scripts/lab check NN --cpu` would)."""
    import importlib.util
    from labcli import setup
    missing = {s: [m for m in setup.SECTION_NEEDS.get((s, False), setup.SECTION_MODULES)
                   if importlib.util.find_spec(m) is None] for s in names if is_python(s)}
    return {s: f"needs {', '.join(m)}, not installed here (pip install -r scripts/requirements-cpu.txt)"
            for s, m in missing.items() if m}


HIDDEN_CASE_PROBE_S = 30  # a program checks its arguments first: seconds past that, it has accepted them


def refused_hidden_cases(hidden):
    """One line for each hidden case whose arguments the reference solution refuses (exit 2): an
    option misspelt in the case file would otherwise cost every student that case. Each runs once
    per variant, as the grader would, without --cpu (a GPU-only shape is no refusal): the program
    checks its arguments before anything else, so an exit 2 comes at once, and a run that goes on
    (or says "cannot run here", 77) has accepted them."""
    data = cases.load(hidden)
    section = data["section"]
    if section not in sections():
        return [f"{hidden}: 'section' names no section of this lab: {section}"]
    build(targets([section], lab=False))
    variants, refused = load_cases(section)["variants"], []
    for case in data["cases"]:
        for v in case.get("variants", data.get("variants", variants)):
            cmd = program(section, True) + ["--variant", v, "--iters", "0", "--quiet"] + case.get("args", [])
            code, out, _ = run_limited(cmd, HIDDEN_CASE_PROBE_S)
            if code == EXIT_BAD_INPUT:
                said = [line for line in out.strip().splitlines() if line.strip()]
                refused.append(f"{hidden}: case {case['name']!r} ({v}): the solution refuses it: "
                               f"{said[-1] if said else 'exit 2'}")
                break
    return refused


def cmd_grade(a):
    try:
        return grade_class(a)
    except KeyboardInterrupt:  # Ctrl-C: the grades finished so far are summed up, and the way on is said
        import grade
        if grade.graded_before(a.out):
            summary, every = grade.rebuild_class_summary(a.out)
            say(f"\nlab: {len(every)} grade(s) in {summary}; the same command with --resume grades the rest")
        raise


def grade_class(a):
    import grade
    if getattr(a, "cpu", False) and getattr(a, "no_gpu", False):  # --no-gpu runs no case (triage); --cpu runs them
        raise BadInput("--cpu and --no-gpu: --no-gpu is triage (no case runs), --cpu runs the cases on the CPU model; "
                       "give one; nothing written")
    known = sections()
    if a.sections == []:  # `--sections` and no section: not "every one", which is leaving it out
        raise BadInput("--sections: name the sections to grade (01 02, or all); without --sections every section "
                       "some submission handed in is graded; nothing written")
    only = resolve_all(a.sections) if a.sections else None
    hidden = a.cases
    if hidden:
        try:
            cases.load(hidden)
        except cases.CaseFileError as e:
            raise BadInput(str(e))
    if not (ROOT / "solutions").is_dir():
        raise LabError("grade needs the full tree (solutions/, the reference it times against), not a release",
                       EXIT_CANNOT_RUN)  # as bench: not bad input, a tree that cannot do it
    # A typo in a submission's path, or a folder with no lab file, is an error, not a zero grade; so
    # is an --out whose grade folders (each replaced whole) would be, hold or sit in a submission.
    out_root = Path(a.out)
    skipped = grade.skipped_submissions(a.submissions, out_root)
    submissions = [s for s in a.submissions if s not in skipped]
    if not submissions:
        raise BadInput(f"no submission to grade ({'; '.join(skipped.values())}); nothing written")
    problems, handed, empty = [], {}, False
    for sub in submissions:
        p = Path(sub)
        if not p.is_dir():
            why = folder_problem(p.parent, must_exist=True, writable=False)  # a file on its way is named
            tarball = re.search(r"\.(tar(\.\w+)?|tgz)$", p.name.lower())
            into = shlex.quote(str(p.parent / p.name[:tarball.start()])) if tarball else None
            unzip = (f" (unpack it into its own folder first: unzip -q {shlex.quote(sub)} -d "
                     f"{shlex.quote(str(p.with_suffix('')))})" if p.suffix.lower() == ".zip" else
                     f" (unpack it into its own folder first: mkdir -p {into} && tar xf {shlex.quote(sub)} -C {into})"
                     if tarball else "")
            problems.append(f"{sub}: {'not a folder' + unzip if p.exists() else why if ' is a file' in why else 'no such folder'}")
            continue
        found, _, notes, _ = grade.submission_notes(p, known)
        inner = [] if found else grade.submission_folders(p, known)
        if len(inner) > 1:  # `submissions` for `submissions/*`: never one student's grade, --allow-empty or not
            problems.append(f"{sub} holds {len(inner)} submission folders: did you mean {sub.rstrip('/')}/*?")
            continue
        handed[sub] = found
        if not found and not a.allow_empty:
            empty = True
            hint = "; ".join(notes) or "expected labs/NN_name.cu files, e.g. labs/01_naive.cu"
            problems.append(f"{sub}: no lab file ({hint})")
    plan, notes, out_problems = grade.plan_outputs(submissions, out_root)
    why = folder_problem(out_root)
    if why:  # (it says what stands in the way; the plan's own "not a folder" would repeat it)
        out_problems = [f"--out {a.out}: {why}"]
    problems += out_problems
    advice = " (--allow-empty grades a folder with no lab file as 0)" if empty and not any("did you mean" in p for p in problems) else ""
    if len(problems) == 1:
        raise BadInput(f"{problems[0]}; nothing written{advice}")
    if problems:
        for p in problems:
            say(f"lab: {p}")
        raise BadInput(f"{len(problems)} problems (above); nothing written{advice}")
    refused = refused_hidden_cases(hidden) if hidden else []
    if refused:
        for line in refused[:-1]:
            say(f"lab: {line}")
        raise BadInput(f"{refused[-1]}" + (f" (and {len(refused) - 1} more, above)" if len(refused) > 1 else "") +
                       f"; fix {hidden}; nothing written")
    sandbox_why = grade.sandbox_problem() if a.sandbox != "off" else "--sandbox off"
    if sandbox_why and a.sandbox == "on":
        raise BadInput(f"--sandbox on: {sandbox_why}; nothing written")
    for line in [*skipped.values(), *notes]:
        say(f"lab: {line}")
    grader = grade.Grader(ROOT, BUILD, run_limited, make_labs.make_stub, load_cases, expand_cases, cmake_env,
                          lambda msg: say(f"  {msg}"), jobs=a.jobs, devices=gpu_devices(1 if a.cpu else a.gpus),
                          on_device=on_device, program=program)
    # Without --sections, every section that some submission handed in counts for all (a missing one
    # is 0): a submission of fewer sections must not average over fewer. An untouched stub hands in
    # nothing (a student who hands in the whole release did not do every section).
    is_stub = lambda path, s: grade.handed_in_stub(grader, path, s)
    graded, stub_only = (only, []) if only else grade.class_sections(handed.values(), out_root, known, is_stub)
    if not only and graded:
        whose = "the class's, from the grades under --out" if getattr(graded, "kept", 0) else "every one handed in"
        say(f"lab: graded sections ({whose}; a missing one counts 0): {', '.join(graded)}" +
            (f"; {', '.join(stub_only)} handed in only as untouched stubs: not graded" if stub_only else ""))
        # a section few students handed in is a 0 for all the others: said, so that no one misses it
        few = grade.section_takers(handed, graded, is_stub)
        for line in few:
            say(f"lab: {line}")
        common = [s for s in graded if not any(line.startswith(s + ":") and "fewer than half" in line for line in few)]
        if any("fewer than half" in line for line in few):
            say(f"lab: every other student scores 0 in a section handed in by fewer than half the class; to grade "
                f"only the common ones: --sections {' '.join(s[:2] for s in common) or '...'}")
    on_gpu, gpu_name = False, None
    no_gpu_here = "no NVIDIA GPU found (nvidia-smi lists none)"
    unit_tests = [s for s in graded if not is_python(s) and load_cases(s).get("unit_tests")]
    if a.cpu:  # a provisional grade: no GPU asked for, no reference solution built (nothing is timed)
        say("lab: --cpu: a provisional grade on the CPU model: each case the CPU model runs (as scripts/lab check "
            "without a GPU) runs the student's exercise code in the section's C++ model (--cpu; a Python section: "
            "their code on the CPU), not their kernel; races and other GPU-only bugs are not seen, and nothing is "
            "timed (no speed bonus); grade on a GPU for the final grades")
        grader.not_on_cpu = not_on_cpu(graded)
        for s, why in grader.not_on_cpu.items():
            say(f"lab: {s}: not run on the CPU: {why}")
    elif not a.no_gpu and not has_gpu():  # before the solutions are built: without a GPU they are never run
        say(f"lab: {no_gpu_here}; triage only: compiles, untouched stubs" +
            (f" and the exercises' unit tests of {', '.join(unit_tests)} (on the CPU)" if unit_tests else "") +
            "; no case of the case lists is run")
    elif not a.no_gpu:
        build(targets(graded or known, lab=False))  # the reference solutions, timed beside the students' code
        probe = BUILD / "grade_probe.json"
        probe.unlink(missing_ok=True)
        first = (graded or known)[0]
        probe_code, out, _ = run_limited(program(first, True) + probe_args(first) + ["--json", probe], 120)
        on_gpu = probe_code != EXIT_CANNOT_RUN
        if on_gpu and probe.exists():
            gpu_name = json.loads(probe.read_text())[-1]["gpu"]["name"]
            probe.unlink()
        if not on_gpu:
            no_gpu_here = no_gpu_reason(out) or "the GPU probe could not run"
            say(f"lab: {no_gpu_here}; triage only: compiles, untouched stubs" +
                (f" and the exercises' unit tests of {', '.join(unit_tests)} (on the CPU)" if unit_tests else "") +
                "; no case of the case lists is run")
        elif not sandbox_why:  # the same probe fenced in: a sandbox that hides the GPU grades nobody
            fenced = BUILD / "grade_probe"
            fenced.mkdir(parents=True, exist_ok=True)
            code, fenced_out, _ = run_limited(grade.sandbox_command(program(first, True) + probe_args(first) +
                                                                    ["--json", fenced / "probe.json"], fenced), 120)
            shutil.rmtree(fenced, ignore_errors=True)
            if code != probe_code:
                said = fenced_out.strip().splitlines()
                sandbox_why = f"the GPU run fails inside it: exit {code}" + (f", {said[-1][:160]}" if said else "")
                if a.sandbox == "on":
                    raise LabError(f"--sandbox on: {sandbox_why}; nothing graded")
    # (in triage too: the students' files are compiled, and their unit tests run)
    if sandbox_why:
        advice = ", or install bubblewrap" if "not installed" in sandbox_why else ""
        say(f"lab: the students' programs run with your permissions, not sandboxed ({sandbox_why}): grade as "
            f"a user who can write only --out{advice}")
    else:
        say("lab: each student's program runs sandboxed (bubblewrap): it writes only its grade folder, no network")
    grader.sandbox = not sandbox_why
    sha, kept, order = git_sha(), {}, {name: n for n, (_, _, name) in enumerate(plan)}
    if a.resume:  # a class cut short: what was finished under these very conditions stays as it is
        plan, kept = resume_plan(grade, plan, out_root, known, {
            "grading_files": grader.grading_files(), "graded_sections": graded,
            "gpu": grade.CPU_MODEL if a.cpu else gpu_name if on_gpu else None,
            "sandboxed": bool(grader.sandbox), "timeout_s": a.timeout,
            "hidden_cases_sha256": grade.file_digest(hidden) if hidden else None}, is_stub)
    if plan and any(not is_python(s) and any(s in found for found in handed.values()) for s in graded):
        harness = out_root / grade.HARNESS
        say(f"lab: building the harness (common/) once, for every submission, in {harness} ...", end="")
        t0 = time.time()
        ok, log = grader.build_harness(harness)
        (harness / "build.log").write_text(log)
        if not ok:
            say(" failed")
            raise LabError(f"the harness (common/) does not build; nothing graded (log: {harness / 'build.log'})",
                           detail=grade.compiler_excerpt(log, 15))
        say(f" done ({time.time() - t0:.0f} s)")
    reports, not_graded = list(kept.values()), []
    # Every submission is compiled first, several at once (the compiler is the slow part of a
    # class on a machine without a GPU); then each one's cases and timing run alone, as they would
    # with no build beside them.
    limit_children(grade.MAX_FILE_BYTES)  # every build and run from here on: no file over 1 GB
    cores = usable_cores()
    build_jobs = max(1, min(len(plan), cores, a.build_jobs or min(8, cores // 2)))
    grader.build_threads = max(1, cores // build_jobs)
    if plan:  # (--resume may have kept them all)
        say(f"lab: compiling {len(plan)} submission(s), {build_jobs} at a time ...")
    staged = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=build_jobs)
    try:
        builds = {pool.submit(grader.build, path, out_root, known, graded, name): (given, name)
                  for given, path, name in plan}
        for n, job in enumerate(concurrent.futures.as_completed(builds), 1):
            given, name = builds[job]
            try:
                staged[name] = job.result()
            except Exception as e:  # noqa: BLE001  one submission's surprise (an unreadable file, a full
                # disk) must not cost the rest of the class its grades: named here and at the end
                not_graded.append(f"{given}: {type(e).__name__}: {e}")
                say(f"   not graded: {not_graded[-1]}")
                continue
            built = staged[name]["built"]
            failed = [s for s, (ok, _) in built.items() if ok is False]
            unchecked = [s for s, (ok, _) in built.items() if ok is None]  # compiled; the grader could not check it
            said = ([f"compile error in {', '.join(failed)}"] if failed else []) + \
                   ([f"{', '.join(unchecked)} {grade.GRADER_PROBLEM}"] if unchecked else [])
            say(f"   [{n}/{len(plan)}] {given}: " + ("; ".join(said) or ("built" if built else "nothing to build")))
    finally:  # Ctrl-C: the builds not started are dropped (each one in flight ends at its own pace)
        pool.shutdown(wait=True, cancel_futures=True)
    for n, (given, path, name) in enumerate(plan, 1):
        if name not in staged:
            continue
        say(f"== [{n}/{len(plan)}] grading {given}" + (f" as {name}" if name != path.name else ""))
        try:
            r = grader.run(staged[name], hidden, a.timeout, on_gpu, gpu_name, sha, lambda msg: say(f"   {msg}"),
                           cpu_model=a.cpu)
        except Exception as e:  # noqa: BLE001  (as above)
            not_graded.append(f"{given}: {type(e).__name__}: {e}")
            say(f"   not graded: {not_graded[-1]}")
            continue
        for line in r.get("intake", []) + r.get("misnamed", []):
            say(f"   {line}")
        say(f"   total {grade.total_text(r)} -> {out_root / name / 'grade.md'}")
        reports.append(r)
    reports.sort(key=lambda r: order.get(r.get("submission"), 0))  # the kept and the graded, in the order given
    summary, every = grade.rebuild_class_summary(out_root)
    say(f"lab: class summary ({len(every)} submissions: these and the grades already in {out_root}) in {summary}")
    for r in reports:
        say(f"   {r['submission']:<30} {grade.outcome_text(r)}")
    if review := grade.review_line(every):
        say(f"lab: {review}")
    if len({tuple(r["graded_sections"]) for r in every}) > 1:
        say(f"lab: the grades in {out_root} are not all over the same sections; grade them again together "
            "(or with the same --sections) for totals that compare")
    if a.cpu:
        say("lab: --cpu: " + cpu_model_note(grade, reports))
    if not_graded:
        say(f"lab: {len(not_graded)} submission(s) not graded, the rest are: " + "; ".join(not_graded))
        return EXIT_FAIL
    if not on_gpu and not a.cpu and not a.no_gpu:  # a GPU was wanted and none ran: not grades, whatever the log
        say(f"lab: triage only ({no_gpu_here}): no case ran, the totals are empty; grade on a GPU, or with --cpu "
            "for provisional grades on the CPU model (exit 77)")
        return EXIT_CANNOT_RUN
    return EXIT_PASS


def cpu_model_note(grade, reports):
    """What the CPU model left out of a class's grades, in a line: the runs of the case lists skipped
    as GPU-only (per section: the same for every submission) and the runs whose GPU-only part was not
    checked (in all)."""
    skipped, in_part = {}, 0
    for r in reports:
        for s, sec in r["sections"].items():
            if s in r["graded_sections"] and "gpu_only_runs" in sec:
                skipped[s] = sec["gpu_only_runs"]
            in_part += sum(c["status"] == grade.GPU_ONLY_PART for c in sec.get("cases", []))
    shown = ", ".join(f"{s} {n}" for s, n in sorted(skipped.items()) if n)
    return ((f"runs of the case lists skipped as GPU-only, per submission: {shown}" if shown
             else "no run of the case lists skipped as GPU-only") +
            (f"; {in_part} run{'s' if in_part > 1 else ''} ran their CPU part only ({grade.GPU_ONLY_PART}, not counted)"
             if in_part else "") +
            "; these grades are provisional (CPU model): grade on a GPU for the final ones")


# ------------------------------------------------------------------------------ grading example
# The planted bug edits given code, not an exercise (this script goes out with the student release,
# which holds no answer): the GPU team's max() answers 0, so the softmax never subtracts the row max.
PLANTED_BUG = ("    const float m = block_reduce(x, MaxOp{}, scratch);\n    return forget_max ? 0.f : m;\n",
               "    const float m = block_reduce(x, MaxOp{}, scratch);\n"
               "    return 0.f;  // PLANTED BUG: the row max is never subtracted\n")
EXAMPLE_MARKER = ".grading-example"  # in a folder the grading example wrote: only such a folder is emptied


def refuse_foreign_example_folder(out):
    """--out of the grading example: a new or empty folder, or one the example wrote (its marker, or
    its submissions from before the marker); anything else is bad input, never emptied."""
    why = folder_problem(out)
    if why:
        raise BadInput(f"grading example: --out: {why}")
    mine = (out / EXAMPLE_MARKER).exists() or (out / "submissions" / "planted-bug").is_dir()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not mine)):
        raise BadInput(f"grading example: {out} is not empty and not a grading example's folder; give a new folder")
# The hang is a host-side loop added at the end of the file, before main runs: it does not depend on
# the text of the solution, only on the program's command line (--t 65).
PLANTED_HANG = """
// PLANTED HANG: a run with --t 65 never returns (the grader's time limit must stop it).
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
namespace planted {
struct Hang {
  Hang() {
    std::ifstream f("/proc/self/cmdline");
    std::string arg, prev;
    while (std::getline(f, arg, '\\0')) {
      if (prev == "--t" && arg == "65")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      prev = arg;
    }
  }
} hang;
}  // namespace planted
"""


def handed_in(path):
    """A section file as a student hands it in. A compiled section is built as a lab by the grader;
    a Python section names its build in the file, so a solution handed in says build="lab", as its
    generated stub does (as a student's finished lab would)."""
    text = Path(path).read_text()
    return make_labs.as_lab(text) if Path(path).suffix == ".py" else text


SAME_SPEED = (0.8, 1.25)  # the range of speed ratios a copy of the solution may show


def grading_example(out, names, lab, step, gpus=1):
    """Grades four submissions made from the repository and checks the grader's verdicts:
    the solutions (full marks), the stubs (zero), a copy of 01 with the max subtraction removed
    (loses exactly its large-score cases) and a copy of 01 that hangs at T = 65 (stopped by the
    time limit, every other case still graded). The solutions must also time as the solution does."""
    import grade
    subs = out / "submissions"
    # --out may be any folder: only one the example wrote (its marker, or its submissions of an
    # earlier version) is emptied, and only of what the example writes
    refuse_foreign_example_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / EXAMPLE_MARKER).touch()
    for mine in (subs, out / "grades"):
        shutil.rmtree(mine, ignore_errors=True)
    for name, folder in (("solutions", "solutions"), ("stubs", "labs")):
        (subs / name).mkdir(parents=True)
        for s in names:
            (subs / name / source_name(s)).write_text(handed_in(ROOT / folder / source_name(s)))
    text = (ROOT / "solutions" / "01_naive.cu").read_text()
    (subs / "hang").mkdir(parents=True)
    (subs / "hang" / "01_naive.cu").write_text(text + PLANTED_HANG)
    (subs / "planted-bug").mkdir(parents=True)
    old, new = PLANTED_BUG
    if text.count(old) != 1:
        raise LabError(f"grading example: solutions/01_naive.cu no longer has one `{old.strip()}` to plant the bug in")
    (subs / "planted-bug" / "01_naive.cu").write_text(text.replace(old, new))
    # 60 s a run: the hang costs one limit, and the largest decode case (a 2 GB K/V cache to make)
    # takes 20 s with 8 runs sharing the machine.
    code = step("grade solutions, stubs, planted-bug, hang", lab + ["grade", *(str(subs / n) for n in
                ("solutions", "stubs", "planted-bug", "hang")), "--out", str(out / "grades"), "--timeout", "60",
                "--jobs", str(4 * gpus), "--gpus", str(gpus)], 3000)
    if code != EXIT_PASS:
        return code
    g = lambda n: json.loads((out / "grades" / n / "grade.json").read_text())
    sol, stub, bug, hang = g("solutions"), g("stubs"), g("planted-bug"), g("hang")
    if sol["gpu"] is None:
        say("lab: the grading example needs a GPU (its verdicts are the cases' results); triage only here")
        return EXIT_CANNOT_RUN
    problems = []
    for s in names:
        if sol["sections"][s]["correctness"] != 100.0:
            problems.append(f"solutions: {s} correctness {sol['sections'][s]['correctness']}")
        if stub["sections"][s]["correctness"] != 0.0:
            problems.append(f"stubs: {s} correctness {stub['sections'][s]['correctness']}")
        if not stub["sections"][s].get("unmodified_stub"):
            problems.append(f"stubs: {s} not recognised as the unmodified stub")
        # the same code as the solution: its speed is the solution's, up to the noise of one timing
        ratio = sol["sections"][s].get("speed_ratio")
        if grade.perf_shape(load_cases(s)) and not (ratio and SAME_SPEED[0] <= ratio <= SAME_SPEED[1]):
            problems.append(f"solutions: {s} " + ("was not timed" if ratio is None else
                            f"timed at {ratio:.2f}x the solution, expected {SAME_SPEED[0]}-{SAME_SPEED[1]}x"))
    lost = sorted({c["case"] for c in bug["sections"]["01_naive"]["cases"] if c["status"] != "pass"})
    expected = sorted({c["name"] for c in load_cases("01_naive")["cases"] if "--magnitude" in c.get("args", [])})
    if lost != expected:
        problems.append(f"planted-bug lost {lost}, expected exactly {expected}")
    timeouts = sorted({c["case"] for c in hang["sections"]["01_naive"]["cases"] if c["status"] == "timeout"})
    t_of = lambda args: args[args.index("--t") + 1] if "--t" in args[:-1] else None
    hung = sorted(c["name"] for c in load_cases("01_naive")["cases"] if t_of(c.get("args", [])) == "65")
    others = [c for c in hang["sections"]["01_naive"]["cases"] if c["status"] not in ("pass", "timeout")]
    if not timeouts or (hung and set(timeouts) != set(hung)) or others:
        problems.append(f"hang: timeouts {timeouts} (expected {hung}), other failures {[c['case'] for c in others]}")
    say("   grading example: " + ("verdicts as expected" if not problems else "; ".join(problems)))
    say(f"   totals: solutions {sol['total']:.1f}, stubs {stub['total']:.1f}, planted-bug {bug['total']:.1f}, "
        f"hang {hang['total']:.1f}; planted-bug lost {lost}; hang timed out on {timeouts}")
    return EXIT_PASS if not problems else EXIT_FAIL


def cmd_grading_example(a):
    if not (ROOT / "solutions").is_dir():
        raise LabError("grading-example needs the full tree (solutions/, which it grades), not a release",
                       EXIT_CANNOT_RUN)
    out = Path(a.out).resolve()
    refuse_foreign_example_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    names = resolve_all(a.sections) if a.sections else sections()
    if not has_gpu():  # said before a build that would be for nothing
        say("lab: the grading example needs a GPU: no NVIDIA GPU found (nvidia-smi lists none)")
        return EXIT_CANNOT_RUN
    build(targets(names))
    on_gpu, reason = gpu_available(names[0], True, 120)
    if not on_gpu:  # its verdicts are the cases' results: a triage would check nothing
        say(f"lab: the grading example needs a GPU: {reason}")
        return EXIT_CANNOT_RUN

    def step(title, cmd, timeout):
        say(f"== {title}")
        code, text, secs = run_limited(cmd, timeout)
        (out / "grading-example.log").write_text(text)
        say("\n".join("   " + line for line in text.strip().splitlines()[-12:]))
        return code
    return grading_example(out, names, [sys.executable, str(ROOT / "scripts" / "lab")], step, a.gpus)


# -------------------------------------------------------------------------------------- release
# What a course hands out leaves these behind: the answers (solutions/, the instructor key and
# notes), scripts/figures/ (it draws the handouts' figures from solutions/, ported lines of its
# answers included; the release has the figures it drew), the tests' planted wrong answers
# (tests/wrong_*.h: each sits beside the right line it replaces, and builds only with solutions/)
# and the grading example's reports.
RELEASE_EXCLUDED = ("solutions/", "ch12/key/", "ch12/INSTRUCTORS.md", "scripts/figures/", "tests/wrong_")
RELEASE_EXCLUDED_FOLDERS = ("grading-example",)  # instructors' material, wherever it sits (results/<gpu>/)


def tree_files(root):
    """The tree's files: git's list where there is one, else every file but build output."""
    r = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, text=True)
    if r.returncode == 0 and r.stdout:
        return [f for f in r.stdout.split("\0") if f]
    skip = {".git", "build", ".deps", ".venv", "__pycache__"}
    return [str(p.relative_to(root)) for p in Path(root).rglob("*")
            if p.is_file() and not (set(p.relative_to(root).parts) & skip)]


def cmd_release(a):
    """The student tree: every file of the lab but the answers. It builds (the stubs, no
    solutions), its `scripts/lab test` runs the CPU tests that need no solution, and `scripts/lab
    check NN` checks the student's lab."""
    dest = Path(a.dir).resolve()
    if dest == ROOT or ROOT in dest.parents:
        raise BadInput(f"release: {a.dir} is inside this tree; give a folder outside it")
    why = folder_problem(a.dir)
    if why:
        raise BadInput(f"release: {why}")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BadInput(f"release: {a.dir} exists and is not an empty folder")
    if not (ROOT / "solutions").is_dir():
        raise LabError("release: this tree is already a release (it has no solutions/)")
    try:
        differ = make_labs.generate_all(ROOT / "solutions", ROOT / "labs", check_only=True)
    except make_labs.ExerciseError as e:
        raise LabError(f"release: {e}")
    if differ:  # edited labs (someone's work, perhaps the answers) never go out, nor stale stubs
        raise LabError("release: labs/ is not the stubs generated from solutions/ (" + ", ".join(differ) +
                       "); run scripts/lab make-labs first (--force where a lab holds edits)")
    files = [f for f in tree_files(ROOT) if not f.startswith(RELEASE_EXCLUDED) and (ROOT / f).is_file()
             and not set(Path(f).parts[:-1]) & set(RELEASE_EXCLUDED_FOLDERS)]
    for f in files:
        out = dest / f
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, out)
    (dest / "labs" / make_labs.STUB_DIGESTS).write_text(make_labs.stub_digests(dest / "labs"))
    make_labs.keep_stub_copies(dest / "labs")
    left_out = [f"{p}*" if p.endswith("_") else p for p in RELEASE_EXCLUDED] + [f"{d}/" for d in RELEASE_EXCLUDED_FOLDERS]
    say(f"lab: wrote the student release to {dest}: {len(files)} files (no {', '.join(left_out)})")
    return EXIT_PASS
