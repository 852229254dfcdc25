#!/usr/bin/env python3
"""expect_exit.py --code N [--code M] [--match REGEX]... [--skip-code 77] [--stub LAB] -- COMMAND...

A test that can fail: runs COMMAND and passes (exit 0) only when it exits with one of the
expected codes AND its output (stdout + stderr) matches every REGEX. When COMMAND exits with the
skip code (77: cannot run here, e.g. no GPU), this exits 77 too, which ctest reports as skipped.
--stub LAB: the test is about the untouched stub LAB (labs/NN_name.cu or .py): once the file holds
a student's work, or in a student release, it is skipped (77) and COMMAND is not run.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import make_labs  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--code", type=int, action="append", required=True)
ap.add_argument("--match", action="append", default=[])
ap.add_argument("--skip-code", type=int)
ap.add_argument("--timeout", type=float, default=600)
ap.add_argument("--stub", help="skip unless this lab file is still the generated stub")
ap.add_argument("command", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
if a.stub and not make_labs.is_untouched_stub(a.stub):
    print(f"SKIP: {a.stub} is not the generated stub (a student's work, or a release): this test is about the stub")
    sys.exit(77)
try:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
except subprocess.TimeoutExpired:
    print(f"FAIL: timed out after {a.timeout} s: {' '.join(cmd)}")
    sys.exit(1)
out = r.stdout + r.stderr
if a.skip_code is not None and r.returncode == a.skip_code and a.skip_code not in a.code:
    print(f"SKIP (exit {r.returncode}): {out.strip().splitlines()[-1] if out.strip() else ''}")
    sys.exit(77)
problems = []
if r.returncode not in a.code:
    problems.append(f"exit code {r.returncode}, expected {' or '.join(map(str, a.code))}")
for pattern in a.match:
    if not re.search(pattern, out, re.MULTILINE):
        problems.append(f"output does not match /{pattern}/")
print(out[-3000:])
if problems:
    print("FAIL: " + "; ".join(problems))
    sys.exit(1)
print("ok: exit " + str(r.returncode) + "".join(f", matched /{p}/" for p in a.match))
