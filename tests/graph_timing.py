#!/usr/bin/env python3
"""graph_timing.py BIN_DIR: the decode sections (05, 06) are timed both launched and replayed from a
CUDA graph, as their PyTorch baselines are, and keep the faster. For each section and variant, one
timed run with --json: its record must hold both medians, the kept one must be the smaller and
name its method, and the run must pass its check (the harness also fails a run whose timed runs
left another O than the checked one). Exit 0 when all hold, 1 otherwise, 77 without a GPU."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

if len(sys.argv) != 2:
    print(__doc__)
    sys.exit(2)
bin_dir = Path(sys.argv[1])
SHAPE = ["--b", "2", "--h", "8", "--h-kv", "2", "--d", "128", "--t", "1", "--t-kv", "4097", "--kv-lens", "random",
         "--warmup", "3", "--iters", "15"]
bad = []
with tempfile.TemporaryDirectory() as tmp:
    for section in ("05_decode", "06_paged"):
        for variant in ("single", "split"):
            rec_path = Path(tmp) / f"{section}.{variant}.json"
            run = subprocess.run([str(bin_dir / section), "--variant", variant, *SHAPE, "--json", str(rec_path)],
                                 capture_output=True, text=True)
            if run.returncode == 77:
                print(run.stdout + run.stderr)
                sys.exit(77)
            name = f"{section} {variant}"
            if run.returncode != 0:
                bad.append(f"{name}: exit {run.returncode}\n{run.stdout}{run.stderr}")
                continue
            t = json.loads(rec_path.read_text())[-1]["timing"]
            eager, graph = t.get("eager_median_ms"), t.get("graph_median_ms")
            if not (isinstance(eager, float) and isinstance(graph, float) and eager > 0 and graph > 0):
                bad.append(f"{name}: the record lacks a median of both methods: {t}")
                continue
            want = ("cuda-graph", graph) if graph <= eager else ("queued", eager)
            if (t["method"], t["median_ms"]) != want:
                bad.append(f"{name}: kept {t['method']} {t['median_ms']}, expected {want} (eager {eager}, graph {graph})")
            if "(cuda-graph; eager" not in run.stdout and "(queued; eager" not in run.stdout:
                bad.append(f"{name}: the printed time does not show both methods:\n{run.stdout}")
            print(f"{name}: eager {eager * 1e3:.2f} us, graph {graph * 1e3:.2f} us, kept {t['method']}")
for b in bad:
    print("FAIL", b)
print("FAIL" if bad else "PASS: both methods timed, the faster kept, the timed O the checked one")
sys.exit(1 if bad else 0)
