"""What every command shares: the sections, the case files, building, and running one program
under a time limit."""
import contextlib
import functools
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import cases  # noqa: E402  (scripts/cases.py)

BUILD = Path(os.environ.get("LAB_BUILD_DIR", ROOT / "build"))
CASES = ROOT / "tests" / "cases"
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_CANNOT_RUN, EXIT_TIMEOUT = 0, 1, 2, 77, 124


class LabError(Exception):
    """A failure the user is told about in one line (scripts/lab prints it, then exits `code`)."""

    def __init__(self, message, code=EXIT_FAIL, detail=""):
        super().__init__(message)
        self.code, self.detail = code, detail


class BadInput(LabError):
    def __init__(self, message):
        super().__init__(message, EXIT_BAD_INPUT)


def say(msg="", end="\n"):
    print(msg, end=end, flush=True)


# ----------------------------------------------------------------------------------- sections
def sections(root=None):
    """Every section of the tree: solutions/NN_name.cu (a CUDA program) or solutions/NN_name.py
    (a Python program, run as `python3 FILE ARGS`); in a student release, which has no
    solutions/, the stubs of labs/."""
    root = Path(root or ROOT)
    folder = root / "solutions" if (root / "solutions").is_dir() else root / "labs"
    return sorted({p.stem for p in folder.glob("[0-9][0-9]_*") if p.suffix in (".cu", ".py")})


def is_python(section, root=None):
    root = Path(root or ROOT)
    return any((root / folder / f"{section}.py").exists() for folder in ("solutions", "labs"))


def source_name(section):
    """The section's file name in solutions/ and labs/: NN_name.cu or NN_name.py."""
    return f"{section}.py" if is_python(section) else f"{section}.cu"


def included_labs(text):
    """The lab files a lab's source #includes by name, as their stems ("05_decode" for 06's
    `#include "05_decode.cu"`): another section's exercises that this section's program runs too."""
    return [Path(n).stem for n in re.findall(r'^\s*#\s*include\s*"([^"/]+)\.cu"', text, re.M)]


def resolve(name, all_too=False):
    """'1', '01', '01_naive', 'naive' -> '01_naive': a number, the stem, or (any case) the last words
    of the name after NN_ that one section alone ends with ('tile', 'sliding_window', not 'ive');
    anything else is bad input. all_too: the command also takes 'all' (check, bench), so its refusal
    offers it."""
    secs = sections()
    for s in secs:
        if name == s or (name.isdigit() and name.zfill(2) == s[:2]):
            return s
    word = name.lower()
    # The whole name wins over the sections it is a suffix of (a 'window' beside a 'sliding_window').
    named = [s for s in secs if s[3:].lower() == word] or [s for s in secs if word and s.lower().endswith("_" + word)]
    if len(named) == 1:
        return named[0]
    if named:
        raise BadInput(f"section '{name}' is ambiguous: it could be {', '.join(named)} (give its number)")
    raise BadInput(f"unknown section '{name}' (sections: {', '.join(secs)}{', or all' if all_too else ''})")


def resolve_all(names):
    """Section arguments ('all' among them: every section) -> section names, in order, once each."""
    if "all" in names:
        return sections()
    out = []
    for n in names:
        s = resolve(n, all_too=True)
        if s not in out:
            out.append(s)
    return out


def program_options():
    """The options the section programs take, read from the sources that declare them (the C++ and
    Python harnesses, every section file): no build and no run, so the driver can ask before it
    launches anything. A quoted "--name" anywhere there counts: more names only make the driver
    leave more to the program."""
    files = [*(ROOT / "common" / "harness").glob("*.*"), *(ROOT / "common" / "python" / "labharness").glob("*.py"),
             *(ROOT / "solutions").glob("[0-9][0-9]_*"), *(ROOT / "labs").glob("[0-9][0-9]_*")]
    names = {"-h", "--help"}
    for f in files:
        try:
            names.update(re.findall(r"[\"'](--[a-z0-9][a-z0-9-]*)", f.read_text(errors="replace")))
        except OSError:
            continue
    return names


