"""Every handout figure still draws from the lab's code: scripts/figures reads tile constants and
quoted lines out of the sections' sources, and stops (SystemExit) when a source no longer has them.
Draws each figure into a temporary folder, not into ch12/figures. Needs matplotlib (skipped
without it)."""
import importlib
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "scripts" / "figures"
sys.path.insert(0, str(FIGURES))

try:
    import matplotlib

    matplotlib.use("Agg")
except ImportError:  # pragma: no cover - the lab's test command installs it
    matplotlib = None


@unittest.skipIf(matplotlib is None, "matplotlib is not installed")
class Figures(unittest.TestCase):
    def test_every_figure_draws(self):
        modules = sorted(p.stem for p in FIGURES.glob("fig_[0-9][0-9].py"))
        self.assertTrue(modules)
        with tempfile.TemporaryDirectory() as out:
            for name in modules:
                with self.subTest(figure=name):
                    try:
                        paths = importlib.import_module(name).make(Path(out))
                    except SystemExit as e:
                        self.fail(f"{name}: {e}")
                    self.assertTrue(paths and all(Path(p).is_file() for p in paths), name)


if __name__ == "__main__":
    unittest.main()
