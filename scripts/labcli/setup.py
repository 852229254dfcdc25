"""A fresh machine's dependencies, got by the first command that needs them.

C++ (CLI11, nlohmann-json, Catch2): a vendored copy in .deps/ when the tree has one (made by
`scripts/lab deps --vendor` on a machine that has them: for a GPU machine without package access);
else the system's; else the Debian packages, installed when this user may (root, or sudo without a
password); else CMake fetches their sources at configure time. If that fails too, one line names
the command that installs them.
Python (numpy, matplotlib: the tests' .npy reader, tables and plots): pip, into the active virtual
environment or the user's site-packages; where the system's Python refuses pip (PEP 668: Debian 12,
Ubuntu 23.04 and later), into the lab's own virtual environment .venv/, which the driver runs under
from then on; if pip cannot, one line names the command. The Python
sections' packages (Triton, PyTorch) and the optional library baselines (FlashInfer,
FlashAttention-4) likewise, from scripts/requirements-cpu.txt or -gpu.txt, when a command needs them.
"""
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from urllib.parse import urlparse

from labcli.common import ROOT, LabError, build_log, folder_problem, has_gpu, logged, say

# Debian package -> a file it installs (how we tell it is there), and where a vendored copy takes it from.
DEBIAN_PACKAGES = {
    "nlohmann-json3-dev": "include/nlohmann/json.hpp",
    "libcli11-dev": "include/CLI/CLI.hpp",
    "catch2": "include/catch2/catch.hpp",
}
VENDORED = ["include/nlohmann", "share/cmake/nlohmann_json", "include/CLI", "share/cmake/CLI11",
            "include/catch2", "lib/cmake/Catch2", "lib/libCatch2WithMain.a"]
INSTALL_LINE = "sudo apt-get install " + " ".join(DEBIAN_PACKAGES)


def vendored_dir(root=None):
    deps = Path(root or ROOT) / ".deps"
    return deps if (deps / "include").is_dir() else None


def missing_packages(prefixes=("/usr", "/usr/local")):
    return [pkg for pkg, f in DEBIAN_PACKAGES.items() if not any((Path(p) / f).exists() for p in prefixes)]


def can_install():
    if not shutil.which("apt-get"):
        return None
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    return None


