#!/usr/bin/env python3
"""backward_smem_limit.py BIN: section 11's mma.sync backward and the shared memory a block may have.
Where a block may have 170 KB (Hopper) the atomic variant stages dQ in 8 KB of its own; at 163 KB (an
A100, or --smem-limit 163) it stages dQ in Pᵀ's buffer, after one more barrier, and racecheck and
synccheck run on that layout; the deterministic variant never stages; at 99 KB (RTX 30/40) both say
"cannot run here" before any launch. The case list checks the 163 KB layout's answers against
fp64. Exit 0 when all is as expected, 1 otherwise, 77 without a GPU (or one that allows less than
163 KB a block)."""
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

exe = sys.argv[1]
SMALL = ["--t", "131", "--t-kv", "67", "--causal", "--h", "2"]  # ragged tiles: several Q tiles a block


def run(*args, tool=None):
    cmd = [exe, "--iters", "0", "--quiet", *args]
    if tool:
        cmd = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "9", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 77 and "under --smem-limit" not in r.stderr:  # no GPU, or one smaller than asked
        print("SKIP: " + (r.stderr.strip().splitlines() or ["exit 77"])[-1])
        sys.exit(77)
    return r


bad = []
with tempfile.TemporaryDirectory() as tmp:
    record = Path(tmp) / "r.json"

    def metrics(*args):
        record.unlink(missing_ok=True)
        r = run("--t", "65", *args, "--json", str(record))
        return json.loads(record.read_text())[-1]["metrics"] if r.returncode == 0 else {"exit": r.returncode}

    for variant, d, limit, want in (("atomic", "128", "163", (164864, "in Pt")), ("atomic", "64", "163", (165888, "in Pt")),
                                    ("deterministic", "128", "163", (164864, None)),
                                    ("deterministic", "64", "163", (165888, None))):
        m = metrics("--variant", variant, "--d", d, "--smem-limit", limit)
        if (m.get("smem_bytes"), m.get("dq_stage")) != want:
            bad.append(f"{variant} D={d} --smem-limit {limit}: {m}, expected smem_bytes, dq_stage = {want}")
    for d, want in (("128", 173056), ("64", 174080)):  # this GPU's own limit: the layout with its own stage
        m = metrics("--variant", "atomic", "--d", d)
        if "exit" not in m and m.get("smem_limit_bytes", 1 << 30) >= want and (m["smem_bytes"], m["dq_stage"]) != (want, "own"):
            bad.append(f"atomic D={d} (this GPU's limit): {m}, expected smem_bytes {want}, dq_stage own")
for variant in ("atomic", "deterministic"):
    r = run("--variant", variant, "--d", "128", "--smem-limit", "99")
    if r.returncode != 77 or not re.search("^cannot run here: .* allows 99 KB under --smem-limit", r.stderr, re.M):
        bad.append(f"{variant} --smem-limit 99: exit {r.returncode}, expected 77 (cannot run here): {r.stderr.strip()}")
if shutil.which("compute-sanitizer"):
    for tool in ("racecheck", "synccheck"):
        for d in ("64", "128"):
            r = run("--variant", "atomic", "--d", d, "--smem-limit", "163", *SMALL, tool=tool)
            if r.returncode != 0:
                bad.append(f"{tool} atomic D={d} --smem-limit 163: exit {r.returncode}\n{r.stdout[-1500:]}")
else:
    print("compute-sanitizer not on PATH: the staged layout's racecheck and synccheck not run")
print("\n".join(bad) if bad else "PASS")
sys.exit(1 if bad else 0)
