"""The grader (scripts/grade.py) and case-file validation (scripts/cases.py), without a GPU:
reports rendered from recorded results, submissions scanned, codes classified, case files
rejected with a message naming the problem, and (GradeTriage) real `scripts/lab grade --no-gpu`
runs: paths that are no submission refused (exit 2, nothing written), and a triage over a file
that does not compile, an untouched stub ("not run (no GPU)", never a number) and a misnamed file."""
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
import make_labs  # noqa: E402


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
            self.assertEqual(lines, ["submission,total,01_naive,02_v1_tile", "alice,37.5,75.0,0.0",
                                     "bob,not run (no GPU),75.0,0.0"])
            self.assertNotIn(b"\r", Path(tmp, "c.csv").read_bytes())  # \n line endings, not CSV's default CRLF

    def test_triage_sections_show_no_number(self):
        r = recorded_report()
        r["sections"]["01_naive"] = {"status": "not run (no GPU)", "correctness": None, "cases": [],
                                     "weight_total": 0, "weight_passed": 0, "unmodified_stub": True}
        r["total"] = None
        md = grade.render_markdown(r)
        self.assertIn("| 01_naive | not run (no GPU) (unmodified stub) | not run (no GPU) | – | – | not run (no GPU) |", md)
        self.assertIn("**Total: not run (no GPU)**", md)
        self.assertIsNone(grade.section_score(r["sections"]["01_naive"]))

    def test_misnamed_files_are_named(self):
        self.assertEqual(grade.misnamed(["naive.cu", "notes.txt", "labs/tile.cu"], ["01_naive", "02_v1_tile"]),
                         ["naive.cu: not a lab file; expected labs/01_naive.cu",
                          "labs/tile.cu: not a lab file; expected labs/02_v1_tile.cu"])

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

    def lab(self, *args):
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "grade", *map(str, args)],
                              capture_output=True, text=True, timeout=1200)

    def test_paths_that_are_no_submission_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp, "subs"), Path(tmp, "grades")
            (subs / "empty").mkdir(parents=True)
            (subs / "misnamed").mkdir()
            (subs / "misnamed" / "naive.cu").write_text("int main() {}\n")
            r = self.lab(Path(tmp, "does-not-exist"), subs / "empty", subs / "misnamed", "--no-gpu", "--out", out)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("does-not-exist: no such folder", r.stdout)
            self.assertIn("empty: no lab file", r.stdout)
            self.assertIn("naive.cu: not a lab file; expected labs/01_naive.cu", r.stdout)
            self.assertNotIn("Traceback", r.stdout + r.stderr)
            self.assertFalse(out.exists())  # no grade written

    def test_triage(self):
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp, "subs"), Path(tmp, "grades")
            (subs / "broken").mkdir(parents=True)
            (subs / "broken" / "01_naive.cu").write_text('#include "lab.cuh"\nint main(int argc, char** argv) { return lab::missing(argc); }\n')
            (subs / "stub").mkdir()
            solution = ROOT / "solutions" / "01_naive.cu"  # the stub as generated (labs/ may hold a student's work)
            (subs / "stub" / "01_naive.cu").write_text(make_labs.make_stub(solution.read_text(), solution.name))
            (subs / "unknown").mkdir()
            (subs / "unknown" / "notes.txt").write_text("hi")
            (subs / "unknown" / "naive.cu").write_text("x")
            r = self.lab(subs / "broken", subs / "stub", subs / "unknown", "--no-gpu", "--allow-empty", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            broken = json.loads((out / "broken" / "grade.json").read_text())
            sec = broken["sections"]["01_naive"]
            self.assertEqual(sec["status"], "compile error")
            self.assertIn("error", sec["log_excerpt"])
            self.assertIn("missing", sec["log_excerpt"])  # the compiler's own words
            self.assertEqual(grade.section_score(sec), 0)
            self.assertIn("Does not compile: 0 points", (out / "broken" / "grade.md").read_text())
            stub = json.loads((out / "stub" / "grade.json").read_text())
            self.assertEqual(stub["sections"]["01_naive"]["status"], "not run (no GPU)")
            self.assertIsNone(stub["sections"]["01_naive"]["correctness"])  # never a number
            self.assertIsNone(stub["total"])
            self.assertTrue(stub["sections"]["01_naive"]["unmodified_stub"])
            md = (out / "stub" / "grade.md").read_text()
            self.assertIn("not run (no GPU)", md)
            self.assertNotIn("0%", md)
            unknown = json.loads((out / "unknown" / "grade.json").read_text())
            self.assertEqual(sorted(unknown["ignored_files"]), ["naive.cu", "notes.txt"])
            self.assertEqual(unknown["misnamed"], ["naive.cu: not a lab file; expected labs/01_naive.cu"])
            csv_text = (out / "class_summary.csv").read_bytes()
            self.assertNotIn(b"\r", csv_text)
            self.assertIn(b"stub,not run (no GPU),not run (no GPU)", csv_text)


class PerfRun(unittest.TestCase):
    """The timing run behind the speed bonus: a command the program accepts, and the graded
    variant's time read back even when the run records another kernel after it."""

    def test_no_option_is_given_twice(self):
        for path in sorted((ROOT / "tests" / "cases").glob("*.json")):
            shape = grade.perf_shape(json.loads(path.read_text()))
            if not shape:
                continue
            variant, args = shape
            cmd = [str(a) for a in grade.perf_command(["prog"], variant, args, "perf.json")]
            options = [a for a in cmd if a.startswith("--")]
            self.assertEqual(len(options), len(set(options)), f"{path.name}: {cmd}")
            self.assertEqual(cmd[cmd.index("--variant") + 1], variant, path.name)

    def test_the_graded_variant_is_timed(self):
        def run_limited(cmd, timeout):  # a program that records its kernel, then another (10's --against-07)
            rec = Path(cmd[cmd.index("--json") + 1])
            rec.write_text(json.dumps([{"variant": "window", "timing": {"median_ms": 0.3}},
                                       {"variant": "07-window", "timing": {"median_ms": 0.2}}]))
            return 0, "", 0.1
        g = grade.Grader(ROOT, ROOT / "build", run_limited, None, None, None, None, print)
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(g.median_ms(["prog"], "window", ["--t", "64"], 10, Path(tmp)), 0.3)
            self.assertIsNone(g.median_ms(["prog"], "softcap", ["--t", "64"], 10, Path(tmp)))  # no record of it


if __name__ == "__main__":
    unittest.main()
