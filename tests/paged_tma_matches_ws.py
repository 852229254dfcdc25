#!/usr/bin/env python3
"""paged_tma_matches_ws.py BIN_DIR [--cpu]: section 08's paged variants must give exactly `ws`'s
outputs on the same logical cache: `paged` (K/V read from a shuffled, NaN-filled page pool through
tensor maps edited on the device) and `paged-pool` (the same pool through one map over all of it).
The same tiles land in shared memory (rows past T_kv zero in all three), and the consumers run the
same code on them. So must `ws-overlap` (the same operations on O, reordered in time only), with a
sliding window too (its masked tiles decided by the rules: a window it lost would show here), and
both with --consumers 1 (a warpgroup computes its 64 rows alike in a block of one or two), and
`ws-pingpong` (the overlapped loop in turns: the same operations again), with its 192-row block at
D = 64 and --consumers 2 there, beside ws and ws-overlap with --consumers 3. Runs ws
once per shape with --dump, then the others on the same seed for several page sizes and shuffles,
and compares O and LSE byte for byte. Exit 0 when all match, 1 otherwise,
77 when the programs cannot run here (no Hopper GPU), 2 on a usage error."""
import sys
import tempfile
from pathlib import Path

from same_outputs import SameOutputs

if len(sys.argv) < 2:
    print(__doc__)
    sys.exit(2)
bin_dir, extra = Path(sys.argv[1]), sys.argv[2:]
SHAPES = [
    ["--b", "2", "--h", "4", "--h-kv", "2", "--d", "128", "--t", "1000", "--t-kv", "1500", "--causal"],
    ["--b", "1", "--h", "2", "--d", "64", "--t", "700", "--t-kv", "950", "--dtype", "fp16"],
    ["--b", "1", "--h", "2", "--d", "128", "--t", "700", "--t-kv", "900", "--causal", "--window", "200"],  # no paged
]
PAGES = ["64", "128", "16", "48", "192", "256"]
SEEDS = ["5", "11"]
if "--cpu" in extra:  # the CPU models: smaller, so CI stays quick
    SHAPES = [["--b", "2", "--h", "2", "--h-kv", "1", "--d", "64", "--t", "150", "--t-kv", "333", "--causal"],
              ["--b", "1", "--h", "2", "--d", "64", "--t", "300", "--causal", "--window", "65"]]
    SEEDS = ["5"]
check = SameOutputs()
with tempfile.TemporaryDirectory() as tmp:
    for n, shape in enumerate(SHAPES):
        for seed in SEEDS:
            common = ["--seed", seed, "--iters", "0", "--quiet"] + shape + extra
            ref = Path(tmp) / f"ws_{n}_{seed}"
            if not check.reference([bin_dir / "08_tma_skeleton", "--variant", "ws", *common], ref):
                continue
            windowed = "--window" in shape
            paged = [] if windowed else [(v, ["--page-size", page]) for page in PAGES for v in ("paged", "paged-pool")]
            one = [("ws", ["--consumers", "1"]), ("ws-overlap", ["--consumers", "1"])]
            three = [("ws-pingpong", ["--consumers", "2"]), ("ws", ["--consumers", "3"]),
                     ("ws-overlap", ["--consumers", "3"])] if shape[shape.index("--d") + 1] == "64" else []
            for variant, more in [("ws-overlap", []), ("ws-pingpong", [])] + one + three + paged:
                check.candidate(f"shape {n} seed {seed} {variant} {' '.join(more)}".rstrip(),
                                [bin_dir / "08_tma_skeleton", "--variant", variant, *common, *more],
                                Path(tmp) / f"{variant}_{n}_{seed}_{'_'.join(more)}", ref, "ws")
check.finish()
