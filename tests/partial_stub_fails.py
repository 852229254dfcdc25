#!/usr/bin/env python3
"""partial_stub_fails.py PROGRAM SECTION: a lab with one exercise left undone (or wrong) fails the check.

PROGRAM is the section built from its solution with one exercise region stubbed (make_labs.py
--only ID). Its CPU check, the case list `scripts/lab check NN` runs without a GPU, must catch the
missing exercise: this passes (exit 0) at the first case that FAILs (exit 1), and fails (exit 1)
when every case passes or is "not checked here" (the CPU model never ran that exercise) or when a
run crashes or refuses its input.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from labcli.common import load_cases, run_limited  # noqa: E402
from labcli.student import expand_cases  # noqa: E402


def main():
    program, section = sys.argv[1], sys.argv[2]
    data = load_cases(section)
    runs = [r for r in expand_cases(data, solution=False, bugs=False, on_gpu=False) if r[3] == "pass"]
    for name, variant, args, _, _ in runs:
        cmd = [program, "--variant", variant, "--iters", "0", "--quiet", "--cpu"] + args
        code, out, _ = run_limited(cmd, data.get("timeout_s", 300))
        if code == 1:
            print(f"ok: caught by case '{name}' ({variant}): {out.strip().splitlines()[-2:]}")
            return 0
        if code not in (0, 77):
            print(f"FAIL: case '{name}' ({variant}) exited {code}, not a verdict: {out.strip()[-400:]}")
            return 1
    print(f"FAIL: all {len(runs)} CPU cases of {section} pass or are not checked with this exercise undone (or wrong): "
          "the CPU check does not run it")
    return 1


if __name__ == "__main__":
    sys.exit(main())
