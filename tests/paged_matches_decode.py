#!/usr/bin/env python3
"""paged_matches_decode.py BIN_DIR [--cpu]: section 06 (paged KV cache) must give exactly section
05's outputs on the same logical cache. Runs 05 once per variant with --dump, then 06 on the same
seed (same Q, K, V and kv_len) for several page sizes, each with its own shuffled pool, and
compares O and LSE byte for byte (the kernels differ only in where a K/V row is read from, and
both split the keys the same way). Exit 0 when all match, 1 otherwise, 77 when the programs
cannot run here (no GPU), 2 on a usage error."""
import subprocess
import sys
import tempfile
from pathlib import Path

if len(sys.argv) < 2:
    print(__doc__)
    sys.exit(2)
bin_dir, extra = Path(sys.argv[1]), sys.argv[2:]
SHAPES = [
    ["--b", "8", "--h", "32", "--h-kv", "8", "--d", "128", "--t", "1", "--t-kv", "4097", "--kv-lens", "random"],
    ["--b", "3", "--h", "8", "--h-kv", "2", "--d", "64", "--t", "1", "--t-kv", "1000", "--dtype", "bf16"],
]
PAGES = ["16", "32", "64", "48"]
SEEDS = ["5", "11"]
if "--cpu" in extra:  # the CPU models (same loops, same splits): smaller, so CI stays quick
    SHAPES[0] = ["--b", "4", "--h", "32", "--h-kv", "8", "--d", "128", "--t", "1", "--t-kv", "1000", "--kv-lens", "random"]
    SEEDS = ["5"]
failed = 0
with tempfile.TemporaryDirectory() as tmp:
    for n, shape in enumerate(SHAPES):
        for variant in ("single", "split"):
            for seed in SEEDS:
                common = ["--variant", variant, "--seed", seed, "--iters", "0", "--quiet"] + shape + extra
                ref = Path(tmp) / f"05_{n}_{variant}_{seed}"
                r = subprocess.run([bin_dir / "05_decode", *common, "--dump", ref], capture_output=True, text=True)
                if r.returncode == 77:
                    print("SKIP: " + (r.stdout + r.stderr).strip().splitlines()[-1])
                    sys.exit(77)
                if r.returncode != 0:
                    print(f"FAIL: 05_decode {' '.join(common)} exited {r.returncode}\n{r.stdout}{r.stderr}")
                    failed += 1
                    continue
                for page in PAGES:
                    out = Path(tmp) / f"06_{n}_{variant}_{seed}_{page}"
                    r = subprocess.run([bin_dir / "06_paged", *common, "--page-size", page, "--dump", out],
                                       capture_output=True, text=True)
                    label = f"shape {n} {variant} seed {seed} page {page}"
                    if r.returncode != 0:
                        print(f"FAIL: {label}: 06_paged exited {r.returncode}\n{r.stdout}{r.stderr}")
                        failed += 1
                        continue
                    same = all((ref / f).read_bytes() == (out / f).read_bytes() for f in ("o.npy", "lse.npy"))
                    print(f"{'ok  ' if same else 'FAIL'} {label}: O and LSE {'identical' if same else 'differ'} to 05")
                    failed += not same
print("all identical" if not failed else f"{failed} mismatches")
sys.exit(1 if failed else 0)
