#!/usr/bin/env python3
"""test_paths.py BIN: the programs never crash on a path, never lose a file, and validate every
option the same way in every section (exit 2, one line, nothing run), without a GPU.

Every file it uses is made in a temporary folder and checked there. Prints "ok: ..." and exits 0
when every expectation holds; else names each one that does not and exits 1."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.argv[1])
problems, checked = [], 0


def run(args, timeout=120):
    try:
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, f"{args[0]}: not built"
    return r.returncode, (r.stdout + r.stderr).strip()


def expect_bad(prog, args, message):
    """exit 2, one line starting "bad input:", containing `message`."""
    global checked
    checked += 1
    exe = BIN / prog
    if not exe.exists():
        problems.append(f"{prog}: not built")
        return
    code, out = run([exe, *args])
    line = f"{prog} {' '.join(map(str, args))}"
    if code != 2:
        problems.append(f"{line}: exit {code}, expected 2: {out[-300:]}")
    elif len(out.splitlines()) != 1 or not out.startswith("bad input:"):
        problems.append(f"{line}: expected one line 'bad input: ...', got: {out[-300:]}")
    elif message not in out:
        problems.append(f"{line}: message {out!r} lacks {message!r}")
    if "Traceback" in out or "terminate called" in out:
        problems.append(f"{line}: crashed: {out[-300:]}")


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    notes = tmp / "notes.txt"
    notes.write_text("my notes, not records\n")
    a_file = tmp / "a_file.npy"
    a_file.write_text("x")
    cpu = ["--cpu", "--t", "33", "--quiet"]
    # --json / --dump: refused before anything runs
    expect_bad("01_naive", [*cpu, "--json", tmp / "no" / "dir" / "x.json"], "does not exist")
    expect_bad("01_naive", [*cpu, "--json", tmp], "is a folder, not a file")
    expect_bad("01_naive", [*cpu, "--json", "/etc"], "is a folder, not a file")
    expect_bad("01_naive", [*cpu, "--json", notes], "holds something other than a JSON list")
    expect_bad("01_naive", [*cpu, "--json", "/proc/nope.json"], "kernel file system")
    expect_bad("01_naive", [*cpu, "--dump", "/proc/nope"], "kernel file system")
    expect_bad("01_naive", [*cpu, "--dump", a_file], "is a file, not a folder")
    expect_bad("01_naive", [*cpu, "--dump", tmp / "no" / "dir"], "does not exist")
    if notes.read_text() != "my notes, not records\n":
        problems.append("--json over a non-record file changed it")
    if os.geteuid() != 0:  # (root writes anywhere)
        ro = tmp / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        expect_bad("01_naive", [*cpu, "--json", ro / "x.json"], "not writable")
    # --json creates a missing file, then appends to the list; no temporary file is left beside it
    rec = tmp / "records.json"
    for n in (1, 2):
        code, out = run([BIN / "01_naive", *cpu, "--json", rec])
        checked += 1
        try:
            got = len(json.loads(rec.read_text()))
        except (OSError, ValueError):
            got = None
        if code != 0 or got != n:
            problems.append(f"--json run {n}: exit {code}, {got} records (expected {n}): {out[-300:]}")
    leftovers = [p.name for p in tmp.iterdir() if ".tmp." in p.name]
    if leftovers:
        problems.append(f"temporary files left: {leftovers}")
    code, out = run([BIN / "01_naive", *cpu, "--dump", tmp / "dump"])
    checked += 1
    if code != 0 or not (tmp / "dump" / "o.npy").exists():
        problems.append(f"--dump to a new folder: exit {code}: {out[-300:]}")

# Options a section does not have: refused whatever the value, 0 included, in every section.
not_paged = ["01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "05_decode", "07_sliding_window"]
for prog in not_paged:
    for value in ("0", "16"):
        expect_bad(prog, ["--page-size", value], f"--page-size is not supported by {prog}")
for prog in ("01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "07_sliding_window", "08_tma_skeleton"):
    for value in ("0", "4"):
        expect_bad(prog, ["--splits", value], f"--splits is not supported by {prog}")
    expect_bad(prog, ["--kv-lens", "full"], f"--kv-lens is not supported by {prog}")
for prog in ("02_v1_tile", "03_v2_loop_order", "04_fp16"):
    for value in ("0", "8"):
        expect_bad(prog, ["--window", value, "--causal"], f"--window is not supported by {prog}")
expect_bad("06_paged", ["--page-size", "0"], "page size 0 is not a positive multiple of 16")
# The launch limit, checked once in the harness for every section (decode included).
for prog in ("01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "05_decode", "06_paged",
             "07_sliding_window", "08_tma_skeleton"):
    expect_bad(prog, ["--h", "65536", "--h-kv", "1"], "B*H must be <= 65535")

# --quiet: a passing run prints its verdict line and nothing else, in every section, on the CPU
# model and (where there is a GPU) on the GPU; without a GPU that run is the one "cannot run" line.
quiet_shapes = {"12_ring": ["--t", "32"], "06_paged": ["--t", "33", "--variant", "split"]}
for prog in ("01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "05_decode", "06_paged",
             "07_sliding_window", "08_tma_skeleton", "11_backward", "12_ring"):
    if not (BIN / prog).exists():
        checked += 1
        problems.append(f"{prog}: not built")
        continue
    for where in (["--cpu"], []):
        args = [*where, *quiet_shapes.get(prog, ["--t", "33"]), "--iters", "0", "--quiet"]
        code, out = run([BIN / prog, *args])
        checked += 1
        lines = out.splitlines()
        if code == 77 and not where and len(lines) == 1 and lines[0].startswith("cannot run here"):
            continue
        if code != 0 or len(lines) != 1 or not lines[0].startswith("PASS: "):
            problems.append(f"{prog} {' '.join(args)}: exit {code}, expected one PASS line: {out[-300:]}")

# Without a GPU: one line naming the cause and what runs instead (a GPU machine passes instead).
code, out = run([BIN / "01_naive", "--t", "33", "--iters", "0"])
checked += 1
if code == 77 and not (len(out.splitlines()) == 1 and out.startswith("cannot run here: no") and "--cpu" in out):
    problems.append(f"no-GPU message: {out!r}")
elif code not in (0, 77):
    problems.append(f"01_naive without --cpu: exit {code}: {out[-300:]}")

for p in problems:
    print("FAIL:", p)
print(f"ok: {checked} checks" if not problems else f"{len(problems)} of {checked} checks failed")
sys.exit(1 if problems else 0)