def targets(names, solution=True, lab=True):
    """The CMake targets of these sections' programs (a Python section has none)."""
    out = []
    for s in names:
        if is_python(s):
            continue
        out += ([s] if solution else []) + ([f"lab_{s}"] if lab else [])
    return out


def program(section, solution, build_dir=None, labs_dir=None):
    """The command line that runs a section's program: a built binary, or [python3, FILE]."""
    if is_python(section):
        folder = ROOT / "solutions" if solution else Path(labs_dir or ROOT / "labs")
        if solution or labs_dir is None:
            return [sys.executable, folder / f"{section}.py"]
        # A section finds its harness (common/python) from the tree it sits in; a copy graded
        # elsewhere is told where the lab's is, ahead of whatever else the user's path holds.
        path = os.pathsep.join(filter(None, [str(ROOT / "common" / "python"), os.environ.get("PYTHONPATH")]))
        return ["env", f"PYTHONPATH={path}", sys.executable, folder / f"{section}.py"]
    bin_dir = Path(build_dir or BUILD) / "bin"
    return [bin_dir / (section if solution else f"lab_{section}")]


def load_cases(section, hidden=None):
    """The section's case file (tests/cases/NN_name.json), plus an instructor's hidden cases."""
    try:
        data = cases.load(CASES / f"{section}.json")
        if "variants" not in data:
            raise cases.CaseFileError(f"{CASES / (section + '.json')}: missing 'variants'")
        if hidden:
            data = cases.merge_hidden(data, cases.load(hidden))
    except cases.CaseFileError as e:
        raise BadInput(str(e))
    return data


# ------------------------------------------------------------------------------------ paths
def folder_problem(path, must_exist=False, writable=True):
    """Why `path` cannot serve as a folder ("" if it can), found before anything runs, not as a
    crash after the runs it was to hold. Nothing on its way may be a file (/etc/passwd/out: the
    file is named, it is not "missing"); the nearest part that exists must be writable where a
    command writes there. must_exist: the folder itself must be there (one read from, or a
    --report's), else it may be missing and is made later, parents and all. Paths are named as
    given (a relative one stays relative)."""
    if not str(path):
        return "an empty path"
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                return f"{q} is a file, not a folder"
            if must_exist and q != p:
                return f"the folder {p} does not exist"
            if writable and not os.access(q, os.W_OK | os.X_OK):
                return f"folder {q} is not writable"
            return ""
    return f"the folder {p} does not exist" if must_exist else ""


# ------------------------------------------------------------------------------------ building
@functools.lru_cache(maxsize=None)
def local_architectures():
    """The CUDA architectures a build here needs, when LAB_CUDA_ARCHITECTURES does not say: this
    machine's GPUs (nvidia-smi's compute capabilities: "86" on an RTX 3090, "90" on an H100), or
    sm_80 alone where there is none (the CPU model runs; the kernels only need to compile). Half the
    compile time of the CMake default (80;90). None, for the default: a GPU newer than the lab's
    architectures (sm_100, sm_120: it runs the compute_90 PTX), or nvidia-smi unable to say."""
    if not shutil.which("nvidia-smi"):
        return "80"
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    caps = sorted({c.strip().replace(".", "") for c in r.stdout.splitlines() if c.strip()})
    if r.returncode != 0 or not caps:
        return "80" if "No devices were found" in r.stdout + r.stderr else None
    if not all(c.isdigit() and 80 <= int(c) <= 90 for c in caps):
        return None
    return ";".join(caps)


def cmake_env():
    env = dict(os.environ)
    if not shutil.which("nvcc") and Path("/usr/local/cuda/bin/nvcc").exists():
        env["PATH"] = "/usr/local/cuda/bin:" + env.get("PATH", "")
    if "LAB_CUDA_ARCHITECTURES" not in env:
        archs = local_architectures()
        if archs:
            env["LAB_CUDA_ARCHITECTURES"] = archs
    return env


