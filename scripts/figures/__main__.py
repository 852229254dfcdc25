"""Draws the handouts' figures into ch12/figures/: python3 scripts/figures [SECTION ...]

Each section that has figures has a module here, fig_NN.py, with one function
make(out_dir: Path) -> list[Path] that draws them from the lab's own code and data (tile
constants read from the section's source, simulated block tables, recorded measurements), so a
figure cannot drift from what the lab does. Needs matplotlib (scripts/requirements.txt).
"""
import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "ch12" / "figures"


def main(argv):
    sys.path.insert(0, str(HERE))
    wanted = {a.zfill(2)[:2] for a in argv}
    import matplotlib
    matplotlib.use("Agg")
    OUT.mkdir(parents=True, exist_ok=True)
    for mod in sorted(p.stem for p in HERE.glob("fig_[0-9][0-9].py")):
        if wanted and mod[4:6] not in wanted:
            continue
        for path in importlib.import_module(mod).make(OUT):
            print(f"figures: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
