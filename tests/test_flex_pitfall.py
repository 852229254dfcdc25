"""Pitfall 10 of section 10 on the CPU, compiled with Inductor as on a GPU: a score_mod capturing a
Python float compiles once per value, one capturing a tensor compiles once, counted by
torch._dynamo's own counters (the record's metrics.pitfall_10). Dynamo's recompile limit is lowered
below the number of values first, so the run also shows that the section raises it for the demo
(else the last values would run unfused and the counts would be short).

  python3 tests/test_flex_pitfall.py
Exit 77 (skipped) where PyTorch is not installed.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOL = ROOT / "solutions" / "10_flex.py"
VALUES = 3
LIMIT = 2  # < VALUES

RUNNER = f"""
import runpy, sys
import torch._dynamo
torch._dynamo.config.recompile_limit = {LIMIT}
sys.argv = [{str(SOL)!r}] + sys.argv[1:]
runpy.run_path({str(SOL)!r}, run_name="__main__")
"""


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("cannot run here: PyTorch is not installed")
        return 77
    with tempfile.TemporaryDirectory() as d:
        rec_file = Path(d) / "r.json"
        args = ["--cpu", "--variant", "softcap", "--t", "32", "--h", "1", "--values", str(VALUES),
                "--json", str(rec_file)]
        r = subprocess.run([sys.executable, "-c", RUNNER] + args, capture_output=True, text=True, timeout=900)
        out = r.stdout + r.stderr
        print(out.strip())
        problems = []
        if r.returncode != 0:
            problems.append(f"exit {r.returncode}, want 0")
        if "Traceback" in out:
            problems.append("a traceback was printed")
        m = {}
        if rec_file.exists():
            m = json.loads(rec_file.read_text())[-1]["metrics"].get("pitfall_10", {})
        else:
            problems.append("no record written")
        for how, want in (("float", VALUES), ("tensor", 1)):
            got = m.get(how, {})
            if got.get("compiles") != want:
                problems.append(f"captured {how}: {got.get('compiles')} compile(s), want {want}")
            if got.get("not_compiled") != 0:
                problems.append(f"captured {how}: {got.get('not_compiled')} call(s) not compiled, want 0")
            line = f"captured {how:<6}: {want} compile(s)"
            if line not in out:
                problems.append(f"missing line '{line}'")
        if m.get("backend") != "inductor":
            problems.append(f"backend {m.get('backend')!r}, want 'inductor'")
    for p in problems:
        print(f"FAIL: {p}")
    print("pitfall 10 counts: " + ("FAIL" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
