#!/usr/bin/env python3
"""forced_splits.py BIN_DIR [--cpu]: a case of 05's or 06's list named "N splits forced" runs N
splits, as its record states it. A split is whole 64-key tiles, so --splits N gets fewer splits
than asked where the longest sequence has fewer than N tiles, or where N does not divide them
evenly (lab::plan_splits: 40 tiles asked for 37 splits make 20 of 2 tiles); a case named for N
must have a shape that holds N. Exit 0 when every such case runs its N, 1 otherwise, 77 when the
programs cannot run here (no GPU, without --cpu)."""
import json
import re
import sys
import tempfile
from pathlib import Path

from record_metrics import run_metrics

if len(sys.argv) < 2:
    print(__doc__)
    sys.exit(2)
bin_dir, cpu = Path(sys.argv[1]), "--cpu" in sys.argv[2:]
CASES = Path(__file__).resolve().parent / "cases"

bad = seen = 0
with tempfile.TemporaryDirectory() as tmp:
    for section in ("05_decode", "06_paged"):
        for case in json.loads((CASES / f"{section}.json").read_text())["cases"]:
            named = re.search(r"\b(\d+) splits forced", case["name"])
            if not named:
                continue
            seen += 1
            cmd = [bin_dir / section, "--variant", "split", "--iters", "0", "--quiet", *case["args"],
                   *(["--cpu"] if cpu else [])]
            m = run_metrics(cmd, f"{section} '{case['name']}'", Path(tmp) / f"{section}.{seen}.json")
            if m is None:
                bad += 1
                continue
            ok = m.get("splits") == int(named.group(1))
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {section} '{case['name']}': {m.get('splits')} splits of "
                  f"{m.get('keys_per_split')} keys")
if not seen:
    print("FAIL: no case named 'N splits forced' in 05's or 06's list")
    sys.exit(1)
print("every forced count as named" if not bad else f"{bad} cases run another count than their name says")
sys.exit(1 if bad else 0)
