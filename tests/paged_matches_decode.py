#!/usr/bin/env python3
"""paged_matches_decode.py BIN_DIR [--cpu]: section 06 (paged KV cache) must give exactly section
05's outputs on the same logical cache. Runs 05 once per variant with --dump, then 06 on the same
seed (same Q, K, V and kv_len) for several page sizes and both pool layouts (--kv-layout nhd,
hnd), each with its own shuffled pool, and
compares O and LSE byte for byte (the kernels differ only in where a K/V row is read from, and
both split the keys the same way). The solutions' programs where BIN_DIR has them, else the
student's (lab_05_decode, lab_06_paged). Exit 0 when all match, 1 otherwise, 77 when the programs
cannot run here (no GPU), 2 on a usage error."""
import sys
import tempfile
from pathlib import Path

from same_outputs import SameOutputs

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
bin_dir, extra = Path(sys.argv[1]), sys.argv[2:]
prefix = next((p for p in ("", "lab_") if (bin_dir / f"{p}05_decode").is_file() and (bin_dir / f"{p}06_paged").is_file()),
              None)
if prefix is None:
    print(f"bad input: {bin_dir} holds neither 05_decode and 06_paged nor lab_05_decode and lab_06_paged "
          f"(scripts/lab run 06 builds yours into build/bin)")
    sys.exit(2)
SHAPES = [
    ["--b", "8", "--h", "32", "--h-kv", "8", "--d", "128", "--t", "1", "--t-kv", "4097", "--kv-lens", "random"],
    ["--b", "3", "--h", "8", "--h-kv", "2", "--d", "64", "--t", "1", "--t-kv", "1000", "--dtype", "bf16"],
]
PAGES = ["16", "32", "64", "48"]
LAYOUTS = ["nhd", "hnd"]
SEEDS = ["5", "11"]
if "--cpu" in extra:  # the CPU models (same loops, same splits): smaller, so CI stays quick
    SHAPES[0] = ["--b", "4", "--h", "32", "--h-kv", "8", "--d", "128", "--t", "1", "--t-kv", "1000", "--kv-lens", "random"]
    SEEDS = ["5"]
check = SameOutputs()
with tempfile.TemporaryDirectory() as tmp:
    for n, shape in enumerate(SHAPES):
        for variant in ("single", "split"):
            for seed in SEEDS:
                common = ["--variant", variant, "--seed", seed, "--iters", "0", "--quiet"] + shape + extra
                ref = Path(tmp) / f"05_{n}_{variant}_{seed}"
                if not check.reference([bin_dir / f"{prefix}05_decode", *common], ref):
                    continue
                for page in PAGES:
                    for layout in LAYOUTS:
                        check.candidate(f"shape {n} {variant} seed {seed} page {page} {layout}",
                                        [bin_dir / f"{prefix}06_paged", *common, "--page-size", page, "--kv-layout", layout],
                                        Path(tmp) / f"06_{n}_{variant}_{seed}_{page}_{layout}", ref, "05")
check.finish()
