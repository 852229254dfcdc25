#!/usr/bin/env python3
"""Split-count sweep: for each shape, each forced split count, R rounds interleaved; median_ms.
usage: sweep.py OUTDIR ROUNDS BUILD -- "label|bin args|s1,s2,..." ;; ..."""
import json, os, subprocess, sys, statistics
out, rounds, build = sys.argv[1], int(sys.argv[2]), sys.argv[3]
specs = [s.strip() for s in " ".join(sys.argv[5:]).split(";;") if s.strip()]
os.makedirs(out, exist_ok=True)
res = {}
for r in range(rounds):
    for spec in specs:
        label, cmd, counts = [x.strip() for x in spec.split("|")]
        counts = counts.split(",")
        for c in (counts if r % 2 == 0 else counts[::-1]):
            argv = cmd.split() + (["--splits", c] if c != "auto" else [])
            js = f"{out}/{label}.{c}.{r}.json"
            p = subprocess.run([f"{build}/bin/{argv[0]}"] + argv[1:] + ["--json", js], capture_output=True, text=True, timeout=120)
            try:
                rec = json.load(open(js)); rec = rec[0] if isinstance(rec, list) else rec
                ms, ok, n = rec["timing"]["median_ms"], rec["check"]["passed"], rec["metrics"]["splits"]
            except Exception:
                ms, ok, n = float("nan"), False, -1
                print(f"{label} {c}: exit {p.returncode} {p.stderr[-300:]}", flush=True)
            res.setdefault((label, c), []).append((ms, ok, n))
for spec in specs:
    label, _, counts = [x.strip() for x in spec.split("|")]
    row = []
    for c in counts.split(","):
        v = res.get((label, c), [])
        ms = statistics.median([m for m, _, _ in v]); ok = all(o for _, o, _ in v); n = v[0][2] if v else -1
        row.append(f"{c}->{n}: {1000*ms:7.2f} us{'' if ok else ' FAIL'}")
    print(f"{label:22s} " + " | ".join(row), flush=True)