def build_log():
    return BUILD / "lab-build.log"


def logged(cmd, log, env=None, progress=False):
    """Runs cmd with its output appended to `log`; returns the exit code. With progress, a long
    build shows how far it is (ninja's [done/total]) every half minute, on one line."""
    import re
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(map(str, cmd))}\n")
        f.flush()
        start = f.tell()
        try:
            proc = subprocess.Popen([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT, env=env or cmake_env())
        except OSError as e:
            f.write(f"cannot start {cmd[0]}: {e.strerror}\n")
            return 127
        shown = None
        while True:
            try:
                return proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                if not progress:
                    continue
                with open(log, errors="replace") as r:
                    r.seek(start)
                    steps = re.findall(r"^\[(\d+)/(\d+)\]", r.read(), re.MULTILINE)
                if steps and steps[-1] != shown:
                    shown = steps[-1]
                    say(f" [{shown[0]}/{shown[1]}]", end="")  # ninja's steps so far, on the building line


def tail(path, lines=15):
    try:
        return "\n".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def prefix_args(root=None):
    """A vendored copy of the C++ dependencies (scripts/lab deps --vendor), when the tree has one."""
    deps = Path(root or ROOT) / ".deps"
    return [f"-DCMAKE_PREFIX_PATH={deps}"] if (deps / "include").is_dir() else []


def cached_setting(name):
    """A variable's value in build/'s CMake cache, or None (not configured, or not set)."""
    try:
        text = (BUILD / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(rf"^{re.escape(name)}:[A-Z]*=(.*)$", text, re.M)
    return m.group(1).strip() if m else None


def cached_python():
    """The Python the build's tests run under (its CMake cache's Python3_EXECUTABLE), or None."""
    return cached_setting("Python3_EXECUTABLE")


def configure():
    if (BUILD / "CMakeCache.txt").exists():
        # A build configured under another Python (before the lab made its .venv/, or from another
        # environment) is pointed at this one: the tests need the packages installed into it.
        if cached_python() not in (None, sys.executable):
            if logged(["cmake", "-S", ROOT, "-B", BUILD, f"-DPython3_EXECUTABLE={sys.executable}"], build_log()) != 0:
                raise LabError("reconfiguring the build for this Python failed; log: " + str(build_log()),
                               detail=tail(build_log()))
        return
    from labcli import setup  # (first configure of this build folder: a fresh machine's dependencies)
    setup.ensure_cpp_deps()
    if not shutil.which("cmake"):
        raise LabError("cmake not found: install CMake >= 3.24 (e.g. sudo apt-get install cmake ninja-build)")
    if not shutil.which("nvcc", path=cmake_env()["PATH"]):
        raise LabError("nvcc not found: install the CUDA toolkit (>= 12; it installs and compiles without a GPU) "
                       "or put its bin/ on PATH; the Python sections need no nvcc (scripts/lab run 09)")
    # The tests run under the Python this driver runs under, the one it installs numpy into (CMake
    # would pick the first python3 on PATH, which may be another).
    args = ["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles",
            "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}"] + prefix_args()
    log = build_log()
    archs = cmake_env().get("LAB_CUDA_ARCHITECTURES", "80;90").replace(";", ", sm_")
    say(f"lab: configuring {BUILD} (first time; kernels for sm_{archs}: set LAB_CUDA_ARCHITECTURES for others; "
        f"log: {log})")
    t0 = time.time()
    if logged(args, log) != 0:
        shutil.rmtree(BUILD / "CMakeFiles", ignore_errors=True)
        (BUILD / "CMakeCache.txt").unlink(missing_ok=True)  # the next run configures again
        raise LabError("configuring the build failed; " + setup.configure_failure_hint(log), detail=tail(log))
    say(f"lab: configured in {time.time() - t0:.0f} s")


# An entry of CMake's CUDA_ARCHITECTURES: a compute capability (80, 90a; 100f: a family), real
# (SASS alone) or virtual (PTX alone) if asked.
ARCH_ENTRY = re.compile(r"(\d+)[af]?(-real|-virtual)?")


def architectures_problem(value):
    """Why LAB_CUDA_ARCHITECTURES=value cannot build the lab, or "". Checked before CMake sees it: a
    bad value would be configured, fail every build, and stay in build/'s cache."""
    if value in ("native", "all", "all-major"):
        return ""
    if not value.strip():
        return "it is empty"
    for entry in value.split(";"):
        m = ARCH_ENTRY.fullmatch(entry)
        if not m:
            number = re.sub(r"^(sm|compute)_", "", entry.lower())  # nvcc's spelling, not CMake's
            return f"'{entry}' is not a CUDA architecture" + (f" (CMake's spelling: {number})"
                                                              if ARCH_ENTRY.fullmatch(number) else "")
        if int(m.group(1)) < 80:
            return f"'{entry}' is older than sm_80, which the lab's kernels need"
    return ""


def check_architectures():
    """The user's LAB_CUDA_ARCHITECTURES: bad input before anything is configured; a notice where
    build/ keeps other architectures (CMake reads the variable at the first configure only)."""
    value = os.environ.get("LAB_CUDA_ARCHITECTURES")
    if value is None:
        return
    why = architectures_problem(value)
    if why:
        raise BadInput(f"LAB_CUDA_ARCHITECTURES={value}: {why}; give compute capabilities separated by ';', "
                       f"e.g. LAB_CUDA_ARCHITECTURES='80;90a' (or native, all, all-major); nothing configured")
    kept = cached_setting("LAB_CUDA_ARCHITECTURES")
    if kept is not None and kept.split(";") != value.split(";"):
        say(f"lab: {BUILD} keeps the architectures it was configured for ({kept}), not LAB_CUDA_ARCHITECTURES="
            f"{value}; delete {BUILD} to apply the new ones")


def build(target_list=None, again=2):
    """Builds these CMake targets (None: everything); output in the build log, shown on failure.
    again: how many more builds a lab saved during this one may start."""
    if os.environ.get("LAB_NO_BUILD"):  # set by ctest: tests run in parallel and must not rebuild
        return
    if target_list is not None and not target_list:
        return  # Python sections only: nothing to build
    check_architectures()
    configure()
    args = ["cmake", "--build", BUILD, "--parallel", str(usable_cores())]
    for t in target_list or []:
        args += ["--target", t]
    log = build_log()
    t0 = time.time()
    say(f"lab: building {', '.join(target_list) if target_list else 'everything'} ...", end="")
    before = lab_file_times()
    code = logged(args, log, progress=True)
    if code != 0:
        say(" failed")
        raise LabError(f"the build failed; full log: {log}", detail=build_errors(log))
    say(f" done ({time.time() - t0:.0f} s)")
    # A lab saved while the compiler had it open leaves an object older than the file but newer by
    # the clock (Make, and Ninja before 1.11, would then never rebuild it): the run would test the
    # code before the save. Its time is moved to now, so every build tool sees it, and it is built again.
    edited = [f for f, t in lab_file_times().items() if before.get(f) != t]
    if edited and again > 0:
        for f in edited:
            os.utime(f)
        say(f"lab: {', '.join(str(f.relative_to(ROOT)) for f in edited)} changed during the build: building again")
        build(target_list, again - 1)


def lab_file_times():
    """labs/'s files and their modification times (ns): the student's code, as the build saw it."""
    times = {}
    for f in (ROOT / "labs").rglob("*"):
        try:
            if f.is_file():
                times[f] = f.stat().st_mtime_ns
        except OSError:  # removed meanwhile
            pass
    return times


def build_errors(log, lines=15):
    """The compiler's first error lines of a build log, each with the indented lines under it (nvcc's
    "operand types are: ...", the source line and its caret: what says why), else its last lines."""
    text = Path(log).read_text(errors="replace").splitlines() if Path(log).exists() else []
    start = max((i for i, l in enumerate(text) if l.startswith("$ ")), default=0)
    errs, under_an_error = [], False
    for line in text[start:]:
        if " error" in line or line.startswith("FAILED"):
            errs.append(line)
            under_an_error = " error" in line
        elif under_an_error and line[:1].isspace() and line.strip():
            errs.append(line)
        else:
            under_an_error = False
    return "\n".join(errs[:lines] if errs else text[start:][-lines:])


def git_sha():
    if os.environ.get("LAB_GIT_SHA"):  # a copy of the tree without .git is told its commit
        return os.environ["LAB_GIT_SHA"]
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"
    sha = r.stdout.strip() or "unknown"
    return sha + ("-dirty" if dirty and sha != "unknown" else "")


def tree_relative(word):
    """A path inside the repository as typed from its root (build/bin/01_naive); any other word as it is."""
    path = Path(str(word))
    return str(path.relative_to(ROOT)) if path.is_absolute() and ROOT in path.parents else str(word)


def cwd_relative(word):
    """A path inside the repository as typed from the user's folder: relative to it where the path
    lies under it, else absolute (pasted from anywhere, it runs); any other word as it is."""
    path = Path(str(word))
    if not (path.is_absolute() and ROOT in path.parents):
        return str(word)
    try:
        here = Path.cwd()
    except OSError:  # a folder deleted under the user
        return str(path)
    return str(path.relative_to(here)) if here in path.parents else str(path)


def repo_relative(command):
    """A recorded command line as typed from the repository's root: a path inside the build folder
    as build/... (wherever LAB_BUILD_DIR put it), one inside the tree relative to it. A record says
    what ran (build/bin/08_tma_skeleton --t 4096), not where the tree sat on the machine that ran it."""
    def shown(word):
        path = Path(word)
        if path.is_absolute() and BUILD in path.parents:
            return str(Path("build") / path.relative_to(BUILD))
        return tree_relative(word)
    return " ".join(shown(w) for w in str(command).split(" "))


# ------------------------------------------------------------------------------------- running
OUTPUT_HEAD, OUTPUT_TAIL = 256 << 10, 1 << 20  # bytes of a run's output kept: its start and its end


def usable_cores():
    """The cores this process may run on (its affinity: a container's or a batch job's share), not
    the machine's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)


def limit_children(max_file_bytes=None):
    """Limits this process passes on to every program it starts: no core dump (a crashing CUDA
    program's can take gigabytes) and, for the grader, no file over max_file_bytes (a student's
    program must not fill the disk; Python itself ignores SIGXFSZ and gets an error instead, and
    subprocess restores the signal in its children, which are stopped by it)."""
    limits = [(resource.RLIMIT_CORE, 0)] + ([(resource.RLIMIT_FSIZE, max_file_bytes)] if max_file_bytes else [])
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        if soft == resource.RLIM_INFINITY or soft > value:
            resource.setrlimit(which, (value, hard))


def file_size_limit():
    """The largest file a program started from here may write (limit_children), or None."""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else soft


# Each program runs in a session of its own (its group is killed whole at its time limit), which
# the terminal's Ctrl-C does not reach: the driver stops them itself when it is interrupted.
_running, _running_lock, _stopping = set(), threading.Lock(), threading.Event()


def _kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # gone already
        pass


@contextlib.contextmanager
def _interrupt_deferred():
    """In the main thread (the only one Ctrl-C reaches), a Ctrl-C that comes while the body runs is
    raised when it ends, not halfway through it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, caught[0])


def start_stoppable(cmd, **popen_args):
    """Starts cmd in a session of its own and registers it for stop_running in one step: a Ctrl-C
    that came between the two (the program started, the driver not yet told) left it running after
    the driver ended; now that Ctrl-C is raised once it is registered, and the driver's stop kills it."""
    with _interrupt_deferred():
        proc = subprocess.Popen([str(c) for c in cmd], start_new_session=True, **popen_args)
        with _running_lock:
            _running.add(proc.pid)
    return proc


def stop_running():
    """Ctrl-C: the programs running now are killed and none starts after (a check's queued runs
    return at once)."""
    _stopping.set()
    with _running_lock:
        for pgid in list(_running):
            _kill_group(pgid)


@contextlib.contextmanager
def stopped_on_interrupt(proc):
    """While it waits for `proc` (started in a session of its own), the driver's Ctrl-C kills its
    group: stop_running from the main thread, or the interrupt itself in the thread that waits."""
    try:
        with _running_lock:
            _running.add(proc.pid)
        if _stopping.is_set():  # interrupted while it started
            _kill_group(proc.pid)
        yield
    except BaseException:  # Ctrl-C while this thread waits: the program goes with the driver
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        with _running_lock:
            _running.discard(proc.pid)


class HangWatch:
    """A program that hangs (an endless loop, a wait that never completes) hangs on every case of a
    list: once the runs at `limit` consecutive positions have timed out (a check's runs, a grade's
    cases: a position may hold several runs), `stopped` is set and no other run should start. The
    runs may end in any order (several at once)."""

    def __init__(self, limit):
        self.limit, self.hung, self._timed_out = limit, [], set()
        self._lock, self._stop = threading.Lock(), threading.Event()

    def stopped(self):
        return self._stop.is_set()

    def ended(self, position, timed_out):
        """A run at `position` ended; `hung` becomes the positions that stopped the list."""
        if not timed_out:
            return
        with self._lock:
            self._timed_out.add(position)
            for first in range(position - self.limit + 1, position + 1):
                window = list(range(first, first + self.limit))
                if not self._stop.is_set() and set(window) <= self._timed_out:
                    self.hung = window
                    self._stop.set()


def run_limited(cmd, timeout, capture=True, echo=None, extra_env=None, stuck=None):
    """Runs cmd in its own process group, its input closed; kills the whole group on timeout (exit
    124). Of the output, the first OUTPUT_HEAD and last OUTPUT_TAIL bytes are kept (a program that
    prints without end must not fill the memory of a grader running a class). echo(bytes), if given,
    is handed all of it as it comes, then the note on how the run ended (a timeout, a crash).
    extra_env: variables added to this run's environment. stuck=(seconds, judge): a run still going
    after `seconds` whose output so far judge(text) calls stuck is stopped there, as a timeout (it
    need not wait out the rest of its limit)."""
    env = dict(os.environ, LAB_GIT_SHA=os.environ.get("LAB_GIT_SHA") or git_sha(), **(extra_env or {}))
    start = time.time()
    if _stopping.is_set():
        return 130, "interrupted\n", 0.0
    try:
        proc = start_stoppable(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if capture else None,
                               stderr=subprocess.STDOUT if capture else None, env=env)
    except OSError as e:  # a missing tool (compute-sanitizer, ncu) is a failed step, not a crash
        return 127, f"cannot start {cmd[0]}: {e.strerror}\n", 0.0
    with stopped_on_interrupt(proc):
        return _wait_limited(proc, cmd, timeout, capture, echo, start, stuck)


def _wait_limited(proc, cmd, timeout, capture, echo, start, stuck=None):
    """run_limited's wait: the output kept, the time limit, how the run ended."""
    head, tail, dropped = bytearray(), bytearray(), [0]

    def drain():
        for chunk in iter(lambda: proc.stdout.read1(1 << 16), b""):
            if echo:
                echo(chunk)
            room = OUTPUT_HEAD - len(head)
            head.extend(chunk[:max(room, 0)])
            tail.extend(chunk[max(room, 0):])
            if len(tail) > OUTPUT_TAIL:
                dropped[0] += len(tail) - OUTPUT_TAIL
                del tail[:len(tail) - OUTPUT_TAIL]

    reader = threading.Thread(target=drain, daemon=True) if capture else None
    if reader:
        reader.start()
    limit = timeout
    try:
        if stuck and stuck[0] < timeout:
            try:
                code = proc.wait(timeout=stuck[0])
            except subprocess.TimeoutExpired:
                if stuck[1]((bytes(head) + bytes(tail)).decode(errors="replace")):
                    limit = stuck[0]
                    raise
                code = proc.wait(timeout=timeout - stuck[0])
        else:
            code = proc.wait(timeout=timeout)
        note = ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
        note = f"\nTIMEOUT: stopped after {limit:.0f} s\n"
        code = EXIT_TIMEOUT
    if reader:
        reader.join(timeout=10)  # a grandchild outside the group may hold the pipe: do not wait on it
    gap = f"\n[... {dropped[0]} bytes of output left out ...]\n".encode() if dropped[0] else b""
    if code == -signal.SIGXFSZ and file_size_limit():
        note += f"\nSTOPPED: it wrote a file larger than the {file_size_limit() >> 20} MB a run may write\n"
    elif code < 0:
        note += f"\nCRASHED: {crash_words(-code)}\n"
    if echo and note:
        echo(note.encode())
    return code, (bytes(head) + gap + bytes(tail)).decode(errors="replace") + note, time.time() - start


def crash_words(signum):
    """What a program killed by a signal did, in a student's words."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if name in ("SIGSEGV", "SIGBUS"):
        return (f"the program was killed by {name} (signal {signum}): most often memory read or written out of "
                f"bounds, an index of your code past the end of an array")
    if name == "SIGABRT":
        return (f"the program was killed by {name} (signal {signum}): a failed assert, an uncaught exception, or "
                f"a heap corrupted by a write out of bounds")
    if name == "SIGKILL":
        return f"the program was killed by {name} (signal {signum}): out of memory, or stopped from outside"
    return f"the program was killed by {name} (signal {signum})"


# How a program says that --cpu would only answer "needs a GPU" (common/harness/harness.cpp): its
# cannot-run line reads "cannot run here: <why>, and only a GPU runs this: <what>".
ONLY_A_GPU = "only a GPU runs this:"


def no_gpu_reason(output):
    """The program's own reason it cannot run here ("no CUDA GPU found (no driver)"), without the
    advice that follows it."""
    for line in output.splitlines():
        if line.startswith("cannot run here:"):
            return line[len("cannot run here:"):].split(";")[0].strip()
    return None


def has_gpu():
    """Whether this machine shows an NVIDIA GPU (nvidia-smi lists one). To choose which packages to
    install, and to refuse a command that only times kernels before its build; whether a program can
    run is its own verdict (exit 77)."""
    return gpu_count() > 0


def gpu_devices(count):
    """--gpus N: the devices runs are spread over, the first N of CUDA_VISIBLE_DEVICES (else 0..N-1);
    [None] (leave the environment alone) for one. More than this machine shows is bad input: a run
    sent to a GPU that is not there cannot run, and a grade would not count it."""
    if count <= 1:
        return [None]
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    shown, where = (len(visible), "CUDA_VISIBLE_DEVICES") if visible else (gpu_count(), "nvidia-smi -L")
    if count > shown:
        raise BadInput(f"--gpus {count}: this machine shows {shown or 'no'} GPU{'' if shown == 1 else 's'} ({where}); "
                       "nothing run")
    return (visible or [str(i) for i in range(count)])[:count]


def gpu_count():
    """The GPUs nvidia-smi lists (0 without it)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def on_device(cmd, device):
    """cmd run on one GPU (None: as it is)."""
    return list(cmd) if device is None else ["env", f"CUDA_VISIBLE_DEVICES={device}", *cmd]
