"""10_flex --against-07 on the CPU: section 07's window kernel (its CPU model here) runs on the same
problem in the same run, and with --json its record joins 10's as variant 07-window of section
10_flex (metrics.kernel_of = 07_sliding_window) on the same problem, so 10's table holds both on
one row.

  python3 tests/test_flex_against07.py BUILD_DIR
Exit 77 (skipped) where PyTorch or build/bin/07_sliding_window is missing.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    build = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build"
    if not (build / "bin" / "07_sliding_window").exists():
        print(f"cannot run here: {build / 'bin' / '07_sliding_window'} is not built")
        return 77
    try:
        import torch  # noqa: F401
    except ImportError:
        print("cannot run here: PyTorch is not installed")
        return 77
    problems = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "r.json"
        args = ["--cpu", "--variant", "window", "--causal", "--window", "16", "--t", "64", "--t-kv", "80", "--h", "2",
                "--against-07", "--json", str(out)]
        r = subprocess.run([sys.executable, str(ROOT / "solutions" / "10_flex.py")] + args, capture_output=True,
                           text=True, timeout=600, env=dict(os.environ, LAB_BUILD_DIR=str(build)))
        print((r.stdout + r.stderr).strip())
        if r.returncode != 0:
            problems.append(f"exit {r.returncode}, want 0")
        recs = json.loads(out.read_text()) if out.exists() else []
        by = {x["variant"]: x for x in recs}
        if set(by) != {"window", "07-window"} or len(recs) != 2:
            problems.append(f"records {[x['variant'] for x in recs]}, want window and 07-window")
        else:
            ours, theirs = by["window"], by["07-window"]
            if theirs["section"] != "10_flex" or theirs["metrics"].get("kernel_of") != "07_sliding_window":
                problems.append(f"07's record: section {theirs['section']}, kernel_of {theirs['metrics'].get('kernel_of')}")
            if theirs["problem"] != ours["problem"]:
                problems.append(f"different problems: {theirs['problem']} and {ours['problem']}")
            if "07_sliding_window" not in theirs["command"] or not theirs["check"]["passed"]:
                problems.append("07's record is not a passing run of 07_sliding_window")
    for p in problems:
        print(f"FAIL: {p}")
    print("against 07: " + ("FAIL" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
