"""scripts/tables.py renders what the records say: the right rows and numbers, malformed records
named by field and skipped, the README's table replaced between its markers and nowhere else."""
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import tables  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "results_sample"


class Tables(unittest.TestCase):
    def test_rows_and_numbers_come_from_the_records(self):
        text, problems, by_section = tables.render(SAMPLE)
        self.assertEqual(list(by_section), ["01_naive"])
        self.assertEqual(len(by_section["01_naive"]), 2)
        self.assertIn("| kernels | solution | B=1 H=16 T=4096 D=64 fp32 | 10.25 | 6.7 | 425 | 2.15 GB | pass |", text)
        self.assertIn("| cublas | solution | B=1 H=16 T=4096 D=64 fp32 causal | 2.77 | 24.8 |", text)
        self.assertIn("# Measured results: NVIDIA H200", text)

    def test_malformed_records_and_files_are_named_and_skipped(self):
        _, problems, _ = tables.render(SAMPLE)
        self.assertIn("01_naive.json: record 2: field 'timing.median_ms' missing; skipped", problems)
        self.assertTrue(any(p.startswith("02_broken.json: not valid JSON") for p in problems))

    def test_readme_table_is_replaced_between_markers_only(self):
        _, _, by_section = tables.render(SAMPLE)
        with tempfile.TemporaryDirectory() as tmp:
            readme = Path(tmp, "README.md")
            readme.write_text(f"intro\n{tables.README_BEGIN}\nold table\n{tables.README_END}\noutro\n")
            tables.update_readme(readme, by_section, "h200")
            text = readme.read_text()
            self.assertTrue(text.startswith("intro\n"))
            self.assertTrue(text.endswith("\noutro\n"))
            self.assertNotIn("old table", text)
            self.assertIn("| kernels | solution |", text)
            readme.write_text("no markers")
            with self.assertRaises(SystemExit):
                tables.update_readme(readme, by_section, "h200")


if __name__ == "__main__":
    unittest.main()