def ensure_cpp_deps():
    """Before the first configure: the Debian packages, if they are missing and this user may."""
    if vendored_dir():
        say(f"lab: using the vendored C++ dependencies in {vendored_dir()}")
        return
    missing = missing_packages()
    if not missing:
        return
    prefix = can_install()
    if prefix is None:
        say(f"lab: missing {', '.join(missing)} and no permission to install them: CMake will fetch their sources "
            f"(or install them: {INSTALL_LINE})")
        return
    say(f"lab: installing {' '.join(missing)} (apt-get; log: {build_log()})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = prefix + ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    if logged(install, build_log(), env) != 0:  # a stale package index: update it once, then again
        logged(prefix + ["apt-get", "update", "-q"], build_log(), env)
        if logged(install, build_log(), env) != 0:
            say(f"lab: apt-get could not install them; CMake will fetch their sources instead")
            return
    say(f"lab: installed {' '.join(missing)}")


NO_CUDA_SIGNS = ("No CMAKE_CUDA_COMPILER could be found", "Couldn't find CUDA library root",
                 "Failed to find nvcc", "CMAKE_CUDA_COMPILER:\n\n    nvcc\n\n  is not a full path")


def configure_failure_hint(log):
    text = Path(log).read_text(errors="replace") if Path(log).exists() else ""
    if any(k in text for k in NO_CUDA_SIGNS):
        return ("CMake found no working CUDA toolkit (an nvcc with its libraries beside it). Every program here, "
                "its CPU model included, is compiled by nvcc, so it is needed even on a machine with no GPU: install "
                "the CUDA toolkit, 12.x or newer (https://developer.nvidia.com/cuda-downloads), or, where it is "
                f"installed elsewhere, export CUDACXX=/path/to/its/bin/nvcc; then run this again; log: {log}")
    if "CMake 3.24 or higher is required" in text:
        return (f"this CMake is older than 3.24, which the lab needs: `{sys.executable} -m pip install cmake` "
                f"installs a newer one (or your system's package manager); then run this again; log: {log}")
    if any(k in text for k in ("FetchContent", "nlohmann_json", "CLI11", "Catch2", "catch2")) and missing_packages():
        return (f"the C++ libraries are missing and could not be fetched: install them ({INSTALL_LINE}), or copy "
                f"them from a machine that has them (scripts/lab deps --vendor DIR, see CONTRIBUTING.md); log: {log}")
    return f"log: {log}"


PY_MODULES = {"numpy": "numpy", "matplotlib": "matplotlib"}


def ensure_python_deps():
    """Before the tests: numpy and matplotlib, installed with pip when missing (said where)."""
    return pip_install([m for m in PY_MODULES if importlib.util.find_spec(m) is None], "requirements.txt",
                       "the tests that need them are skipped")


# What the Python sections import (their harness numpy; 09 Triton, 10 PyTorch; on a GPU both), and
# what a baseline (scripts/baselines.py's variants) imports beyond PyTorch.
SECTION_MODULES = ("numpy", "triton", "torch")
BASELINE_MODULE = {"flashinfer": "flashinfer", "fa4": "flash_attn"}


# What each Python section imports on each path. 09 on the CPU runs Triton's interpreter over numpy
# arrays: no PyTorch, whose Linux wheel brings about 4.7 GB of CUDA libraries to a laptop without a GPU.
SECTION_NEEDS = {("09_triton", False): ("numpy", "triton")}


# PyPI's Linux torch is the CUDA build (about 4.7 GB installed, with its CUDA libraries); PyTorch's
# own CPU index holds the CPU build (about 200 MB), all that eager FlexAttention on a laptop needs.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def ensure_section_packages(on_gpu, sections=()):
    """Before Python sections run: the Triton and PyTorch they need, from the requirements of this
    machine's path (the GPU's, or the CPU's: Triton's interpreter and PyTorch's eager FlexAttention;
    there torch is the CPU build). If pip cannot, the section itself says what is missing (exit 77)."""
    needed = {m for s in sections or [None] for m in SECTION_NEEDS.get((s, on_gpu), SECTION_MODULES)}
    missing = [m for m in SECTION_MODULES if m in needed and importlib.util.find_spec(m) is None]
    torch_ok = True
    if not on_gpu and "torch" in missing and not has_gpu():  # (a GPU machine's --cpu run keeps PyPI's CUDA build)
        missing.remove("torch")
        torch_ok = pip_install(["torch"], "requirements-cpu.txt", "the Python sections say what is missing",
                               index=TORCH_CPU_INDEX, what="the CPU build, from PyTorch's CPU index",
                               elsewhere="PyPI's build, which runs here too but brings its CUDA libraries "
                                         "(about 4.7 GB installed)")
    return pip_install(missing, "requirements-gpu.txt" if on_gpu else "requirements-cpu.txt",
                       "the Python sections say what is missing") and torch_ok


def ensure_baseline_packages(variants):
    """Before a bench on a GPU: PyTorch and the libraries of these baseline variants, from
    scripts/requirements-gpu.txt. One that does not install is recorded by its baseline as
    unavailable, with the error."""
    modules = ["torch"] + sorted({BASELINE_MODULE[v] for v in variants if v in BASELINE_MODULE})
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pip_install(missing, "requirements-gpu.txt", "their baselines are recorded as unavailable")


# The module a requirement line provides, where its name differs from the package's.
MODULE_OF_PACKAGE = {"flashinfer-python": "flashinfer", "flash-attn-4": "flash_attn"}

# About how much pip downloads for each module of the requirements: its wheel at the pinned version
# and what it pulls in that a fresh machine lacks (Linux x86-64, CPython 3.11; a module's share leaves
# out the others': torch's leaves out triton and numpy). Said as an install starts, since the large
# ones take minutes on a laptop's connection. PyPI's torch is the CUDA build, with its CUDA libraries.
DOWNLOAD_MB = {"numpy": 17, "matplotlib": 26, "triton": 188, "torch": 2530, "flashinfer": 340, "flash_attn": 100}
DOWNLOAD_MB_FROM_INDEX = {TORCH_CPU_INDEX: {"torch": 200}}  # the CPU build


def download_size(modules, index=None):
    """About how much pip downloads to install these modules ("about 188 MB"), or "" where a module
    has no figure."""
    sizes = [DOWNLOAD_MB_FROM_INDEX.get(index, {}).get(m, DOWNLOAD_MB.get(m)) for m in modules]
    if not sizes or None in sizes:
        return ""
    mb = sum(sizes)
    return f"about {mb / 1000:.1f} GB" if mb >= 1000 else f"about {mb} MB"


def requirement_lines(requirements, modules):
    """The lines of scripts/REQUIREMENTS that provide these modules (the file's pins kept), so an
    install touches nothing else a user has (a newer torch stays)."""
    out = []
    for line in (ROOT / "scripts" / requirements).read_text().splitlines():
        spec = line.split("#")[0].strip()
        name = spec.split(";")[0]
        for sep in "=<>!~[ ":
            name = name.split(sep)[0]
        if spec and MODULE_OF_PACKAGE.get(name, name.replace("-", "_")) in modules:
            out.append(spec)
    return out


def in_venv():
    """Whether this Python is an environment of the user's (or the lab's): a virtual environment, or
    the active conda environment. pip installs into it as it is, and the driver never leaves it."""
    conda = os.environ.get("CONDA_PREFIX")
    return (sys.prefix != getattr(sys, "base_prefix", sys.prefix)
            or bool(conda) and Path(conda).resolve() == Path(sys.prefix).resolve())


# The lab's own virtual environment: made only where the system's Python refuses pip installs. It
# sees the system's packages (a numpy from apt is not installed twice).
VENV = ROOT / ".venv"


def venv_python():
    py = VENV / "bin" / "python3"
    return py if os.access(py, os.X_OK) else None


def externally_managed():
    """PEP 668: a distribution's Python (Debian 12, Ubuntu 23.04 and later) marks itself so, and
    its pip refuses to install outside a virtual environment."""
    return not in_venv() and (Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").exists()


DRIVER_ARGV = []  # the driver's own arguments, for a start again under .venv/


def enter_lab_venv(argv):
    """Once the lab has made .venv/, every command runs under it (an environment the user activated
    wins: the driver never leaves it). The environment variable stops a loop where a broken .venv/
    would not report itself as a virtual environment."""
    DRIVER_ARGV[:] = argv
    py = venv_python()
    if py is None or in_venv() or os.environ.get("LAB_VENV_ENTERED"):
        return
    os.environ["LAB_VENV_ENTERED"] = "1"
    sys.stdout.flush()
    os.execv(py, [str(py), str(ROOT / "scripts" / "lab"), *argv])


_made = []  # make_lab_venv's answer, once a command asked (a second install in it does not try again)


def make_lab_venv():
    """Makes .venv/ (with pip) from this Python; Debian ships venv's pip apart (python3-venv), which
    is installed first where this user may. Returns its python, or None having said why not."""
    if not _made:
        _made.append(_make_lab_venv())
    return _made[0]


def _make_lab_venv():
    cmd = [sys.executable, "-m", "venv", "--clear", "--system-site-packages", str(VENV)]
    say(f"lab: this Python ({sys.executable}) is managed by your system and refuses pip installs (PEP 668); "
        f"making the lab's own virtual environment {VENV} (once; log: {build_log()})")
    if logged(cmd, build_log()) != 0:
        prefix = can_install()
        if prefix is not None:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            logged(prefix + ["apt-get", "install", "-y", "-q", "--no-install-recommends", "python3-venv"],
                   build_log(), env)
        if logged(cmd, build_log()) != 0:
            shutil.rmtree(VENV, ignore_errors=True)
            say(f"lab: could not make {VENV}: install Python's venv module (sudo apt-get install python3-venv) "
                f"and run the command again")
            return None
    return venv_python()


# pip's words for an index it could not reach (DNS, no route, refused, timed out).
UNREACHABLE = re.compile(r"Name or service not known|Temporary failure in name resolution|No address associated|"
                         r"Failed to establish a new connection|Network is unreachable|No route to host|"
                         r"Connection refused|timed out", re.IGNORECASE)


def pip_failure(output, index=None):
    """Why pip failed, in a few words, from its output: an index it could not reach (pip itself then
    says only "Could not find a version", as if the version did not exist), else its first error."""
    if UNREACHABLE.search(output):
        return f"{urlparse(index).hostname if index else 'the package index'} could not be reached"
    errors = [line[len("ERROR: "):].strip() for line in output.splitlines() if line.startswith("ERROR: ")]
    return errors[0] if errors else ""


def pip_install(missing, requirements, otherwise, index=None, what=None, elsewhere=None):
    """pip installs the lines of scripts/REQUIREMENTS that provide the missing modules; says what,
    about how much it downloads (DOWNLOAD_MB) and where (`what`: a word more on the packages).
    Offline, pip gives up after one short retry. `index`: the only package index to use (PyTorch's
    CPU builds); `elsewhere`: what the packages are from the default index instead, offered when
    `index` cannot be reached. Where this Python refuses pip (PEP 668), the packages go into the
    lab's .venv/ and the command starts again under it (what ran before this point is repeated; a
    build is up to date by then)."""
    lines = requirement_lines(requirements, missing)
    if not lines:
        return not missing
    python, restart = sys.executable, False
    if externally_managed():
        python = make_lab_venv()
        if python is None:
            say(f"lab: {otherwise}")
            return False
        where, restart = f"the lab's virtual environment {VENV}", True
    elif in_venv():
        where = f"the virtual environment {sys.prefix}"
    else:
        where = "the system Python (root)" if os.geteuid() == 0 else "your user site-packages (pip --user)"
    cmd = ([str(python), "-m", "pip", "install", "-q", "--retries", "1", "--timeout", "15"] + lines
           + ([] if restart or in_venv() or os.geteuid() == 0 else ["--user"]) + (["--index-url", index] if index else []))
    size = download_size(missing, index)
    about = "; ".join(x for x in (size and f"{size} to download", what) if x)
    say(f"lab: installing {', '.join(missing)}{f' ({about})' if about else ''} into {where} (pip; log: {build_log()})")
    log = build_log()
    start = log.stat().st_size if log.exists() else 0
    if logged(cmd, log) == 0:
        if restart:
            say(f"lab: from now on scripts/lab runs under {python}; starting the command again under it")
            enter_lab_venv(DRIVER_ARGV or sys.argv[1:])
        importlib.invalidate_caches()
        return True
    try:
        with open(log, "rb") as f:
            f.seek(start)
            output = f.read().decode(errors="replace")  # this install's part of the log
    except OSError:
        output = ""
    cause = pip_failure(output, index)
    packages = " ".join(shlex.quote(x) for x in lines)
    how = (f"{python} -m pip install {packages} --index-url {index}" if index
           else f"{python} -m pip install -r scripts/{requirements}")
    if index and elsewhere and UNREACHABLE.search(output):
        how += f"; or {elsewhere}: {python} -m pip install {packages}"
    say(f"lab: pip could not install {', '.join(missing)}{f' ({cause})' if cause else ''}; {otherwise} (install: {how})")
    return False


def vendor(dest, prefix="/usr"):
    """Copies the installed C++ dependencies into DEST/.deps: the tree's vendored copy, which the
    build uses by itself on a machine that has neither the packages nor network access."""
    dest = Path(dest)
    why = folder_problem(dest, must_exist=True)
    if why:
        raise LabError(f"deps --vendor: {why} (give the lab tree to copy into)", 2)
    missing = missing_packages((prefix,))
    if missing:
        raise LabError(f"deps --vendor: this machine lacks {', '.join(missing)} under {prefix} "
                       f"(install them first: {INSTALL_LINE})")
    deps = dest / ".deps"
    shutil.rmtree(deps, ignore_errors=True)
    for rel in VENDORED:
        src = Path(prefix) / rel
        if not src.exists():
            continue
        out = deps / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, out)
    size = sum(f.stat().st_size for f in deps.rglob("*") if f.is_file())
    say(f"lab: copied CLI11, nlohmann-json and Catch2 into {deps} ({size / 1e6:.1f} MB); "
        f"a build of that tree uses them by itself")
    return deps
