"""scripts/baselines.py's FLOP convention is the harness's: exact visible pairs with a window,
halved for plain causal, bottom-right aligned (checked against brute force; no GPU needed)."""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import baselines  # noqa: E402


def brute(tq, tkv, causal, window):
    n = 0
    for i in range(tq):
        pos = i + tkv - tq
        for j in range(tkv):
            n += (not causal or j <= pos) and (not window or j > pos - window)
    return n


class Flops(unittest.TestCase):
    def test_visible_pairs_match_brute_force(self):
        for tq, tkv in ((1, 1), (4, 4), (2, 5), (5, 2), (37, 100), (100, 37)):
            for causal, window in ((False, None), (True, None), (True, 1), (True, 3), (True, 50)):
                self.assertEqual(baselines.visible_pairs(tq, tkv, causal, window), brute(tq, tkv, causal, window),
                                 (tq, tkv, causal, window))

    def test_flop_convention(self):
        self.assertEqual(baselines.flops(2, 4, 128, 256, 64, False), 4.0 * 2 * 4 * 128 * 256 * 64)
        self.assertEqual(baselines.flops(2, 4, 128, 256, 64, True), 2.0 * 2 * 4 * 128 * 256 * 64)
        self.assertEqual(baselines.flops(1, 1, 4, 4, 8, True, 2), 4.0 * 8 * 7)


if __name__ == "__main__":
    unittest.main()
