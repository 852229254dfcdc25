"""The grader (scripts/grade.py) and case-file validation (scripts/cases.py), without a GPU:
reports rendered from recorded results, submissions scanned, codes classified, case files
rejected with a message naming the problem, and (GradeTriage) a real triage run over a
submission that does not compile, an empty one and one holding only unknown files."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import cases  # noqa: E402
import grade  # noqa: E402


def recorded_report():
    case = lambda name, status, w=1: {"case": name, "variant": "kernels", "weight": w, "status": status, "exit": 0 if status == "pass" else 1,
                                      "seconds": 0.5, "log_excerpt": f"log of {name}"}
    return {"submission": "alice", "path": "/x/alice", "time_utc": "2026-11-30T10:00:00Z", "git_sha": "abc1234",
            "gpu": "NVIDIA H200", "ignored_files": ["notes.txt"], "graded_sections": ["01_naive", "02_v1_tile"],
            "bonus_tiers": grade.BONUS_TIERS, "total": 0.0,
            "sections": {"01_naive": {"status": "graded", "correctness": 75.0, "weight_total": 4, "weight_passed": 3,
                                      "unmodified_stub": False,
                                      "cases": [case("T=1", "pass"), case("T=64", "pass"), case("T=65", "pass"),
                                                case("large scores", "wrong answer")]},
                         "02_v1_tile": {"status": "compile error", "correctness": 0.0, "cases": [], "weight_total": 0,
                                        "weight_passed": 0, "log_excerpt": "02_v1_tile.cu(12): error: expected a \";\""}}}


class Reports(unittest.TestCase):
    def test_markdown_from_recorded_results(self):
        md = grade.render_markdown(recorded_report())
        self.assertIn("| 01_naive | graded | 75% | – | 0 | 75.0 |", md)
        self.assertIn("| 02_v1_tile | compile error | 0% | – | 0 | 0.0 |", md)
        self.assertIn("3 of 4 cases passed (3 of 4 weight).", md)
        self.assertIn("| large scores | kernels | wrong answer | 0.5 |", md)
        self.assertIn("log of large scores", md)          # the first failure's log excerpt
        self.assertIn('error: expected a ";"', md)       # the compiler's message
        self.assertIn("`notes.txt`", md)

    def test_scores_bonus_and_summary(self):
        r = recorded_report()
        self.assertEqual(grade.section_score(r["sections"]["01_naive"]), 75.0)
        self.assertEqual([grade.bonus_for(x) for x in (None, 0.2, 0.5, 0.89, 0.9, 1.7)], [0, 0, 5, 5, 10, 10])
        full = {"status": "graded", "correctness": 100.0, "bonus": 10}
        self.assertEqual(grade.section_score(full), 110.0)
        with tempfile.TemporaryDirectory() as tmp:
            r["total"] = 37.5
            triage = dict(r, submission="bob", total=None)
            grade.write_class_summary([r, triage], Path(tmp, "c.csv"))
            lines = Path(tmp, "c.csv").read_text().splitlines()
            self.assertEqual(lines, ["submission,total,01_naive,02_v1_tile", "alice,37.5,75.0,0.0", "bob,triage,75.0,0.0"])

    def test_run_outcomes_are_classified(self):
        self.assertEqual(grade.classify(0, "", True), "pass")
        self.assertEqual(grade.classify(0, "", False), "exited early (no passing result record)")
        self.assertEqual(grade.classify(1, "output not written: all ...", False), "output not written")
        self.assertEqual(grade.classify(1, "O too far from fp64", False), "wrong answer")
        self.assertEqual(grade.classify(124, "TIMEOUT", False), "timeout")
        self.assertEqual(grade.classify(-11, "", False), "crashed (signal 11)")
        self.assertEqual(grade.classify(3, "CUDA error", False), "CUDA error")

    def test_scan_finds_labs_and_names_the_rest(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = Path(tmp)
            (sub / "labs").mkdir()
            (sub / "labs" / "01_naive.cu").write_text("x")
            (sub / "labs" / "99_other.cu").write_text("x")
            (sub / "report.pdf").write_text("x")
            found, ignored = grade.scan_submission(sub, ["01_naive", "02_v1_tile"])
            self.assertEqual(list(found), ["01_naive"])
            self.assertEqual(sorted(ignored), ["labs/99_other.cu", "report.pdf"])


class CaseFiles(unittest.TestCase):
    GOOD = {"section": "01_naive", "variants": ["kernels"], "cases": [{"name": "a", "args": ["--t", "1"]}]}

    def bad(self, data, message):
        with self.assertRaises(cases.CaseFileError) as e:
            cases.validate(data, "f.json")
        self.assertIn(message, str(e.exception))

    def test_good_file_passes(self):
        self.assertIs(cases.validate(self.GOOD), self.GOOD)

    def test_bad_files_name_the_problem(self):
        g = self.GOOD
        self.bad({"variants": ["x"], "cases": []}, "f.json: missing 'section'")
        self.bad(dict(g, extra=1), "unknown key 'extra'")
        self.bad(dict(g, section="naive"), "'section' must be a section name")
        self.bad(dict(g, cases=[{"name": "a", "args": ["--t", 1]}]), "cases[0] 'a': 'args' must be a list of strings")
        self.bad(dict(g, cases=[{"args": []}]), "cases[0]: missing 'name'")
        self.bad(dict(g, cases=[{"name": "a", "weight": 0}]), "'weight' must be a positive number")
        self.bad(dict(g, cases=[{"name": "a"}, {"name": "a"}]), "cases[1] 'a': duplicate name")
        self.bad(dict(g, cases=[{"name": "a", "wieght": 2}]), "unknown key 'wieght'")
        self.bad(dict(g, bugs=[{"name": "b", "args": []}]), "bugs[0] 'b': missing 'bug'")
        self.bad(dict(g, timeout_s=-1), "'timeout_s' must be a positive number")

    def test_hidden_cases_are_added_and_marked(self):
        hidden = {"section": "01_naive", "cases": [{"name": "secret", "args": ["--t", "999"], "weight": 3}]}
        merged = cases.merge_hidden(self.GOOD, hidden)
        self.assertEqual([c["name"] for c in merged["cases"]], ["a", "hidden: secret"])
        self.assertEqual(cases.merge_hidden(self.GOOD, dict(hidden, section="02_v1_tile")), self.GOOD)

    def test_committed_case_files_are_valid(self):
        for path in sorted((ROOT / "tests" / "cases").glob("*.json")):
            cases.load(path)


class GradeTriage(unittest.TestCase):
    """A real `scripts/lab grade --no-gpu` run (builds the broken file against the harness)."""

    def test_triage(self):
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp, "subs"), Path(tmp, "grades")
            (subs / "broken").mkdir(parents=True)
            (subs / "broken" / "01_naive.cu").write_text('#include "lab.cuh"\nint main(int argc, char** argv) { return lab::missing(argc); }\n')
            (subs / "empty").mkdir()
            (subs / "unknown").mkdir()
            (subs / "unknown" / "notes.txt").write_text("hi")
            (subs / "unknown" / "01_naive.py").write_text("print(1)")
            r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "grade", str(subs / "broken"), str(subs / "empty"),
                                str(subs / "unknown"), "--no-gpu", "--out", str(out)], capture_output=True, text=True, timeout=1200)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            broken = json.loads((out / "broken" / "grade.json").read_text())
            sec = broken["sections"]["01_naive"]
            self.assertEqual(sec["status"], "compile error")
            self.assertIn("error", sec["log_excerpt"])
            self.assertIn("missing", sec["log_excerpt"])  # the compiler's own words
            self.assertEqual(grade.section_score(sec), 0)
            self.assertIn("Does not compile: 0 points", (out / "broken" / "grade.md").read_text())
            empty = json.loads((out / "empty" / "grade.json").read_text())
            self.assertEqual((empty["graded_sections"], empty["total"]), ([], 0.0))
            self.assertIn("no lab file found", (out / "empty" / "grade.md").read_text())
            unknown = json.loads((out / "unknown" / "grade.json").read_text())
            self.assertEqual(sorted(unknown["ignored_files"]), ["01_naive.py", "notes.txt"])
            self.assertTrue((out / "class_summary.csv").exists())


if __name__ == "__main__":
    unittest.main()
