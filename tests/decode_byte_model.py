#!/usr/bin/env python3
"""decode_byte_model.py BIN_DIR [--cpu]: the HBM byte model a 05 or 06 record reports
(metrics.hbm_bytes_model, what its GB/s divide) is the section's, worked out here from the record's
own problem: the K/V rows each sequence's query can see (kv_len[b] of them, mixed lengths), each
read once, plus Q read and O written (16-bit) and LSE written (fp32); 06 adds the block-table
entries of those rows (4 bytes each). A record that reports another model (the fused attention's,
which counts T_kv keys for every sequence) fails. Exit 0 when every record matches, 1 otherwise,
77 when the programs cannot run here (no GPU, without --cpu), 2 on a usage error."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

if len(sys.argv) < 2:
    print(__doc__)
    sys.exit(2)
bin_dir, extra = Path(sys.argv[1]), [a for a in sys.argv[2:] if a == "--cpu"]
SHAPE = ["--t", "1", "--t-kv", "300", "--kv-lens", "random", "--b", "5", "--h", "8", "--h-kv", "2", "--d", "64", "--seed", "7"]


def expected(rec):
    p = rec["problem"]
    lengths = p.get("kv_len") or [p["t_kv"]] * p["b"]
    e = 2  # fp16 / bf16
    kv = sum(lengths) * p["h_kv"] * p["d"] * 2 * e
    q_o = 2 * p["b"] * p["t_q"] * p["h"] * p["d"] * e
    lse = p["b"] * p["h"] * p["t_q"] * 4
    table = 0
    if rec["section"] == "06_paged":
        table = sum((n - 1) // p["page_size"] + 1 for n in lengths if n > 0) * 4
    return kv + q_o + lse + table


bad = 0
with tempfile.TemporaryDirectory() as tmp:
    for section, more in (("05_decode", []), ("06_paged", ["--page-size", "32"])):
        for variant in ("single", "split"):
            out = Path(tmp) / f"{section}.{variant}.json"
            cmd = [str(bin_dir / section), "--variant", variant, *SHAPE, *more, *extra, "--json", str(out), "--quiet"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 77:
                print(f"{section}: cannot run here ({r.stdout.strip()[-200:]})")
                sys.exit(77)
            if r.returncode != 0:
                print(f"FAIL {section} {variant}: exit {r.returncode}\n{r.stdout[-500:]}{r.stderr[-500:]}")
                bad += 1
                continue
            rec = json.loads(out.read_text())[0]
            got, want = rec["metrics"]["hbm_bytes_model"], expected(rec)
            if len(set(rec["problem"]["kv_len"])) < 2:
                print(f"FAIL {section} {variant}: the shape was meant to have mixed lengths: {rec['problem']['kv_len']}")
                bad += 1
            ok = got == want
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {section} {variant} ({rec['build']}): hbm_bytes_model {got}, expected {want}")
sys.exit(1 if bad else 0)
