"""One program run for the metrics of its --json record, as the tests that read a record's
planner figures (decode_config.py, forced_splits.py) need it."""
import json
import subprocess
import sys


def run_metrics(cmd, label, out):
    """Runs cmd with --json out: the record's metrics, or None after a FAIL line naming `label`
    where the run failed. Exits 77 (the whole test skipped) where the program cannot run here."""
    r = subprocess.run([*map(str, cmd), "--json", str(out)], capture_output=True, text=True)
    if r.returncode == 77:
        print("SKIP: " + (r.stdout + r.stderr).strip().splitlines()[-1])
        sys.exit(77)
    if r.returncode != 0:
        print(f"FAIL {label}: exit {r.returncode}\n{r.stdout[-500:]}{r.stderr[-500:]}")
        return None
    return json.loads(out.read_text())[0]["metrics"]
