"""Pitfall 10 of section 10 on the CPU, compiled with Inductor as on a GPU: a score_mod capturing a
Python float compiles once per value, one capturing a tensor compiles once, counted by
torch._dynamo's own counters (the record's metrics.pitfall_10). Dynamo's recompile limit is lowered
below the number of values first, so the run also shows that the section raises it for the demo
(else the last values would run unfused and the counts would be short).

  python3 tests/test_flex_pitfall.py
Exit 77 (skipped) where PyTorch is not installed.

The unittest classes below (python3 -m unittest test_flex_pitfall, from tests/) run the section
eagerly with an exercise written wrong: its mask_mod or score_mod, asked directly against the
reference's, is named by the first (q_idx, kv_idx) where it differs; the solution passes; the stub
keeps its own words for each variant.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOL = ROOT / "solutions" / "10_flex.py"
VALUES = 3
LIMIT = 2  # < VALUES

RUNNER = f"""
import runpy, sys
import torch._dynamo
torch._dynamo.config.recompile_limit = {LIMIT}
sys.argv = [{str(SOL)!r}] + sys.argv[1:]
runpy.run_path({str(SOL)!r}, run_name="__main__")
"""


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("cannot run here: PyTorch is not installed")
        return 77
    with tempfile.TemporaryDirectory() as d:
        rec_file = Path(d) / "r.json"
        args = ["--cpu", "--variant", "softcap", "--t", "32", "--h", "1", "--values", str(VALUES),
                "--json", str(rec_file)]
        r = subprocess.run([sys.executable, "-c", RUNNER] + args, capture_output=True, text=True, timeout=900)
        out = r.stdout + r.stderr
        print(out.strip())
        problems = []
        if r.returncode != 0:
            problems.append(f"exit {r.returncode}, want 0")
        if "Traceback" in out:
            problems.append("a traceback was printed")
        m = {}
        if rec_file.exists():
            m = json.loads(rec_file.read_text())[-1]["metrics"].get("pitfall_10", {})
        else:
            problems.append("no record written")
        for how, want in (("float", VALUES), ("tensor", 1)):
            got = m.get(how, {})
            if got.get("compiles") != want:
                problems.append(f"captured {how}: {got.get('compiles')} compile(s), want {want}")
            if got.get("not_compiled") != 0:
                problems.append(f"captured {how}: {got.get('not_compiled')} call(s) not compiled, want 0")
            line = f"captured {how:<6}: {want} compile(s)"
            if line not in out:
                problems.append(f"missing line '{line}'")
        if m.get("backend") != "inductor":
            problems.append(f"backend {m.get('backend')!r}, want 'inductor'")
    for p in problems:
        print(f"FAIL: {p}")
    print("pitfall 10 counts: " + ("FAIL" if problems else "ok"))
    return 1 if problems else 0


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def run_planted(right, wrong, args):
    """solutions/10_flex.py with `right` replaced by `wrong` (as it is without them), run on the CPU:
    (exit code, stdout and stderr)."""
    source = SOL.read_text()
    assert right in source, right
    with tempfile.TemporaryDirectory() as tmp:
        planted = Path(tmp, "10_flex.py")
        planted.write_text(source.replace(right, wrong))
        r = subprocess.run([sys.executable, str(planted), "--cpu", "--iters", "0", *args], capture_output=True,
                           text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT / "common" / "python")))
    return r.returncode, r.stdout + r.stderr


def check_line(out):
    return next((line for line in out.splitlines() if line.startswith("  check    ")), "")


@unittest.skipUnless(have_torch(), "torch is not installed")
class ExerciseProbes(unittest.TestCase):
    WINDOW = "(kv_idx <= pos) & (kv_idx > pos - w)"
    DOCUMENT_CAUSAL = "keep & (kv_idx <= pos) if p.causal"
    ALIBI = "score + slopes[h] * (kv_idx - (q_idx + shift))"
    SOFTCAP = "return cap * torch.tanh(score / cap)"

    def assertNamed(self, right, wrong, args, want):
        code, out = run_planted(right, wrong, args)
        self.assertEqual(code, 1, out)
        self.assertTrue(check_line(out).startswith("  check    " + want), out)
        return out

    def test_a_window_one_key_too_wide_names_the_pair_and_the_rows_keys(self):
        self.assertNamed(self.WINDOW, "(kv_idx <= pos) & (kv_idx >= pos - w)",
                         ["--variant", "window", "--causal", "--window", "16", "--t", "90", "--h", "2"],
                         "EXERCISE window: mask_mod(b=0, h=0, q_idx=16, kv_idx=0) = True, want False: row 16 sees "
                         "keys 1..16 (W = 16), your mask lets it see 17 (keys 0..16)")
        self.assertNamed(self.WINDOW, "(kv_idx < pos) & (kv_idx > pos - w)",  # one too few: the diagonal
                         ["--variant", "window", "--causal", "--window", "4", "--t", "20", "--h", "1"],
                         "EXERCISE window: mask_mod(b=0, h=0, q_idx=0, kv_idx=0) = False, want True: row 0 sees "
                         "key 0 (W = 4), your mask lets it see none")

    def test_a_window_without_the_shift_names_the_position(self):
        self.assertNamed(self.WINDOW, "(kv_idx <= q_idx) & (kv_idx > q_idx - w)",
                         ["--variant", "window", "--causal", "--window", "20", "--t", "30", "--t-kv", "90", "--h", "2"],
                         "EXERCISE window: mask_mod(b=0, h=0, q_idx=0, kv_idx=0) = True, want False: row 0 sees "
                         "keys 41..60 (key position 60, W = 20), your mask lets it see 1 (key 0)")

    def test_a_document_mask_off_by_one_names_its_document(self):
        out = self.assertNamed(self.DOCUMENT_CAUSAL, "keep & (kv_idx < pos) if p.causal",
                               ["--variant", "document", "--causal", "--docs", "4", "--t", "80", "--h", "2"],
                               "EXERCISE document: mask_mod(b=0, h=0, q_idx=0, kv_idx=0) = False, want True: row 0 "
                               "sees key 0 (document 0: keys 0..")
        self.assertIn(", and causal), your mask lets it see none", check_line(out))

    def test_an_alibi_without_the_shift_names_the_position_and_the_lse_offset(self):
        """pos written as q_idx: every score of a row moves by slope·(T_kv - T_q); O is right, the LSE
        off by that constant on every row of each head, which the check's details then say."""
        out = self.assertNamed(self.ALIBI, "score + slopes[h] * (kv_idx - q_idx)",
                               ["--variant", "alibi", "--causal", "--t", "30", "--t-kv", "90", "--h", "2"],
                               "EXERCISE alibi: score_mod(score=0, b=0, h=0, q_idx=0, kv_idx=0) = 0, want -3.75 = "
                               "slopes[0]·(kv_idx - pos) = 0.0625·(0 - 60), pos = q_idx + T_kv - T_q = 0 + 60")
        self.assertIn("O within its bound, and the LSE is off by one constant per head, the same on every row of it "
                      "(h=0: +3.75, h=1: +0.234)", out)

    def test_a_softcap_formula_wrong_names_the_score(self):
        self.assertNamed(self.SOFTCAP, "return cap * torch.tanh(score)",
                         ["--variant", "softcap", "--t", "32", "--h", "1"],
                         "EXERCISE softcap: score_mod(score=1.25, b=0, h=0, q_idx=0, kv_idx=0) = 16.9657, want "
                         "1.24837 = cap·tanh(score / cap) with cap = 20")

    def test_the_solution_passes_the_probes(self):
        for args in (["--variant", "window", "--causal", "--window", "20", "--t", "30", "--t-kv", "90"],
                     ["--variant", "document", "--docs", "4", "--t", "100", "--t-kv", "80"],
                     ["--variant", "document", "--causal", "--docs", "4", "--t", "70", "--t-kv", "100"],
                     ["--variant", "alibi", "--causal", "--t", "70", "--t-kv", "100", "--h", "4", "--h-kv", "2"],
                     ["--variant", "softcap", "--softcap", "5", "--t", "40"]):
            code, out = run_planted("", "", args if "--h" in args else [*args, "--h", "2"])
            self.assertEqual(code, 0, out)

    def test_the_stub_keeps_its_own_words(self):
        for variant, extra, maker in (("alibi", [], "make_score_mod"), ("softcap", [], "make_score_mod"),
                                      ("window", ["--causal", "--window", "4"], "make_mask_mod"),
                                      ("document", [], "make_mask_mod")):
            r = subprocess.run([sys.executable, str(ROOT / "labs" / "10_flex.py"), "--cpu", "--variant", variant,
                                "--t", "16", "--h", "1", *extra], capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertTrue(check_line(r.stdout).startswith(
                f"  check    EXERCISE {variant} is not written yet: {maker}() returns None for it"), r.stdout)


if __name__ == "__main__":
    sys.exit(main())
