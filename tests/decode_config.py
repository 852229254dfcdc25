#!/usr/bin/env python3
"""decode_config.py BIN_DIR [--cpu]: the configuration a 05 or 06 run takes, as its record states
it, is the one its shared memory per block allows (common/decode/decode.cuh, choose_config). Runs
each section at D = 64 and 128 under --smem-limit 99 (RTX 30/40, sm_120), 163 (A100) and 227
(Hopper) and compares the record's metrics with the table below: warp sets and ring stages, the
block's shared memory, and (on a GPU) at least one resident block per SM. A GPU that allows less
than a limit asked for runs under its own: the record's smem_limit_bytes picks the row. The CPU
model has no shared memory; it takes the warps of the configuration (warp_sets). Exit 0 when every
record matches, 1 otherwise, 77 when the programs cannot run here (no GPU, without --cpu)."""
import sys
import tempfile
from pathlib import Path

from record_metrics import run_metrics

if len(sys.argv) < 2:
    print(__doc__)
    sys.exit(2)
bin_dir, cpu = Path(sys.argv[1]), "--cpu" in sys.argv[2:]
KB = 1024
# (section, D, KB a block may have) -> (stages, warp sets, shared memory bytes): the rings are
# sets x stages x (K, V) x 64 keys x D x 2 bytes, plus 06's 8 KB page window.
EXPECTED = {
    ("05_decode", 64, 99): (2, 2, 64 * KB), ("05_decode", 128, 99): (2, 1, 64 * KB),
    ("05_decode", 64, 163): (2, 2, 64 * KB), ("05_decode", 128, 163): (2, 2, 128 * KB),
    ("05_decode", 64, 227): (2, 2, 64 * KB), ("05_decode", 128, 227): (2, 2, 128 * KB),
    ("06_paged", 64, 99): (2, 2, 72 * KB), ("06_paged", 128, 99): (2, 1, 72 * KB),
    ("06_paged", 64, 163): (3, 2, 104 * KB), ("06_paged", 128, 163): (2, 2, 136 * KB),
    ("06_paged", 64, 227): (3, 2, 104 * KB), ("06_paged", 128, 227): (3, 2, 200 * KB),
}
SHAPE = ["--t", "1", "--t-kv", "300", "--b", "2", "--h", "8", "--h-kv", "2", "--iters", "0", "--quiet"]

bad = 0
with tempfile.TemporaryDirectory() as tmp:
    for (section, d, kb), (stages, sets, smem) in EXPECTED.items():
        cmd = [bin_dir / section, "--variant", "split", "--d", str(d), "--smem-limit", str(kb), *SHAPE,
               *(["--cpu"] if cpu else [])]
        m = run_metrics(cmd, f"{section} D={d} --smem-limit {kb}", Path(tmp) / f"{section}.{d}.{kb}.json")
        if m is None:
            bad += 1
            continue
        if cpu:
            got, want = (m.get("warp_sets"), m.get("warps")), (sets, 4 * sets)
        else:
            limit_kb = m.get("smem_limit_bytes", 0) // KB
            if limit_kb != kb:  # this GPU allows less than asked: its own row
                stages, sets, smem = EXPECTED.get((section, d, limit_kb), (None, None, None))
            # blocks an SM holds: at least one, and no more than the limit's GPU fits (limit + 1 KB an SM)
            fits = (m.get("smem_limit_bytes", 0) + KB) // (m.get("smem_bytes", 0) + KB)
            got = (m.get("stages"), m.get("warp_sets"), m.get("warps"), m.get("smem_bytes"),
                   1 <= m.get("blocks_per_sm", 0) <= fits)
            want = (stages, sets, 4 * sets, smem, True)
        ok = got == want
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {section} D={d} --smem-limit {kb}: {got}" + ("" if ok else f", expected {want}"))
print("all as expected" if not bad else f"{bad} records differ")
sys.exit(1 if bad else 0)
