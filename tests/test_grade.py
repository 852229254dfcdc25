"""The grader (scripts/grade.py) and case-file validation (scripts/cases.py), without a GPU:
reports rendered from recorded results, submissions scanned, codes classified, case files
rejected with a message naming the problem, grade folders planned (never a submission, never two
submissions in one), submissions graded with a stand-in build and stand-in runs, and
(GradeTriage) real `scripts/lab grade --no-gpu` runs: paths that are no submission, and --out
folders that would replace one, refused (exit 2, nothing written); a triage over a file that does
not compile, an untouched stub ("not run (no GPU)", never a number), a misnamed file and two
submissions of the same name; and a regrade of one submission that keeps the class summary;
(GradeOnTheCpuModel) real `scripts/lab grade --cpu` runs of section 01: a provisional grade on the
CPU model (a correct lab, the stub, an exercise that never ends, --resume after a triage)."""
import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import cases  # noqa: E402
import grade  # noqa: E402
import make_labs  # noqa: E402
from labcli import student  # noqa: E402

needs_solutions = unittest.skipUnless((ROOT / "solutions").is_dir(), "a student release: no solutions/")
SECTIONS = ["01_naive", "02_v1_tile", "03_v2_loop_order", "09_triton", "12_ring"]


def rows(path):
    return list(csv.DictReader(io.StringIO(Path(path).read_text(encoding="utf-8-sig"))))


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


def submission(folder, *files):
    folder = Path(folder)
    (folder / "labs").mkdir(parents=True, exist_ok=True)
    for f in files or ("01_naive.cu",):
        (folder / "labs" / f).write_text("// mine\n")
    return folder


class StandInGrader(grade.Grader):
    """Grader with a stand-in build (a file holding "broken" does not compile): the verdicts'
    bookkeeping checked without a compiler."""

    def build_submission(self, labs_dir, build_dir, sections, unit_tests=None):
        out = {}
        for s in sections:
            broken = "broken" in (labs_dir / f"{s}.cu").read_text()
            out[s] = (not broken, f"{labs_dir}/{s}.cu(3): error: expected a ';'" if broken else "")
            if s in (unit_tests or {}):  # its exercises' unit-test program: built as the lab is
                out[unit_tests[s]] = out[s]
        return out


def stand_in_grade(folder, out, on_gpu, only=None):
    """One submission graded by StandInGrader, its every case failing (without a GPU: none run)."""
    def run_limited(cmd, timeout):
        return 1, "O too far from fp64", 0.1
    data = {"section": "01_naive", "variants": ["kernels"], "cases": [
        {"name": "T=65", "args": ["--t", "65"]}, {"name": "hidden: secret", "args": ["--t", "999"]}]}
    g = StandInGrader(ROOT, ROOT / "build", run_limited, make_labs.make_stub, lambda s, hidden: data,
                      student.expand_cases, dict, print, program=lambda s, sol, build_dir=None, labs_dir=None: ["prog"])
    return g.grade(folder, out, SECTIONS, only, None, 10, on_gpu, "GPU" if on_gpu else None, "abc", lambda msg: None)


def grade_alice(data, run_limited, **grader_options):
    """alice's stand-in submission graded on a GPU by StandInGrader with the case list `data` and
    the stand-in runs `run_limited`: (the report, her grade.md)."""
    g = StandInGrader(ROOT, ROOT / "build", run_limited, make_labs.make_stub, lambda s, hidden: data,
                      student.expand_cases, dict, print, program=lambda s, sol, build_dir=None, labs_dir=None: ["lab"],
                      **grader_options)
    with tempfile.TemporaryDirectory() as tmp:
        r = g.grade(submission(Path(tmp, "alice")), Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, True,
                    "GPU", "abc", lambda msg: None)
        return r, Path(tmp, "grades", "alice", "grade.md").read_text()


class CasesThisGpuCannotRun(unittest.TestCase):
    def test_only_a_case_the_solution_cannot_run_either_is_left_out(self):
        """On an A100, 11's wgmma cases are "cannot run here" for every program: out of the total, for
        all alike. A case only the student's program refuses is a failed case (no way out by exit 77)."""
        def run_limited(cmd, timeout):
            t, solution = cmd[cmd.index("--t") + 1], cmd[0] == "sol"
            if t == "65" or (t == "66" and not solution):
                return 77, "cannot run here: this kernel needs 170 KB of shared memory per block", 0.1
            return 0, "PASS", 0.1
        data = {"section": "01_naive", "variants": ["kernels"],
                "cases": [{"name": "Hopper only", "args": ["--t", "65"]}, {"name": "refused by the lab", "args": ["--t", "66"]}]}
        g = StandInGrader(ROOT, ROOT / "build", run_limited, make_labs.make_stub, lambda s, hidden: data,
                          student.expand_cases, dict, print,
                          program=lambda s, sol, build_dir=None, labs_dir=None: ["sol" if sol else "lab"])
        with tempfile.TemporaryDirectory() as tmp:
            r = g.grade(submission(Path(tmp, "alice")), Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, True,
                        "NVIDIA A100", "abc", lambda msg: None)
        sec = r["sections"]["01_naive"]
        self.assertEqual([c["status"] for c in sec["cases"]], [grade.NOT_ON_THIS_GPU, "cannot run here"])
        self.assertEqual((sec["weight_total"], sec["weight_passed"], sec["correctness"]), (1, 0, 0.0))
        self.assertIn("0 of 1 cases passed (0 of 1 weight). 1 more could not run on this GPU", grade.render_markdown(r))


class HangingSection(unittest.TestCase):
    def test_a_section_that_hangs_case_after_case_stops_running(self):
        """Runs of HUNG_CASES cases in a row that time out stop the section's runs: the rest fail
        unrun, instead of each waiting out --timeout (22 runs x 120 s for a loop that never ends).
        A case whose variants all time out is one case; a run that ends resets the count."""
        ran = []

        def run_limited(cmd, timeout):
            t = cmd[cmd.index("--t") + 1]
            ran.append((t, cmd[cmd.index("--variant") + 1]))
            return (124, f"TIMEOUT: stopped after {timeout} s", timeout) if t != "2" else (1, "O too far from fp64", 0.1)
        data = {"section": "01_naive", "variants": ["kernels", "cublas"],
                "cases": [{"name": f"T={t}", "args": ["--t", str(t)]} for t in range(1, 8)]}
        r, md = grade_alice(data, run_limited)
        self.assertEqual(ran, [(str(t), v) for t in (1, 2, 3, 4) for v in ("kernels", "cublas")] + [("5", "kernels")])
        sec = r["sections"]["01_naive"]
        self.assertEqual([c["status"] for c in sec["cases"]], ["timeout"] * 2 + ["wrong answer"] * 2 + ["timeout"] * 5
                         + [grade.AFTER_HANGS] * 5)
        self.assertEqual((sec["weight_total"], sec["weight_passed"]), (14, 0))  # unrun, they fail
        self.assertIn("not run: the runs of T=3, T=4, T=5 timed out, one case after another", sec["cases"][-1]["log_excerpt"])
        self.assertIn(f"| T=7 | cublas | {grade.AFTER_HANGS} | 0.0 |", md)


class CpuModelRuns(unittest.TestCase):
    """--cpu with stand-in runs: the runs `check` makes without a GPU, each with --cpu; a run whose
    exercise part needs a GPU is neither a pass nor a failure, and a section of nothing else has no
    number."""

    def grade(self, run_limited, data, not_on_cpu=None):
        ran = []

        def run(cmd, timeout):
            ran.append([str(c) for c in cmd])
            return run_limited(cmd, timeout)
        g = StandInGrader(ROOT, ROOT / "build", run, make_labs.make_stub, lambda s, hidden: data,
                          student.expand_cases, dict, print, program=lambda s, sol, build_dir=None, labs_dir=None: ["lab"])
        g.not_on_cpu = not_on_cpu or {}
        with tempfile.TemporaryDirectory() as tmp:
            r = g.grade(submission(Path(tmp, "alice")), Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, False,
                        None, "abc", lambda msg: None, cpu_model=True)
            md = (Path(tmp, "grades", "alice", "grade.md")).read_text()
        return r, md, ran

    def test_a_run_whose_exercise_part_needs_a_gpu_is_not_counted(self):
        def run_limited(cmd, timeout):
            rec = Path(cmd[cmd.index("--json") + 1])
            if cmd[cmd.index("--variant") + 1] == "mma":
                return 77, "not checked here: needs a GPU: the mma kernel's fragments", 0.1
            passed = cmd[cmd.index("--t") + 1] != "3"
            rec.write_text(json.dumps([{"build": "cpu-model", "check": {"passed": passed, "rows_checked": 4, "verdict": ""}}]))
            return (0, "PASS", 0.1) if passed else (1, "O too far from fp64", 0.1)
        data = {"section": "01_naive", "variants": ["scalar", "mma", "big"], "cpu_variants": ["scalar", "mma"],
                "cases": [{"name": "T=1", "args": ["--t", "1"]}, {"name": "T=2", "args": ["--t", "2"]},
                          {"name": "T=3", "args": ["--t", "3"]}, {"name": "T=9999", "args": ["--t", "9999"], "cpu": False}]}
        r, md, ran = self.grade(run_limited, data)
        self.assertTrue(all(cmd[-1] == "--cpu" for cmd in ran), ran)
        self.assertEqual(len(ran), 6)  # 3 cases x (scalar, mma): no `cpu: false` case, no variant the model lacks
        sec = r["sections"]["01_naive"]
        self.assertEqual([c["status"] for c in sec["cases"]], ["pass", grade.GPU_ONLY_PART] * 2 +
                         ["wrong answer", grade.GPU_ONLY_PART])
        self.assertEqual((sec["status"], sec["weight_total"], sec["weight_passed"], sec["gpu_only_runs"]),
                         (grade.CPU_GRADED, 3, 2, 6))
        self.assertAlmostEqual(r["total"], 200 / 3)
        self.assertNotIn("bonus", sec)
        self.assertEqual(r["gpu"], grade.CPU_MODEL)
        self.assertIn("2 of 3 cases passed on the CPU model (2 of 3 weight). 3 more passed their CPU part; their "
                      f"exercise part needs a GPU ({grade.GPU_ONLY_PART}): not counted. 6 runs of the case list are "
                      "GPU-only", md)
        self.assertIn("\nbuild/bin/lab_01_naive --variant scalar --iters 0 --t 3 --cpu\n", md)  # the rerun line

    def test_a_run_whose_cpu_part_checked_o_counts_as_its_failure_would(self):
        # 07's and 12's student builds: the CPU model checks O with the student's host-side exercises,
        # then says the rest needs a GPU (exit 77). Its passes count as its failures do: one wrong
        # case of ten is 90 %, not 0 % (the failure alone counted), nor no number at all.
        def run_limited(cmd, timeout):
            if cmd[cmd.index("--t") + 1] == "3":
                return 1, "FAIL: 07_sliding_window window-mma (CPU model)", 0.1
            return 77, ("CPU part passed: 07_sliding_window window-mma (CPU model)\n"
                        "not checked here: needs a GPU: EXERCISE mma-online-softmax runs in the mma kernel only"), 0.1
        data = {"section": "01_naive", "variants": ["window-mma"],
                "cases": [{"name": f"T={t}", "args": ["--t", str(t)]} for t in range(1, 11)]}
        r, md, _ = self.grade(run_limited, data)
        sec = r["sections"]["01_naive"]
        self.assertEqual([c["status"] for c in sec["cases"]].count(grade.CPU_PART_PASSED), 9)
        self.assertEqual((sec["status"], sec["weight_total"], sec["weight_passed"]), (grade.CPU_GRADED, 10, 9))
        self.assertAlmostEqual(sec["correctness"], 90.0)
        self.assertIn("9 of 10 cases passed on the CPU model (9 of 10 weight). 9 of them have an exercise part only "
                      f"a GPU runs: {grade.CPU_PART_PASSED}", md)
        self.assertIn("| T=3 | window-mma | wrong answer |", md)

    def test_a_section_the_cpu_model_cannot_check_has_no_number(self):
        def run_limited(cmd, timeout):
            return 77, "not checked here: needs a GPU: ring_slot() passed; the rest runs only on a Hopper GPU", 0.1
        data = {"section": "01_naive", "variants": ["ws"], "cases": [{"name": "T=1", "args": ["--t", "1"]}]}
        r, md, _ = self.grade(run_limited, data)
        sec = r["sections"]["01_naive"]
        self.assertEqual((sec["status"], sec["correctness"], r["total"]), (grade.CPU_NOT_CHECKED, None, None))
        self.assertEqual(sec["cpu_note"], "every case's exercise part needs a GPU (ring_slot() passed; the rest runs "
                                          "only on a Hopper GPU)")
        self.assertIn(f"| 01_naive | {grade.CPU_NOT_CHECKED}; for review: changed given code (lines 1) | – | – | – | – |", md)
        self.assertIn("**Total: none on the CPU model**", md)
        self.assertEqual(grade.total_text(r), f"no total (01 {grade.CPU_NOT_CHECKED})")

    def test_a_section_whose_cpu_packages_are_missing_is_not_run(self):
        why = "needs torch, not installed here (pip install -r scripts/requirements-cpu.txt)"
        data = {"section": "01_naive", "variants": ["softcap"], "cases": [{"name": "T=1", "args": ["--t", "1"]}]}
        r, md, ran = self.grade(lambda cmd, timeout: (0, "PASS", 0.1), data, not_on_cpu={"01_naive": why})
        sec = r["sections"]["01_naive"]
        self.assertEqual((ran, sec["status"], sec["cpu_note"], r["total"]), ([], grade.CPU_NOT_CHECKED, why, None))
        self.assertIn(f"Compiled; not checked on the CPU model: {why}.", md)


class Scratch(unittest.TestCase):
    def test_the_caches_of_a_submissions_runs_are_deleted_once_they_end(self):
        """Triton's and CUDA's caches go to <grade>/.cache (sandbox_command); a class of them would
        fill the disk, so the grade folder keeps its reports, not its scratch."""
        def run_limited(cmd, timeout):
            rec = Path(cmd[cmd.index("--json") + 1])
            (rec.parent / grade.SCRATCH / "triton").mkdir(parents=True, exist_ok=True)
            (rec.parent / grade.SCRATCH / "triton" / "kernel.cubin").write_bytes(b"\0" * 1024)
            return 1, "O too far from fp64", 0.1
        data = {"section": "01_naive", "variants": ["kernels"], "cases": [{"name": "T=65", "args": ["--t", "65"]}]}
        g = StandInGrader(ROOT, ROOT / "build", run_limited, make_labs.make_stub, lambda s, hidden: data,
                          student.expand_cases, dict, print, program=lambda s, sol, build_dir=None, labs_dir=None: ["prog"])
        with tempfile.TemporaryDirectory() as tmp:
            g.grade(submission(Path(tmp, "alice")), Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, True, "GPU",
                    "abc", lambda msg: None)
            self.assertTrue(Path(tmp, "grades", "alice", "grade.md").is_file())
            self.assertFalse(Path(tmp, "grades", "alice", grade.SCRATCH).exists())


class ResultRecords(unittest.TestCase):
    def test_a_record_passes_only_for_the_submissions_own_code_on_some_rows(self):
        """A Python lab copied from the solution declares build "solution": it ran the submission's
        file and passes. A CPU model's or a baseline's record, or a check of no rows, does not."""
        def rec(build, passed=True, rows=8):
            return {"build": build, "check": {"passed": passed, "rows_checked": rows}}
        self.assertTrue(grade.record_passed(rec("lab")))
        self.assertTrue(grade.record_passed(rec("solution")))
        for r in (rec("cpu-model"), rec("baseline"), rec("lab", passed=False), rec("lab", rows=0)):
            self.assertFalse(grade.record_passed(r), r)
        # graded on the CPU model (--cpu), the model's record is the one that runs the student's exercise code
        self.assertTrue(grade.record_passed(rec("cpu-model"), cpu_model=True))
        self.assertFalse(grade.record_passed(rec("baseline"), cpu_model=True))


class Reports(unittest.TestCase):
    def test_markdown_from_recorded_results(self):
        md = grade.render_markdown(recorded_report())
        self.assertIn("| 01_naive | graded | 75% | – | 0 | 75.0 |", md)
        self.assertIn("| 02_v1_tile | compile error | 0% | – | 0 | 0.0 |", md)
        self.assertIn("3 of 4 cases passed (3 of 4 weight).", md)
        self.assertIn("| large scores | kernels | wrong answer | 0.5 |", md)
        self.assertIn("log of large scores", md)          # the first failure's log excerpt
        self.assertIn('error: expected a ";"', md)       # the compiler's message
        self.assertIn("To build it in your checkout: `scripts/lab check 02`.", md)
        self.assertIn("`notes.txt`", md)

    def test_scores_bonus_and_summary(self):
        r = recorded_report()
        self.assertEqual(grade.section_score(r["sections"]["01_naive"]), 75.0)
        self.assertEqual([grade.bonus_for(x) for x in (None, 0.2, 0.5, 0.89, 0.9, 1.7)], [0, 0, 5, 5, 10, 10])
        full = {"status": "graded", "correctness": 100.0, "bonus": 10}
        self.assertEqual(grade.section_score(full), 110.0)
        with tempfile.TemporaryDirectory() as tmp:
            r["total"] = 37.5
            r["misnamed"] = ["naive.cu: not a lab file; expected labs/01_naive.cu"]
            triage = dict(r, submission="bob", total=None, gpu=None, misnamed=[], sections={
                "01_naive": {"status": grade.NOT_RUN, "correctness": None, "unmodified_stub": False},
                "02_v1_tile": {"status": grade.NOT_RUN, "correctness": None, "unmodified_stub": True}})
            short = dict(r, submission="carol", graded_sections=["01_naive"], total=75.0, misnamed=[])
            grade.write_class_summary([r, triage, short], Path(tmp, "c.csv"))
            lines = Path(tmp, "c.csv").read_text(encoding="utf-8-sig").splitlines()
            self.assertEqual(lines[0], "submission,total,gpu,01_naive,01_naive_status,02_v1_tile,02_v1_tile_status,"
                                       "lab_files_not_graded,edited_outside_exercises,review")
            self.assertEqual(lines[1], "alice,37.5,NVIDIA H200,75.0,graded,0.0,compile error,naive.cu,,")
            # triage: no number but an untouched stub's 0, and the solution and the stub read differently
            self.assertEqual(lines[2], "bob,,none (triage),,not run (no GPU),0.0,unmodified stub,,,")
            self.assertEqual(lines[3], "carol,75.0,NVIDIA H200,75.0,graded,,not graded,,,")  # graded over fewer
            self.assertNotIn(b"\r", Path(tmp, "c.csv").read_bytes())  # \n line endings, not CSV's default CRLF
            for row in rows(Path(tmp, "c.csv")):  # every score column is a number or empty
                for k in ("total", "01_naive", "02_v1_tile"):
                    self.assertTrue(row[k] == "" or float(row[k]) >= 0, (k, row[k]))

    def test_triage_sections_show_no_number(self):
        r = recorded_report()
        r["sections"]["01_naive"] = {"status": "not run (no GPU)", "correctness": None, "cases": [],
                                     "weight_total": 0, "weight_passed": 0, "unmodified_stub": True}
        r["total"], r["gpu"] = None, None
        md = grade.render_markdown(r)
        self.assertIn("| 01_naive | not run (no GPU), unmodified stub | – | – | – | 0.0 |", md)  # a stub is a known 0
        self.assertEqual(md.count("not run (no GPU)"), 2)  # the total and the row's status, nothing else
        self.assertIn("**Total: not run (no GPU)**", md)
        self.assertIn("without a GPU (triage only", md)
        self.assertNotIn("on no GPU", md)
        self.assertEqual(grade.section_score(r["sections"]["01_naive"]), 0.0)
        r["sections"]["01_naive"]["unmodified_stub"] = False  # compiled, not run: no number
        self.assertIsNone(grade.section_score(r["sections"]["01_naive"]))

    def test_the_console_shows_a_triage_grade_by_its_sections(self):
        # a triage total reads "not run" for everyone who compiled: each section's state says more
        r = recorded_report()
        self.assertEqual(grade.outcome_text(r), "0.0")  # a GPU grade: its total, as before
        r.update(gpu=None, total=None, graded_sections=["01_naive", "02_v1_tile", "09_triton", "12_ring"])
        r["sections"]["01_naive"] = {"status": grade.NOT_RUN, "correctness": None, "cases": [], "unmodified_stub": False}
        r["sections"]["09_triton"] = {"status": grade.NOT_RUN, "correctness": None, "cases": [], "unmodified_stub": True}
        r["sections"]["12_ring"] = {"status": "missing", "correctness": 0.0, "cases": []}
        self.assertEqual(grade.outcome_text(r), "01 compiled, 02 compile error, 09 unmodified stub, 12 missing")
        r["sections"]["01_naive"]["status"] = "compile error"  # nothing compiled: still no total of 0 alone
        self.assertEqual(grade.outcome_text(r), "01 compile error, 02 compile error, 09 unmodified stub, 12 missing")

    def test_a_misnamed_file_is_named_once(self):
        r = recorded_report()
        r["ignored_files"] = ["naive.cu", "notes.txt"]
        r["misnamed"] = ["naive.cu: not a lab file; expected labs/01_naive.cu"]
        md = grade.render_markdown(r)
        self.assertIn("- `naive.cu`: not a lab file; expected labs/01_naive.cu", md)
        self.assertEqual(md.count("naive.cu`"), 1)
        self.assertIn("Ignored files (not a lab of this course): `notes.txt`", md)
        self.assertNotIn("not used", md)

    def test_a_whole_tree_handed_in_is_told_its_harness_is_not_used(self):
        r = recorded_report()
        r["ignored_files"] = ["common/", "scripts/", "README.md"]
        md = grade.render_markdown(r)
        self.assertIn("Ignored files (not a lab of this course): `common/`, `scripts/`, `README.md`", md)
        self.assertIn("Your `common/`, `scripts/` are not used: your labs are built against the course's own "
                      "harness and scripts, unchanged.", md)

    def test_misnamed_files_are_named(self):
        self.assertEqual(grade.misnamed(["naive.cu", "notes.txt", "labs/tile.cu"], ["01_naive", "02_v1_tile"]),
                         ["naive.cu: not a lab file; expected labs/01_naive.cu",
                          "labs/tile.cu: not a lab file; expected labs/02_v1_tile.cu"])
        # the leading number wins over a shared word (v2 is 03's); a lab suffix in any case or
        # followed by another is still a lab file
        self.assertEqual(grade.misnamed(["12_ring_v2.cu", "01_naive.cu.txt", "01_naive.CU", "readme.txt"], SECTIONS),
                         ["12_ring_v2.cu: not a lab file; expected labs/12_ring.cu",
                          "01_naive.cu.txt: not graded: 2 files could be labs/01_naive.cu (01_naive.cu.txt, "
                          "01_naive.CU); hand in one",
                          "01_naive.CU: not graded: 2 files could be labs/01_naive.cu (01_naive.cu.txt, "
                          "01_naive.CU); hand in one"])

    def test_a_number_inside_a_word_names_the_section(self):
        self.assertEqual(grade.misnamed(["Lab01.cu", "hw2.cu", "notes.cu"], SECTIONS),
                         ["Lab01.cu: not a lab file; expected labs/01_naive.cu",
                          "hw2.cu: not a lab file; expected labs/02_v1_tile.cu"])

    def test_a_digit_inside_a_sections_word_is_no_number(self):
        """v1 is a word of 02's name, not the number 1: v1_tile is 02's file, even beside 01's."""
        every = ["01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "05_decode", "06_paged", "07_sliding_window",
                 "08_tma_skeleton", "09_triton", "10_flex", "11_backward", "12_ring"]
        guesses = {stem: grade.guess_section(stem, every) for stem in (
            "v1_tile", "flash_v1", "flashV1", "backward_v2", "Lab01", "01-naive", "naive", "lab_02", "hw2", "Naive",
            "fp16_kernel", "12_ring_v2", "notes")}
        self.assertEqual(guesses, {"v1_tile": "02_v1_tile", "flash_v1": "02_v1_tile", "flashV1": "02_v1_tile",
                                   "backward_v2": None,  # 11's word, 03's word: a tie names none
                                   "Lab01": "01_naive", "01-naive": "01_naive", "naive": "01_naive",
                                   "lab_02": "02_v1_tile", "hw2": "02_v1_tile", "Naive": "01_naive",
                                   "fp16_kernel": "04_fp16", "12_ring_v2": "12_ring", "notes": None})
        self.assertEqual(grade.misnamed(["labs/v1_tile.cu"], every, {"01_naive": "labs/01_naive.cu"}),
                         ["labs/v1_tile.cu: not a lab file; expected labs/02_v1_tile.cu"])

    def test_a_folder_named_as_a_lab_is_called_a_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp, "labs", "01_naive.cu")).mkdir(parents=True)
            self.assertEqual(grade.submission_notes(Path(tmp), SECTIONS)[2], ["labs/01_naive.cu/: a folder, not a file"])

    def test_a_python_lab_that_does_not_parse_is_a_compile_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "sub"), "01_naive.cu", "09_triton.py")
            (sub / "labs" / "09_triton.py").write_text("import sys\ndef broken(:\n")
            # from the repository's root, where labs/09_triton.py is the stub: the student's line is quoted
            with contextlib.chdir(ROOT):
                r = stand_in_grade(sub, Path(tmp, "grades"), False, ["01_naive", "09_triton"])
            sec = r["sections"]["09_triton"]
            self.assertEqual(sec["status"], "compile error")
            self.assertEqual(sec["log_excerpt"], 'File "labs/09_triton.py", line 2\n    def broken(:\n'
                                                 '               ^\nSyntaxError: invalid syntax')
            self.assertEqual(r["sections"]["01_naive"]["status"], "not run (no GPU)")
            (sub / "labs" / "09_triton.py").write_text("raise RuntimeError('at import')\n")  # parses: not run
            r = stand_in_grade(sub, Path(tmp, "grades"), False, ["09_triton"])
            self.assertEqual(r["sections"]["09_triton"]["status"], "not run (no GPU)")

    def test_a_file_that_includes_from_outside_is_not_built(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "grades")
            submission(out / "alice", "01_naive.cu")  # a classmate's graded copy
            sub = submission(Path(tmp, "sub"), "01_naive.cu", "02_v1_tile.cu")
            (sub / "labs" / "01_naive.cu").write_text('#include "../../alice/labs/01_naive.cu"\n')
            (sub / "labs" / "02_v1_tile.cu").write_text('#include "lab.cuh"\n#include "../common/lab.cuh"\n')
            r = stand_in_grade(sub, out, False, ["01_naive", "02_v1_tile"])
            sec = r["sections"]["01_naive"]
            self.assertEqual(sec["status"], "compile error")
            self.assertIn('labs/01_naive.cu: error: #include "../../alice/labs/01_naive.cu" reads a file outside',
                          sec["log_excerpt"])
            self.assertEqual(r["sections"]["02_v1_tile"]["status"], "not run (no GPU)")  # the lab's own headers

    def test_a_link_or_an_empty_file_is_refused_unread(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "sub"), "02_v1_tile.cu")
            (sub / "labs" / "01_naive.cu").symlink_to(ROOT / "labs" / "01_naive.cu")  # (in a release too)
            (sub / "labs" / "02_v1_tile.cu").write_text(" \r\n\n\t\n")  # whitespace only
            elsewhere = submission(Path(tmp, "elsewhere"), "03_v2_loop_order.cu")
            r = stand_in_grade(sub, Path(tmp, "grades"), False, ["01_naive", "02_v1_tile"])
            sec = r["sections"]["01_naive"]
            self.assertEqual(sec["status"], "compile error")
            self.assertEqual(sec["log_excerpt"], "labs/01_naive.cu: error: a symbolic link, not a file: not followed "
                                                 "(hand in the file itself)")
            self.assertFalse(sec["unmodified_stub"])
            self.assertNotIn("edits_outside_exercises", sec)
            self.assertFalse(Path(tmp, "grades", "sub", "labs", "01_naive.cu").exists())  # never copied
            empty = r["sections"]["02_v1_tile"]
            self.assertEqual((empty["status"], empty["log_excerpt"]), ("empty file", "labs/02_v1_tile.cu: error: empty file"))
            self.assertEqual(grade.section_score(empty), 0.0)
            self.assertNotIn("edits_outside_exercises", empty)  # not "changed given code, lines 1"
            md = Path(tmp, "grades", "sub", "grade.md").read_text()
            self.assertNotIn("Changed outside the exercise regions", md)
            self.assertIn("| 02_v1_tile | empty file |", md)
            self.assertIn("The file is empty: 0 points.", md)
            # a submission whose labs/ folder is a link: its files lie outside it
            linked = Path(tmp, "linked")
            linked.mkdir()
            (linked / "labs").symlink_to(elsewhere / "labs")
            r = stand_in_grade(linked, Path(tmp, "grades"), False, ["03_v2_loop_order"])
            self.assertIn("outside the submission (its folder is a link): not followed",
                          r["sections"]["03_v2_loop_order"]["log_excerpt"])

    def test_a_linker_error_names_the_symbol(self):
        log = ("[2/2] Linking CUDA executable bin/lab_01_naive\nFAILED: bin/lab_01_naive\n"
               "/usr/bin/ld: Scrt1.o: in function `_start':\n(.text+0x17): undefined reference to `main'\n"
               "/usr/bin/ld: b.o: multiple definition of `k'; a.o: first defined here\n"
               "collect2: error: ld returned 1 exit status\nninja: build stopped: subcommand failed.\n")
        self.assertEqual(grade.compiler_excerpt(log).splitlines(),
                         ["(.text+0x17): undefined reference to `main'",
                          "/usr/bin/ld: b.o: multiple definition of `k'; a.o: first defined here",
                          "collect2: error: ld returned 1 exit status"])

    def test_names_that_are_not_utf8_and_broken_links(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "Jos\udce9"), "02_v1_tile.cu")  # a zip made on Windows, unpacked here
            (sub / "labs" / "01_naive.cu").symlink_to(Path(tmp, "gone.cu"))  # a link to nowhere is no lab file
            (sub / "na\udcefve.cu").write_text("x")
            r = stand_in_grade(sub, Path(tmp, "grades"), False, ["01_naive", "02_v1_tile"])
            self.assertEqual(r["sections"]["01_naive"]["status"], "missing")
            self.assertIn("labs/01_naive.cu: not a regular file (a broken link?)", r["misnamed"])
            self.assertEqual(r["sections"]["02_v1_tile"]["status"], "not run (no GPU)")
            self.assertIn("# Grade: Jos?", Path(tmp, "grades", sub.name, "grade.md").read_text())
            path, _ = grade.rebuild_class_summary(Path(tmp, "grades"))
            self.assertTrue(path.read_bytes().startswith("\ufeff".encode()))  # a spreadsheet reads it as UTF-8
            self.assertEqual(rows(path)[0]["submission"], "Jos?")

    def test_only_the_graded_sections_are_built(self):
        builds = []
        def step(cmd, env):
            builds.append([str(c) for c in cmd])
            return 0, ""
        g = grade.Grader(ROOT, ROOT / "build", None, None, None, None, dict, print)
        with mock.patch.object(grade, "build_step", step):
            g.build_submission(Path("labs"), Path("build"), ["01_naive", "02_v1_tile"])
        builds = [c for c in builds if "--build" in c]
        self.assertEqual(len(builds), 3)  # both at once, then each alone
        for cmd in builds:  # every build names its targets: a file handed in but not graded is not compiled
            self.assertIn("--target", cmd)
            targets = cmd[cmd.index("--target") + 1:cmd.index("--parallel")]
            self.assertTrue(set(targets) <= {"lab_01_naive", "lab_02_v1_tile"}, cmd)

    def test_what_the_compiler_read_outside_the_submission_is_a_compile_error(self):
        """The depfile's list, not the #include lines: a macro's or a relative path's file is named,
        and a failed build whose messages sit in such a file quotes none of its lines."""
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "grades", "alice")
            labs, build = out / "labs", out / "build"
            obj = build / "CMakeFiles" / "lab_01_naive.dir" / "x"
            obj.mkdir(parents=True)
            labs.mkdir()
            secret = Path(tmp, "secret.txt")
            secret.write_text("password=hunter2\n")
            (labs / "01_naive.cu").write_text('#define SRC "x"\n#include SRC\n')
            # a Makefiles build keeps nvcc's depfile beside the object (Ninja: ninja -t deps)
            (obj / "01_naive.cu.o.d").write_text(
                f"CMakeFiles/lab_01_naive.dir/x/01_naive.cu.o: {labs / '01_naive.cu'} \\\n"
                f"  {ROOT / 'common' / 'lab.cuh'} \\\n  {ROOT / 'common' / '..' / 'solutions' / '01_naive.cu'}\n")
            self.assertEqual(grade.read_dependencies(build, "01_naive")[2], str(ROOT / "common/../solutions/01_naive.cu"))
            (build / "bin").mkdir()
            (build / "bin" / "lab_01_naive").write_text("the solution, compiled")
            logs = {"01_naive": (0, ""), "02_v1_tile": (1, f"{secret}(1): error: identifier \"password\" is undefined\n"
                                                              "  password=hunter2\n  ^\n"),
                    "03_v2_loop_order": (1, f"{labs}/03_v2_loop_order.cu(3): error: expected a \";\"\n")}
            commands = []
            def step(cmd, env):
                commands.append([str(c) for c in cmd])
                target = cmd[cmd.index("--target") + 1] if "--target" in cmd else ""
                return logs.get(target.removeprefix("lab_"), (0, ""))
            g = grade.Grader(ROOT, ROOT / "build", None, None, None, None, dict, print)
            with mock.patch.object(grade, "build_step", step), mock.patch.object(grade.shutil, "which", lambda _: None):
                built = g.build_submission(labs, build, list(logs))
                self.assertEqual(built["01_naive"], (False, "labs/01_naive.cu: error: reads a file outside the submission: "
                                                            f"{(ROOT / 'solutions' / '01_naive.cu').resolve()}\n"))
                self.assertEqual(built["02_v1_tile"], (False, "labs/02_v1_tile.cu: error: reads a file outside the "
                                                              f"submission: {secret.resolve()}\n"))
                self.assertFalse((build / "bin" / "lab_01_naive").exists())  # nothing of it is kept
                self.assertFalse(built["03_v2_loop_order"][0])
                self.assertIn('expected a ";"', built["03_v2_loop_order"][1])  # its own file: quoted as it was
                # where the grader sandboxes, the compiler runs fenced in too (the configure does not)
                commands.clear()
                g.sandbox = True
                g.build_submission(labs, build, ["03_v2_loop_order"])
            self.assertNotEqual(commands[0][0], grade.SANDBOX_TOOL)
            self.assertTrue(all(c[0] == grade.SANDBOX_TOOL for c in commands[1:]), commands)
            self.assertIn(str(out.resolve()), commands[1][commands[1].index("--bind") + 1])

    def test_a_build_keeps_only_its_programs(self):
        with tempfile.TemporaryDirectory() as tmp:
            build = Path(tmp, "build")
            for f in ("bin/lab_01_naive", "CMakeFiles/lab_01_naive.dir/01_naive.cu.o", "build.ninja", ".ninja_deps",
                      "CMakeCache.txt", "common/cmake_install.cmake"):
                Path(build, f).parent.mkdir(parents=True, exist_ok=True)
                Path(build, f).write_text("x")
            grade.prune_build(build)
            self.assertEqual(sorted(str(f.relative_to(build)) for f in build.rglob("*")), ["bin", "bin/lab_01_naive"])
            grade.prune_build(Path(tmp, "none"))  # a submission with nothing compiled has no build folder

    def test_a_build_that_hangs_is_stopped(self):
        with mock.patch.object(grade, "BUILD_TIMEOUT", 1):
            # input is closed: a file that includes /dev/stdin reads nothing, and waits for nobody
            code, out = grade.build_step([sys.executable, "-c", "import sys; print(len(sys.stdin.read()))"], None)
            self.assertEqual((code, out), (0, "0\n"))
            # a step whose child outlives it (the compiler under cmake) is stopped whole
            start = time.time()
            code, out = grade.build_step(["sh", "-c", "echo compiling; sleep 60 & wait"], None)
            self.assertLess(time.time() - start, 30)
            self.assertEqual(code, 124)
            self.assertIn("compiling", out)
            self.assertIn("error: the build was stopped after 1 s", out)

    def test_second_copies_and_nested_folders_are_pointed_at(self):
        with tempfile.TemporaryDirectory() as tmp:
            dup = Path(tmp, "dup")
            (dup / "labs").mkdir(parents=True)
            (dup / "labs" / "01_naive.cu").write_text("x")
            (dup / "01_naive.cu").write_text("x")
            found, _, notes, _ = grade.submission_notes(dup, SECTIONS)
            self.assertEqual(list(found), ["01_naive"])
            self.assertEqual(notes, ["01_naive.cu: ignored; labs/01_naive.cu is the 01_naive file graded"])
            zed = Path(tmp, "zed")  # a folder beside others (a lone one is a wrapper: below)
            (zed / "zed" / "labs").mkdir(parents=True)
            (zed / "zed" / "labs" / "01_naive.cu").write_text("x")
            (zed / "notes.txt").write_text("x")
            found, ignored, notes, _ = grade.submission_notes(zed, SECTIONS)
            self.assertEqual((found, ignored), ({}, ["notes.txt", "zed/"]))
            self.assertEqual(notes, ["zed/labs/01_naive.cu: in a nested folder, not graded; expected labs/01_naive.cu"])

    def test_a_wrapper_folder_is_graded_from_inside(self):
        """A zip of zack/ unpacked into zack/ (unzip -d) is zack/zack/labs/...; the archiver's and
        the desktop's files beside the wrapper do not count."""
        with tempfile.TemporaryDirectory() as tmp:
            zack = Path(tmp, "zack")
            submission(zack / "zack", "01_naive.cu", "02_v1_tile.cu")
            (zack / "__MACOSX" / "zack").mkdir(parents=True)
            (zack / ".DS_Store").write_text("x")
            (zack / "zack" / "report.pdf").write_text("x")
            found, ignored, notes, intake = grade.submission_notes(zack, SECTIONS)
            self.assertEqual(found, {s: zack / "zack" / "labs" / f"{s}.cu" for s in ("01_naive", "02_v1_tile")})
            self.assertEqual((ignored, notes, intake), (["report.pdf"], [], ["graded from the folder zack/ inside it"]))
            # two wrappers deep; lab files straight in the inner folder
            amy = Path(tmp, "amy")
            (amy / "Submission" / "amy").mkdir(parents=True)
            (amy / "Submission" / "amy" / "01_naive.cu").write_text("x")
            found, _, _, intake = grade.submission_notes(amy, SECTIONS)
            self.assertEqual((list(found), intake), (["01_naive"], ["graded from the folder Submission/amy/ inside it"]))
            # labs/ is the usual layout, not a wrapper; a lone folder with no lab file is not one either
            self.assertEqual(grade.submission_notes(zack / "zack", SECTIONS)[3], [])
            bob = Path(tmp, "bob")
            (bob / "drafts").mkdir(parents=True)
            (bob / "drafts" / "naive.cu").write_text("x")
            self.assertEqual(grade.submission_notes(bob, SECTIONS)[:2] + (grade.submission_notes(bob, SECTIONS)[3],),
                             ({}, ["drafts/"], []))
            # the report says where the files came from
            r = stand_in_grade(zack, Path(tmp, "grades"), False, ["01_naive"])
            self.assertEqual(r["intake"], ["graded from the folder zack/ inside it"])
            self.assertEqual(r["sections"]["01_naive"]["status"], grade.NOT_RUN)
            self.assertIn("- Graded from the folder zack/ inside it.", (Path(tmp, "grades", "zack", "grade.md")).read_text())

    def test_a_file_a_platform_renamed_is_graded_as_its_lab(self):
        names = {"larry_123456_01_naive.cu": "01_naive", "02_v1_tile (1).cu": "02_v1_tile", "03_v2_loop_order.cu.txt":
                 "03_v2_loop_order", "Larry Smith_1234_assignsubmission_file_09_triton-2.py": "09_triton",
                 "01_Naive.CU": "01_naive"}
        for name, section in names.items():
            self.assertEqual(grade.renamed_section(name, SECTIONS), section, name)
        # looser or ambiguous names, or another section's suffix, are not guessed at
        for name in ("naive2.cu", "Lab01.cu", "x01_naive.cu", "01_naive_02_v1_tile.cu", "01_naive.py", "01_naive_v2.cu",
                     "01_naive.txt", "09_triton.cu", "01_naive.cu~"):
            self.assertIsNone(grade.renamed_section(name, SECTIONS), name)
        with tempfile.TemporaryDirectory() as tmp:
            sub = Path(tmp, "larry")
            (sub / "labs").mkdir(parents=True)
            for name in ("larry_123456_01_naive.cu", "02_v1_tile (1).cu", "02_v1_tile (2).cu", "12_ring.cu",
                         "12_ring (1).cu", "naive2.cu", "loop_order2.cu"):
                (sub / "labs" / name).write_text(f"// {name}\n")
            (sub / "09_triton.py.txt").write_text("x = 1\n")
            found, ignored, notes, intake = grade.submission_notes(sub, SECTIONS)
            self.assertEqual({s: f.name for s, f in found.items()},
                             {"01_naive": "larry_123456_01_naive.cu", "12_ring": "12_ring.cu", "09_triton": "09_triton.py.txt"})
            self.assertEqual(intake, ["graded labs/larry_123456_01_naive.cu as labs/01_naive.cu",
                                      "graded 09_triton.py.txt as labs/09_triton.py"])
            # two candidates for one section, a properly named file beside one, a loose name: as before
            two = "not graded: 2 files could be labs/02_v1_tile.cu (labs/02_v1_tile (1).cu, labs/02_v1_tile (2).cu); hand in one"
            self.assertEqual(notes, [f"labs/02_v1_tile (1).cu: {two}", f"labs/02_v1_tile (2).cu: {two}",
                                     "labs/12_ring (1).cu: ignored; labs/12_ring.cu is the 12_ring file graded",
                                     "labs/loop_order2.cu: not a lab file; expected labs/03_v2_loop_order.cu",
                                     "labs/naive2.cu: ignored; labs/larry_123456_01_naive.cu is the 01_naive file graded"])
            self.assertEqual(sorted(ignored), ["labs/02_v1_tile (1).cu", "labs/02_v1_tile (2).cu", "labs/12_ring (1).cu",
                                               "labs/loop_order2.cu", "labs/naive2.cu"])
            # graded under its lab's name, and the report says which file it was
            r = stand_in_grade(sub, Path(tmp, "grades"), False, ["01_naive", "09_triton"])
            self.assertEqual([r["sections"][s]["status"] for s in ("01_naive", "09_triton")], [grade.NOT_RUN] * 2)
            self.assertEqual(sorted(p.name for p in Path(tmp, "grades", "larry", "labs").iterdir()),
                             ["01_naive.cu", "09_triton.py", "12_ring.cu"])
            md = Path(tmp, "grades", "larry", "grade.md").read_text()
            self.assertIn("- Graded labs/larry_123456_01_naive.cu as labs/01_naive.cu.", md)

    @needs_solutions
    def test_a_renamed_stub_is_still_a_stub(self):
        with tempfile.TemporaryDirectory() as tmp:
            solution = ROOT / "solutions" / "01_naive.cu"
            for name in ("01_naive.cu.txt", "01_Naive.CU"):
                sub = Path(tmp, name)
                sub.mkdir()
                (sub / name).write_text(make_labs.make_stub(solution.read_text(), solution.name))
                r = stand_in_grade(sub, Path(tmp, "grades"), False, ["01_naive"])
                self.assertTrue(r["sections"]["01_naive"]["unmodified_stub"], name)
                g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
                self.assertTrue(grade.handed_in_stub(g, sub / name, "01_naive"), name)
            self.assertFalse(grade.handed_in_stub(g, Path(tmp, "gone.cu"), "01_naive"))  # read when the grade is made

    def test_run_outcomes_are_classified(self):
        self.assertEqual(grade.classify(0, "", True), "pass")
        self.assertEqual(grade.classify(0, "", False), "exited early (no passing result record)")
        self.assertEqual(grade.classify(1, "output not written: all ...", False), "output not written")
        self.assertEqual(grade.classify(1, "O too far from fp64", False), "wrong answer")
        self.assertEqual(grade.classify(124, "TIMEOUT", False), "timeout")
        self.assertEqual(grade.classify(-11, "", False), "crashed (signal 11, SIGSEGV)")
        self.assertEqual(grade.classify(-25, "STOPPED: it wrote a file larger than", False), "wrote too large a file")
        self.assertEqual(grade.classify(1, "OSError: [Errno 27] File too large", False), "wrote too large a file")
        self.assertEqual(grade.classify(3, "CUDA error", False), "CUDA error")

    def test_a_signal_under_the_sandbox_is_a_crash(self):
        """bubblewrap passes its program's death by signal N on as exit 128 + N."""
        classify = lambda code, sandboxed, out="": grade.classify(code, out, False, sandboxed=sandboxed)
        self.assertEqual(classify(139, True), "crashed (signal 11, SIGSEGV)")
        self.assertEqual(classify(134, True), "crashed (signal 6, SIGABRT)")
        self.assertEqual(classify(128 + 25, True, "STOPPED: it wrote a file larger than"), "wrote too large a file")
        self.assertEqual(classify(139, False), "exit 139")  # unsandboxed, an exit code is the program's own
        self.assertEqual((classify(124, True), classify(2, True), classify(1, True, "O too far")),
                         ("timeout", "refused the input (exit 2)", "wrong answer"))

    def test_a_crash_says_its_signal_in_the_first_failure(self):
        data = {"section": "01_naive", "variants": ["kernels"], "cases": [{"name": "T=65", "args": ["--t", "65"]}]}
        for code, sandbox in ((139, True), (-11, False)):
            r, md = grade_alice(data, lambda cmd, timeout: (code, "", 0.1), sandbox=sandbox)
            self.assertEqual(r["sections"]["01_naive"]["cases"][0]["status"], "crashed (signal 11, SIGSEGV)")
            self.assertIn("First failure, `T=65` (kernels):\n\n```\nkilled by signal 11 (SIGSEGV)\n```", md)

    def test_a_hidden_case_shows_its_name_alone(self):
        """Neither its arguments nor what the program said of them (a refusal quotes them) reach grade.md."""
        data = {"section": "01_naive", "variants": ["kernels"], "cases": [{"name": "hidden: bad flag", "args": ["--tt", "3001"]}]}
        run_limited = lambda cmd, timeout: (2, "bad input: unknown option --tt (see --help)", 0.1)
        r, md = grade_alice(data, run_limited)
        self.assertEqual([c["status"] for c in r["sections"]["01_naive"]["cases"]], ["refused the input (exit 2)"])
        self.assertIn("First failure, `hidden: bad flag` (kernels): a hidden case; its output is not shown.", md)
        for leak in ("--tt", "3001", "unknown option"):
            self.assertNotIn(leak, md)

    def test_scan_finds_labs_and_names_the_rest(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = Path(tmp)
            (sub / "labs").mkdir()
            (sub / "labs" / "01_naive.cu").write_text("x")
            (sub / "labs" / "99_other.cu").write_text("x")
            (sub / "report.pdf").write_text("x")
            (sub / "labs" / "old").mkdir()
            found, ignored = grade.scan_submission(sub, ["01_naive", "02_v1_tile"])
            self.assertEqual(list(found), ["01_naive"])
            self.assertEqual(sorted(ignored), ["labs/99_other.cu", "labs/old/", "report.pdf"])

    @unittest.skipUnless((ROOT / "solutions").is_dir(), "a student release has no solutions/")
    def test_the_planted_bug_is_in_given_code(self):
        """The grading example's planted bug edits code the stub has too: student.py, which goes out
        with the release, must hold no answer."""
        old, new = student.PLANTED_BUG
        solution = ROOT / "solutions" / "01_naive.cu"
        self.assertEqual(solution.read_text().count(old), 1)
        self.assertTrue(old in make_labs.make_stub(solution.read_text(), solution.name), f"{old!r} is not in the stub")

    # where grades go: a folder of the grader's under --out, one per submission, never a submission
    def test_an_out_that_would_replace_a_submission_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            alice = submission(Path(tmp, "class3", "alice"))
            for out, how in ((alice.parent, "is the submission"), (alice, "is inside the submission"),
                             (alice / "grades", "is inside the submission")):
                _, _, problems = grade.plan_outputs([alice], out)
                self.assertEqual(len(problems), 1, (out, problems))
                self.assertIn(f"would go to {out.resolve() / 'alice'}, which {how} {alice.resolve()}", problems[0])
            ex = submission(Path(tmp, "g", "alice", "ex"))  # a submission inside another's grade folder
            _, _, problems = grade.plan_outputs([alice, ex], Path(tmp, "g"))
            self.assertEqual(len(problems), 1, problems)
            self.assertIn(f"which holds the submission {ex.resolve()}", problems[0])
            # the submissions' parent is a fine --out when the grade folders are not the submissions
            plan, _, problems = grade.plan_outputs([alice, submission(Path(tmp, "other", "alice"))], alice.parent)
            self.assertEqual(problems, [])
            self.assertEqual([n for _, _, n in plan], ["class3-alice", "other-alice"])

    def test_paths_a_glob_catches_beside_the_submissions_are_skipped(self):
        with tempfile.TemporaryDirectory() as tmp:
            alice, bob = submission(Path(tmp, "alice")), submission(Path(tmp, "bob.smith"))
            for name in ("alice.zip", "bob.smith.tar.gz", "carol.zip"):
                Path(tmp, name).write_bytes(b"x")
            out = Path(tmp, "grades")
            given = [alice, bob, Path(tmp, "alice.zip"), Path(tmp, "bob.smith.tar.gz"), Path(tmp, "carol.zip")]
            self.assertEqual(grade.skipped_submissions(given, out), {
                Path(tmp, "alice.zip"): f"{tmp}/alice.zip: not a folder; skipped (the folder {alice} is graded)",
                Path(tmp, "bob.smith.tar.gz"): f"{tmp}/bob.smith.tar.gz: not a folder; skipped (the folder {bob} is graded)"})
            out.mkdir()  # the rerun: --out exists now, and the glob holds it
            self.assertEqual(grade.skipped_submissions(given + [out], out)[out],
                             f"{out}: the --out folder, not a submission; skipped")
            grade.write_reports(recorded_report(), out / "alice")  # a grade folder, and so an --out, of the grader's
            (out / "alice" / grade.MARKER).touch()
            skipped = grade.skipped_submissions([alice, out, out / "alice"], Path(tmp, "other"))
            self.assertEqual(sorted(skipped), [out, out / "alice"])
            self.assertTrue(all("grades the grader wrote" in line for line in skipped.values()))
            # the archive's folder must be a submission of this run to stand for it
            self.assertEqual(grade.skipped_submissions([Path(tmp, "alice.zip")], out), {})

    def test_a_folder_the_grader_did_not_write_is_not_replaced(self):
        with tempfile.TemporaryDirectory() as tmp:
            alice = submission(Path(tmp, "subs", "alice"))
            (Path(tmp, "out", "alice")).mkdir(parents=True)
            self.assertEqual(grade.plan_outputs([alice], Path(tmp, "out"))[2], [])  # empty: nothing to lose
            Path(tmp, "out", "alice", "thesis.tex").write_text("x")
            problems = grade.plan_outputs([alice], Path(tmp, "out"))[2]
            self.assertEqual(len(problems), 1)
            self.assertIn("which is not a grade", problems[0])
            Path(tmp, "out", "alice", grade.MARKER).touch()  # a grade folder: replaced
            self.assertEqual(grade.plan_outputs([alice], Path(tmp, "out"))[2], [])

    def test_an_out_of_the_instructors_files_is_never_replaced(self):
        """A class summary the grader did not write is refused, one line; its own is rewritten, and
        other files of the instructor's beside it stay allowed (the grader writes only its own names)."""
        with tempfile.TemporaryDirectory() as tmp:
            alice, out = submission(Path(tmp, "subs", "alice")), Path(tmp, "out")
            out.mkdir()
            Path(out, "notes.txt").write_text("mine")
            self.assertEqual(grade.plan_outputs([alice], out)[2], [])
            Path(out, "class_summary.csv").write_text("keep\n")
            problems = grade.plan_outputs([alice], out)[2]
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("class_summary.csv is not a class summary the grader wrote: not replaced", problems[0])
            grade.write_reports(dict(recorded_report(), path=str(alice.resolve())), out / "alice")
            grade.rebuild_class_summary(out)  # the grader's own: a rerun rewrites it
            self.assertEqual(grade.plan_outputs([alice], out)[2], [])
            Path(out, ".harness").mkdir()
            Path(out, ".harness", "thesis.tex").write_text("x")  # a folder of the grader's name, not its
            self.assertIn(".harness is not the grader's", " ".join(grade.plan_outputs([alice], out)[2]))

    def test_an_out_in_the_repository_or_at_the_root_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            alice = submission(Path(tmp, "subs", "alice"))
            for out, why in ((Path("/"), "the file system's root"), (ROOT, "the repository's root"),
                             (ROOT / "common", "inside the repository's common/"),  # (a release has no solutions/)
                             (ROOT / "labs" / "grades", "inside the repository's labs/"),
                             (ROOT / "scripts" / "g", "inside the repository's scripts/"),
                             (Path(tmp, "it's"), "which the build tools mishandle")):
                problems = grade.plan_outputs([alice], out)[2]
                self.assertEqual(len(problems), 1, (out, problems))
                self.assertIn(why, problems[0])
            # a new folder of the repository's root, or an ignored one, stays a fine --out
            for out in (ROOT / "grades-test-unused", ROOT / "build" / "grades-test-unused"):
                self.assertEqual(grade.plan_outputs([alice], out)[2], [], out)

    def test_names_once_per_folder_and_never_shared(self):
        with tempfile.TemporaryDirectory() as tmp:
            s1, s2 = submission(Path(tmp, "sec1", "alice")), submission(Path(tmp, "sec2", "alice"))
            bob = submission(Path(tmp, "sec1", "bob"))
            out = Path(tmp, "g")
            plan, notes, problems = grade.plan_outputs([s1, s2, bob, Path(tmp, "sec1", "..", "sec1", "bob")], out)
            self.assertEqual(problems, [])
            self.assertEqual([n for _, _, n in plan], ["sec1-alice", "sec2-alice", "bob"])
            self.assertTrue(any("the same folder as" in n and "graded once" in n for n in notes), notes)
            a, b = submission(Path(tmp, "a", "x", "carol")), submission(Path(tmp, "b", "x", "carol"))
            _, _, problems = grade.plan_outputs([a, b], out)
            self.assertEqual(len(problems), 1)
            self.assertIn("would all be graded as x-carol", problems[0])

    def test_a_regraded_submission_keeps_its_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            s1, s2 = submission(Path(tmp, "sec1", "alice")), submission(Path(tmp, "sec2", "alice"))
            out = Path(tmp, "g")
            for name, sub in (("sec1-alice", s1), ("sec2-alice", s2)):
                grade.write_reports(dict(recorded_report(), submission=name, path=str(sub.resolve())), out / name)
            self.assertEqual([n for _, _, n in grade.plan_outputs([s1], out)[0]], ["sec1-alice"])
            # a folder name that holds another existing submission's grade is not taken over...
            grade.write_reports(dict(recorded_report(), submission="alice", path=str(s1.resolve())), out / "alice")
            self.assertEqual([n for _, _, n in grade.plan_outputs([s2], out)[0]], ["sec2-alice"])
            # ...but one whose submission is gone (moved, downloaded again) is
            grade.write_reports(dict(recorded_report(), submission="alice", path=str(Path(tmp, "gone"))), out / "alice")
            s3 = submission(Path(tmp, "sec3", "alice"))
            self.assertEqual([n for _, _, n in grade.plan_outputs([s3], out)[0]], ["alice"])

    def test_without_sections_the_class_sections_count(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "g")
            self.assertEqual(grade.class_sections([{"02_v1_tile": 1}, {"01_naive": 1}], out, SECTIONS),
                             (["01_naive", "02_v1_tile"], []))
            r = recorded_report()
            alice = Path(tmp, "subs", "alice")
            grade.write_reports(dict(r, path=str(alice.resolve()), graded_sections=["12_ring"],
                                     sections={"12_ring": r["sections"]["01_naive"]}), out / "alice")
            # alice regraded with bob: what her grade handed in counts beside this run's files
            self.assertEqual(grade.class_sections([{"01_naive": alice / "labs" / "01_naive.cu"}, {"01_naive": 1}],
                                                  out, SECTIONS), (["01_naive", "12_ring"], []))

    def test_a_section_handed_in_only_as_stubs_does_not_count(self):
        """One submission of the whole release (every stub untouched, one section done) must not
        make the class's other submissions score 0 in every section it holds."""
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "g")
            whole = {s: f"stub {s}" for s in SECTIONS}
            whole["09_triton"] = "mine"
            is_stub = lambda path, section: path.startswith("stub")
            graded, stub_only = grade.class_sections([whole, {"09_triton": "mine"}], out, SECTIONS, is_stub)
            self.assertEqual(graded, ["09_triton"])
            self.assertEqual(stub_only, ["01_naive", "02_v1_tile", "03_v2_loop_order", "12_ring"])
            # a section someone did counts, however many handed in its stub
            self.assertEqual(grade.class_sections([whole, {"01_naive": "mine"}], out, SECTIONS, is_stub)[0],
                             ["01_naive", "09_triton"])
            # a class of nothing but stubs is graded over them (each an unmodified stub)
            self.assertEqual(grade.class_sections([{"01_naive": "stub"}], out, SECTIONS, is_stub), (["01_naive"], []))
            # the grades already under --out count alike: a section one graded as a stub does not
            r = recorded_report()
            stub_sec = dict(r["sections"]["01_naive"], unmodified_stub=True)
            al = Path(tmp, "subs", "al")
            grade.write_reports(dict(r, path=str(al.resolve()), graded_sections=["01_naive", "12_ring"],
                                     sections={"01_naive": stub_sec, "12_ring": r["sections"]["01_naive"]}), out / "al")
            is_stub = lambda path, section: str(path).startswith("stub")
            self.assertEqual(grade.class_sections([{"09_triton": al / "09_triton.py"}], out, SECTIONS, is_stub),
                             (["09_triton", "12_ring"], ["01_naive"]))

    def test_a_late_submission_is_graded_over_the_class_sections(self):
        """A class graded under --out, then one late folder graded alone without --sections: it is
        graded over the sections the class was graded over, however many it hands in, and the class
        summary keeps its columns."""
        with tempfile.TemporaryDirectory() as tmp:
            out, r = Path(tmp, "g"), recorded_report()
            missing = {"status": "missing", "correctness": 0.0, "cases": []}
            for name, sections in (("alice", {"01_naive": r["sections"]["01_naive"], "02_v1_tile": missing,
                                               "03_v2_loop_order": missing}),
                                   ("bob", {"01_naive": r["sections"]["01_naive"],
                                            "02_v1_tile": r["sections"]["02_v1_tile"], "03_v2_loop_order": missing})):
                # graded with --sections 01 02 03: nobody handed in 03, and it counted all the same
                grade.write_reports(dict(r, submission=name, path=str(Path(tmp, "subs", name).resolve()),
                                         graded_sections=["01_naive", "02_v1_tile", "03_v2_loop_order"],
                                         sections=sections), out / name)
            late = Path(tmp, "subs", "late")
            handed = {str(late): {"01_naive": late / "01_naive.cu", "12_ring": late / "12_ring.cu"}}
            graded, stub_only = grade.class_sections(handed.values(), out, SECTIONS)
            self.assertEqual((graded, stub_only), (["01_naive", "02_v1_tile", "03_v2_loop_order"], []))
            lines = grade.section_takers(handed, graded)
            self.assertEqual(len(lines), 1, lines)  # no count of one late submission's sections, no advice
            self.assertIn("the 2 grade(s) already in", lines[0])
            self.assertIn("handed in now but not among them: 12_ring (to count it, grade the whole class again "
                          "with --sections 01 02 03 12)", lines[0])
            self.assertNotIn("fewer than half", lines[0])
            # a late student who hands in less is graded over as much
            self.assertEqual(grade.class_sections([{"02_v1_tile": late / "02_v1_tile.cu"}], out, SECTIONS)[0],
                             ["01_naive", "02_v1_tile", "03_v2_loop_order"])
            # the whole class graded again (every grade replaced): the sections its files hand in
            bob = Path(tmp, "subs", "bob")
            again = [{"01_naive": Path(tmp, "subs", "alice", "01_naive.cu")},
                     {"01_naive": bob / "labs" / "01_naive.cu", "12_ring": bob / "12_ring.cu"}]
            graded = grade.class_sections(again, out, SECTIONS)[0]
            self.assertEqual(graded, ["01_naive", "02_v1_tile", "12_ring"])  # bob's 02 of before; 03 nobody's
            self.assertTrue(all("already in" not in line for line in grade.section_takers(
                {"alice": again[0], "bob": again[1]}, graded)))

    # Grader.grade's bookkeeping (StandInGrader)
    def test_a_regrade_keeps_the_last_grade_until_its_runs_end(self):
        # build() of a whole class comes before any run: a class cut short must keep its grades
        with tempfile.TemporaryDirectory() as tmp:
            sub, out = submission(Path(tmp, "subs", "dave")), Path(tmp, "grades")
            stand_in_grade(sub, out, on_gpu=True)
            before = (out / "dave" / "grade.json").read_text()
            (out / "dave" / "record-1.json").write_text("{}")  # a stray file of the last grade
            g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
            staged = g.build(sub, out, SECTIONS, None)
            self.assertEqual((out / "dave" / "grade.json").read_text(), before)
            self.assertTrue((out / "dave" / "grade.md").is_file())
            self.assertFalse((out / "dave" / "record-1.json").exists())
            self.assertEqual(staged["report"]["submission"], "dave")

    def test_a_known_zero_is_a_number(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "subs", "carol"))
            (sub / "labs" / "01_naive.cu").write_text("broken\n")
            r = stand_in_grade(sub, Path(tmp, "out"), False, ["01_naive", "02_v1_tile"])
            self.assertEqual(r["total"], 0.0)  # a compile error and a missing file: 0, not "not run"
            excerpt = r["sections"]["01_naive"]["log_excerpt"]
            self.assertEqual(excerpt, "labs/01_naive.cu(3): error: expected a ';'")  # not the grader's folder
            self.assertIsNone(stand_in_grade(submission(Path(tmp, "subs", "dave")), Path(tmp, "out"), False)["total"])

    def test_a_failed_case_says_how_to_run_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = stand_in_grade(submission(Path(tmp, "subs", "erin")), Path(tmp, "out"), True)
            cases = r["sections"]["01_naive"]["cases"]
            self.assertEqual(cases[0]["rerun"], "build/bin/lab_01_naive --variant kernels --iters 0 --t 65")
            self.assertNotIn("rerun", cases[1])  # a hidden case's arguments are not shown
            md = Path(tmp, "out", "erin", "grade.md").read_text()
            self.assertIn("build/bin/lab_01_naive --variant kernels --iters 0 --t 65", md)
            self.assertNotIn(tmp, md)

    def test_regrading_one_keeps_the_others_in_the_summary(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "out")
            for name in ("alice", "bob", "carol"):
                stand_in_grade(submission(Path(tmp, "subs", name)), out, False)
            stand_in_grade(submission(Path(tmp, "subs", "bob")), out, True)  # bob again, on a GPU
            path, reports = grade.rebuild_class_summary(out)
            self.assertEqual([(r["submission"], r["gpu"]) for r in rows(path)],
                             [("alice", "none (triage)"), ("bob", "GPU"), ("carol", "none (triage)")])


    # --resume: which grades are kept (grade.resume_reason)
    def resumed(self, sub, out, **changed):
        """resume_reason of sub's grade in out/NAME against the conditions it was graded under, some
        of them `changed`."""
        report = json.loads((out / sub.name / "grade.json").read_text())
        expected = {k: report.get(k) for k in ("path", "grading_files", "graded_sections", "gpu", "sandboxed",
                                           "hidden_cases_sha256", "timeout_s")}
        return grade.resume_reason(out / sub.name, sub.resolve(), dict(expected, **changed), SECTIONS)[0]

    def test_a_finished_grade_is_kept_only_while_nothing_changed(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub, out = submission(Path(tmp, "subs", "alice"), "01_naive.cu", "02_v1_tile.cu"), Path(tmp, "out")
            report = stand_in_grade(sub, out, on_gpu=True)
            self.assertEqual(set(report["lab_files"]), {"labs/01_naive.cu", "labs/02_v1_tile.cu"})
            self.assertEqual(report["timeout_s"], 10)
            self.assertIsNone(report["hidden_cases_sha256"])
            self.assertIsNone(self.resumed(sub, out))
            files = report["grading_files"]
            self.assertIn("scripts/grade.py", files)
            self.assertIn("tests/cases/01_naive.json", files)
            self.assertFalse([f for f in files if f.startswith(("labs/", "ch12/", "results/"))])  # no grade depends on them
            self.assertEqual(self.resumed(sub, out, grading_files=dict(files, **{"scripts/grade.py": "0"})),
                             "the grader changed (scripts/grade.py)")
            many = dict(files, **{f: "0" for f in sorted(files)[:5]})
            self.assertEqual(self.resumed(sub, out, grading_files=many),
                             f"the grader changed ({', '.join(sorted(files)[:3])} and 2 more)")
            self.assertIn("graded sections changed", self.resumed(sub, out, graded_sections=["01_naive"]))
            self.assertEqual(self.resumed(sub, out, hidden_cases_sha256="0" * 64), "hidden cases added")
            self.assertEqual(self.resumed(sub, out, gpu=None), "graded on GPU before, now on no GPU (triage)")
            self.assertEqual(self.resumed(sub, out, gpu=grade.CPU_MODEL), "graded on GPU before, now on the CPU model")
            self.assertEqual(self.resumed(sub, out, sandboxed=True), "graded unsandboxed before, now sandboxed")
            self.assertEqual(self.resumed(sub, out, timeout_s=60), "timeout 10 s before, now 60 s")
            self.assertIn("another folder", self.resumed(sub, out, path="/elsewhere/alice"))
            (sub / "labs" / "02_v1_tile.cu").write_text("// mine, fixed\n")
            (sub / "labs" / "03_v2_loop_order.cu").write_text("// new\n")
            (sub / "labs" / "01_naive.cu").unlink()
            self.assertEqual(self.resumed(sub, out), "labs/02_v1_tile.cu changed; labs/03_v2_loop_order.cu handed in "
                                                     "now; labs/01_naive.cu no longer handed in")
            self.assertEqual(grade.resume_reason(out / "bob", sub, {}, SECTIONS), ("no grade before", None))
            # the commit is not compared: a tree whose labs/ changed since (uncommitted) keeps its grades
            (sub / "labs" / "01_naive.cu").write_text("// mine\n")
            (sub / "labs" / "02_v1_tile.cu").write_text("// mine\n")
            (sub / "labs" / "03_v2_loop_order.cu").unlink()
            self.assertIsNone(self.resumed(sub, out, git_sha="abc-dirty"))
            # a grade from before the grader's files were recorded: which grader made it is not known
            old = json.loads((out / "alice" / "grade.json").read_text())
            del old["grading_files"]
            (out / "alice" / "grade.json").write_text(json.dumps(old))
            grade.mark_complete(out / "alice")
            self.assertEqual(self.resumed(sub, out, grading_files=files), "graded before the grader's files were recorded")

    def test_a_grading_cut_short_is_never_kept(self):
        # build() keeps the last grade's reports until run() writes new ones: a class stopped between
        # the two leaves a grade.json that looks finished, for files that may not be its own
        with tempfile.TemporaryDirectory() as tmp:
            sub, out = submission(Path(tmp, "subs", "dave")), Path(tmp, "out")
            stand_in_grade(sub, out, on_gpu=False)
            before = (out / "dave" / "grade.json").read_bytes()
            g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
            g.build(sub, out, SECTIONS, None)  # ... and stopped before its run
            self.assertEqual((out / "dave" / "grade.json").read_bytes(), before)
            self.assertEqual(self.resumed(sub, out), "its last grading did not finish")
            stand_in_grade(sub, out, on_gpu=False)
            self.assertIsNone(self.resumed(sub, out))
            # stopped as build() empties the folder, at its first folder, whatever order the disk lists them in
            real_iterdir = Path.iterdir
            dots_last = lambda folder: iter(sorted(real_iterdir(folder), key=lambda e: e.name.startswith(".")))

            def stopped(*args, **kw):
                raise KeyboardInterrupt
            with mock.patch.object(Path, "iterdir", dots_last), mock.patch.object(grade.shutil, "rmtree", stopped):
                with self.assertRaises(KeyboardInterrupt):
                    g.build(sub, out, SECTIONS, None)
            self.assertEqual(self.resumed(sub, out), "its last grading did not finish")
            stand_in_grade(sub, out, on_gpu=False)
            # a grade.json written after its mark (reports cut short mid-way, or edited) is not the finished one
            report = json.loads(before)
            (out / "dave" / "grade.json").write_text(json.dumps(report))
            self.assertEqual(self.resumed(sub, out), "its last grading did not finish")
            # a grade from before lab files were recorded: its files are not known, so never kept
            del report["lab_files"]
            (out / "dave" / "grade.json").write_text(json.dumps(report))
            grade.mark_complete(out / "dave")
            self.assertEqual(self.resumed(sub, out), "graded before lab files were recorded")

    def test_a_grade_records_its_files_and_is_marked_once_finished(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub, out = submission(Path(tmp, "subs", "alice"), "01_naive.cu", "02_v1_tile.cu"), Path(tmp, "out")
            report = stand_in_grade(sub, out, on_gpu=True)
            self.assertEqual(report["lab_files"], {f"labs/{n}": grade.file_digest(sub / "labs" / n)
                                                   for n in ("01_naive.cu", "02_v1_tile.cu")})
            self.assertEqual((report["timeout_s"], report["hidden_cases_sha256"]), (10, None))
            self.assertTrue(grade.is_complete(out / "alice"))
            g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
            g.build(sub, out, SECTIONS, None)  # a regrade stopped before its run: its last reports stay, unmarked
            self.assertTrue((out / "alice" / "grade.json").is_file())
            self.assertFalse(grade.is_complete(out / "alice"))
            # and the class summary's row says it is the grade from before
            summary, _ = grade.rebuild_class_summary(out)
            self.assertTrue(rows(summary)[0]["review"].startswith(grade.UNFINISHED), rows(summary))

    def test_a_linked_lab_file_is_recorded_unread(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "subs", "eve"))
            secret = Path(tmp, "secret.cu")
            secret.write_text("answer\n")
            (sub / "labs" / "02_v1_tile.cu").symlink_to(secret)
            found = grade.scan_submission(sub, SECTIONS)[0]
            digests = grade.lab_digests(found, sub)
            self.assertTrue(digests["labs/02_v1_tile.cu"].startswith("not read: "))
            secret.write_text("another answer\n")  # still refused unread: the same grade
            self.assertEqual(grade.lab_digests(found, sub), digests)


# A stand-in student program: writes its result record where --json says (the grade folder), then
# tries what a sandboxed program must not do; each attempt's outcome goes into the record.
HOSTILE = """import json, sys
rec, outside = sys.argv[sys.argv.index("--json") + 1], sys.argv[-1]
tried = {"read": {}}
try:
    open(outside, "w").write("pwned")
    tried["outside"] = "written"
except OSError as e:
    tried["outside"] = type(e).__name__
for path in sys.argv[sys.argv.index("--read") + 1:-1]:
    try:
        tried["read"][path] = open(path).read()
    except OSError as e:
        tried["read"][path] = type(e).__name__
tried["interfaces"] = [line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]]
json.dump([{"build": "lab", "variant": "kernels", "tried": tried,
            "check": {"passed": True, "rows_checked": 1, "verdict": "fine"}}], open(rec, "w"))
"""


class Sandbox(unittest.TestCase):
    """Under bubblewrap a student's program writes only its grade folder, has no network, and dies
    with its run; where bwrap cannot run here the test says so (skipped), as the grader does."""

    def setUp(self):
        why = grade.sandbox_problem()
        if why:
            self.skipTest(why)

    def test_a_fenced_case_writes_its_record_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as tmp:
            work, elsewhere = Path(tmp, "grades", "alice"), Path(tmp, "elsewhere")
            work.mkdir(parents=True)
            elsewhere.mkdir()
            prog = Path(tmp, "hostile.py")
            prog.write_text(HOSTILE)
            kept = {}

            def run_limited(cmd, timeout):
                self.assertEqual(cmd[0], grade.SANDBOX_TOOL)
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                rec = Path(cmd[cmd.index("--json") + 1])
                if rec.exists():
                    kept.update(json.loads(rec.read_text())[-1]["tried"])
                return r.returncode, r.stdout + r.stderr, 0.1
            g = grade.Grader(ROOT, ROOT / "build", run_limited, None, None, None, dict, print, sandbox=True)
            peer = Path(tmp, "grades", "bob", "labs", "09_triton.py")  # a classmate's graded copy
            peer.parent.mkdir(parents=True)
            peer.write_text("bob's kernel")
            answers = [p for p in (ROOT / "solutions" / "09_triton.py", ROOT / "ch12" / "key" / "01_naive.md")
                       if p.is_file()]  # (a student release has neither)
            readable = [Path(tmp, "elsewhere", "notes.txt")]
            readable[0].write_text("anyone's")
            reads = [str(p) for p in [peer, *answers, *readable]]
            code, out, _, record_ok = g.run_case([sys.executable, prog], "kernels",
                                                 ["--read", *reads, str(elsewhere / "x")], 60, work)
            self.assertEqual(code, 0, out)
            self.assertTrue(record_ok, out)  # the record, in the grade folder, was written and read
            self.assertNotEqual(kept.get("outside"), "written")
            self.assertFalse((elsewhere / "x").exists())
            self.assertEqual(kept.get("interfaces"), ["lo"])  # no network: the loopback alone
            for path in [peer, *answers]:  # unseen: the grades beside its own, the answers
                self.assertEqual(kept["read"][str(path)], "FileNotFoundError", path)
            self.assertEqual(kept["read"][str(readable[0])], "anyone's")  # the rest of the machine, read-only

    def test_a_fenced_program_that_segfaults_crashed(self):
        from labcli.common import run_limited
        g = grade.Grader(ROOT, ROOT / "build", run_limited, None, None, None, dict, print, sandbox=True)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp, "grades", "alice")
            work.mkdir(parents=True)
            crash = [sys.executable, "-c", "import os, signal, sys; print('partial', flush=True); "
                     "os.kill(os.getpid(), signal.SIGSEGV)"]
            code, out, _, record_ok = g.run_case(crash, "kernels", [], 60, work)
        self.assertEqual(grade.classify(code, out, record_ok, sandboxed=True), "crashed (signal 11, SIGSEGV)")
        self.assertEqual(grade.crash_excerpt(code, out, True), "partial\nkilled by signal 11 (SIGSEGV)")

    def test_the_solution_run_for_comparison_sees_the_answers(self):
        g = grade.Grader(ROOT, ROOT / "build", None, None, None, None, dict, print, sandbox=True)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp, "grades", "alice")
            work.mkdir(parents=True)
            mine, theirs = g.launch(["prog"], None, work), g.launch(["sol"], None, work, student=False)
            self.assertIn(str(work.parent.resolve()), mine)
            self.assertNotIn(str(work.parent.resolve()), theirs[:theirs.index("--bind")])

    def test_a_timeout_ends_every_process_of_the_run(self):
        from labcli.common import run_limited
        with tempfile.TemporaryDirectory() as tmp:
            late = Path(tmp, "late")
            cmd = grade.sandbox_command(["sh", "-c", f"(sleep 2; touch {late}) & sleep 30"], tmp)
            code, _, _ = run_limited(cmd, 0.5)
            self.assertEqual(code, 124)
            time.sleep(3)
            self.assertFalse(late.exists())  # the background child died with the run

    def test_without_a_sandbox_the_run_is_unchanged(self):
        g = grade.Grader(ROOT, ROOT / "build", None, None, None, None, dict, print)
        self.assertEqual(g.launch(["prog", "--t", "1"], None, "/tmp"), ["prog", "--t", "1"])
        with mock.patch.object(grade.shutil, "which", return_value=None):
            self.assertIn("not installed", grade.sandbox_problem())


@needs_solutions
class SandboxThatHidesTheGpu(unittest.TestCase):
    """Where the GPU run that works unsandboxed fails inside the sandbox (a device node bubblewrap
    did not bind), auto grades unsandboxed and says why; --sandbox on refuses. No GPU needed: the
    probe runs are stand-ins."""

    def grade(self, *extra, gpu=True, sandbox=None):
        import importlib.machinery
        import importlib.util
        from labcli.common import LabError
        loader = importlib.machinery.SourceFileLoader("lab_driver", str(ROOT / "scripts" / "lab"))
        driver = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_driver", loader))
        loader.exec_module(driver)

        def run_limited(cmd, timeout):  # the GPU is there, but not inside the fence
            if str(cmd[0]) == grade.SANDBOX_TOOL:
                return 1, "CUDA error: no CUDA-capable device is detected\n", 0.1
            return 0, "PASS\n", 0.1
        with tempfile.TemporaryDirectory() as tmp:
            submission(Path(tmp, "alice"), "09_triton.py")
            a = driver.parse(["grade", str(Path(tmp, "alice")), "--sections", "09", "--out", str(Path(tmp, "grades")),
                              *extra])
            staged = {"report": {}, "built": {}}
            with mock.patch.object(student, "run_limited", run_limited), mock.patch.object(student, "build") as built, \
                    mock.patch.object(student, "has_gpu", return_value=gpu), \
                    mock.patch.object(grade, "sandbox_problem", return_value=sandbox), \
                    mock.patch.object(grade.Grader, "build", return_value=staged), \
                    mock.patch.object(grade.Grader, "run", return_value={"submission": "alice"}) as ran, \
                    mock.patch.object(grade, "rebuild_class_summary", return_value=("summary.csv", [])), \
                    mock.patch.object(grade, "total_text", return_value="0"), \
                    contextlib.redirect_stdout(io.StringIO()) as said:
                try:
                    code = a.fn(a)
                except LabError as e:
                    code = str(e)
            self.built = built.call_args_list
            return code, said.getvalue(), ran

    def test_without_a_gpu_the_solutions_are_not_built(self):
        """No GPU: nothing would time the solutions, so none is built; and without bubblewrap the
        triage says its compiles and unit tests run unsandboxed."""
        code, said, ran = self.grade(gpu=False, sandbox="bwrap is not installed (package bubblewrap)")
        self.assertEqual(code, 77, said)  # a GPU was wanted (no --no-gpu): these are not grades
        self.assertIn("lab: triage only (no NVIDIA GPU found (nvidia-smi lists none)): no case ran, the totals are "
                      "empty; grade on a GPU, or with --cpu for provisional grades on the CPU model (exit 77)",
                      said.strip().splitlines()[-1])
        self.assertEqual(self.built, [])
        self.assertIn("lab: no NVIDIA GPU found (nvidia-smi lists none); triage only: compiles, untouched stubs; "
                      "no case of the case lists is run", said)
        self.assertIn("not sandboxed (bwrap is not installed (package bubblewrap))", said)
        self.assertFalse(ran.call_args.args[3])  # on_gpu

    def test_auto_grades_unsandboxed_and_says_why(self):
        code, said, ran = self.grade()
        self.assertEqual(code, 0, said)
        self.assertIn("not sandboxed (the GPU run fails inside it: exit 1, CUDA error: no CUDA-capable device", said)
        self.assertNotIn("runs sandboxed", said)
        self.assertTrue(ran.called)

    def test_on_refuses_to_grade(self):
        code, said, ran = self.grade("--sandbox", "on")
        self.assertIn("--sandbox on: the GPU run fails inside it", str(code))
        self.assertFalse(ran.called)


class ExerciseUnitTests(unittest.TestCase):
    """A section whose case file names unit_tests (05, 06, 12) has its exercises' unit-test program
    built from the student's file and run as a case, with or without a GPU: 06's kernels never call
    the allocator, so a stub allocator must not get full marks."""

    def grade(self, on_gpu, tests_say=(1, "exercise allocator: 19 of 21 checks failed\nFAIL: 22 of 24 checks failed\n")):
        ran = []

        def run_limited(cmd, timeout):
            ran.append([str(c) for c in cmd])
            return tests_say if str(cmd[0]).endswith("lab_exercises_06_paged") else (0, "PASS", 0.1)[:2]
        data = {"section": "06_paged", "variants": ["paged"], "unit_tests": "exercises_06_paged",
                "cases": [{"name": f"T={n}", "args": ["--t", str(n)]} for n in (1, 2, 3)]}

        class Grader(StandInGrader):
            def run_case(self, exe, variant, args, timeout, workdir, n=0, student=True, cpu_model=False):
                return 0, "PASS", 0.1, True
        g = Grader(ROOT, ROOT / "build", lambda cmd, timeout: run_limited(cmd, timeout) + (0.1,),
                   make_labs.make_stub, lambda s, hidden: data, student.expand_cases, dict, print,
                   program=lambda s, sol, build_dir=None, labs_dir=None: ["prog"])
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "frank"), "05_decode.cu", "06_paged.cu")
            r = g.grade(sub, Path(tmp, "grades"), ["05_decode", "06_paged"], ["06_paged"], None, 10, on_gpu,
                        "GPU" if on_gpu else None, "abc", lambda msg: None)
            md = Path(tmp, "grades", "frank", "grade.md").read_text()
        return r["sections"]["06_paged"], ran, md

    def test_a_failing_allocator_costs_its_share(self):
        sec, ran, md = self.grade(True)
        self.assertTrue(any(c[0].endswith("build/bin/lab_exercises_06_paged") for c in ran), ran)
        unit = sec["cases"][0]
        self.assertEqual((unit["case"], unit["status"], unit["weight"]), (grade.UNIT_TESTS, "failed its checks", 1.0))
        self.assertEqual(sec["correctness"], 75.0)  # 3 cases of weight 1 pass; the unit tests weigh a quarter
        self.assertIn("exercise allocator: 19 of 21 checks failed", md)
        self.assertIn("build/bin/lab_exercises_06_paged", md)
        sec, _, _ = self.grade(True, (0, "PASS: 0 of 24 checks failed\n"))
        self.assertEqual((sec["cases"][0]["status"], sec["correctness"]), ("pass", 100.0))
        sec, _, _ = self.grade(True, (124, "killed after 10 s\n"))  # an allocator that loops forever
        self.assertEqual((sec["cases"][0]["status"], sec["correctness"]), ("timeout", 75.0))

    def test_they_run_without_a_gpu(self):
        sec, ran, md = self.grade(False)
        self.assertEqual(sec["status"], grade.NOT_RUN)
        self.assertEqual([c[0].rsplit("/", 1)[-1] for c in ran], ["lab_exercises_06_paged"])  # no GPU case ran
        self.assertEqual(sec["cases"][0]["status"], "failed its checks")
        self.assertIn("The exercises' unit tests (run on the CPU): failed its checks.", md)
        self.assertIn("06 compiled (unit tests: failed its checks)",
                      grade.section_states({"graded_sections": ["06_paged"], "sections": {"06_paged": sec}}))

    def test_the_program_is_built_from_the_students_file(self):
        builds = []
        def step(cmd, env):
            builds.append([str(c) for c in cmd])
            return 0, ""
        g = grade.Grader(ROOT, ROOT / "build", None, None, None, None, dict, print)
        with mock.patch.object(grade, "build_step", step), mock.patch.object(grade, "read_dependencies",
                                                                              return_value=[]):
            built = g.build_submission(Path("labs"), Path("build"), ["06_paged"], {"06_paged": "exercises_06_paged"})
        self.assertIn("-DLAB_BUILD_EXERCISE_TESTS=ON", builds[0])
        with tempfile.TemporaryDirectory() as tmp:  # its depfile is in tests/ (the folder that defines it)
            obj = Path(tmp, "tests", "CMakeFiles", "lab_exercises_06_paged.dir")
            obj.mkdir(parents=True)
            (obj / "t.cu.o.d").write_text("x.o: /a/06_paged.cu /repo/tests/host_checks.h\n")
            with mock.patch.object(grade.shutil, "which", lambda _: None):
                self.assertEqual(grade.read_dependencies(tmp, "exercises_06_paged"),
                                 ["/a/06_paged.cu", "/repo/tests/host_checks.h"])
        self.assertEqual(set(built), {"06_paged", "exercises_06_paged"})
        self.assertIn("lab_exercises_06_paged", builds[1])


class SectionsThatIncludeAnother(unittest.TestCase):
    def test_a_lab_that_includes_a_lab_not_handed_in_is_not_built(self):
        known = ["05_decode", "06_paged", "07_sliding_window", "08_tma_skeleton"]
        with tempfile.TemporaryDirectory() as tmp:
            sub = Path(tmp, "frank")
            (sub / "labs").mkdir(parents=True)
            (sub / "labs" / "06_paged.cu").write_text('#include "05_decode.cu"\nint main() {}\n')
            g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
            r = g.grade(sub, Path(tmp, "grades"), known, ["06_paged"], None, 10, False, None, "abc", lambda msg: None)
            sec = r["sections"]["06_paged"]
            said = "06_paged includes labs/05_decode.cu, which is not in the submission: hand it in with 06"
            self.assertEqual(sec["status"], "compile error")
            self.assertEqual(sec["needs_lab"], "05_decode")
            self.assertIn(said, sec["log_excerpt"])
            md = Path(tmp, "grades", "frank", "grade.md").read_text()
            self.assertIn(said, md)
            self.assertNotIn("scripts/lab check 06", md)  # it builds in their checkout: no help there
            self.assertEqual(grade.missing_lab(sub / "labs" / "06_paged.cu", known), "05_decode")
            (sub / "labs" / "05_decode.cu").write_text("// mine\n")
            self.assertIsNone(grade.missing_lab(sub / "labs" / "06_paged.cu", known))


class ClassIntake(unittest.TestCase):
    def test_a_section_few_handed_in_is_named(self):
        handed = {f"subs/{n}": {"01_naive": Path(n)} for n in "abcdefg"}
        handed["subs/frank"] = {"01_naive": Path("f"), "06_paged": Path("f6")}
        self.assertEqual(grade.section_takers(handed, ["01_naive", "06_paged"]),
                         ["01_naive: handed in by 8 of 8", "06_paged: handed in by 1 of 8 (frank); fewer than half the class"])
        # an untouched stub is not handed in
        self.assertEqual(grade.section_takers(handed, ["06_paged"], lambda path, s: True),
                         ["06_paged: handed in by 0 of 8; fewer than half the class"])

    def test_the_students_copy_wins_over_an_untouched_stub(self):
        is_stub = lambda path, s: path.read_text() == "stub\n"
        with tempfile.TemporaryDirectory() as tmp:
            a = Path(tmp, "a")  # the stub and a browser's copy of the work
            a.mkdir()
            (a / "01_naive.cu").write_text("stub\n")
            (a / "01_naive (1).cu").write_text("mine\n")
            (a / "._01_naive.cu").write_text("mac metadata")  # not the student's: not listed
            found, ignored, notes, intake = grade.submission_notes(a, SECTIONS, is_stub)
            self.assertEqual(found["01_naive"].name, "01_naive (1).cu")
            self.assertEqual(notes, ["01_naive.cu: ignored (an untouched stub); 01_naive (1).cu is the 01_naive file graded"])
            self.assertEqual(ignored, ["01_naive.cu"])
            self.assertEqual(grade.submission_notes(a, SECTIONS)[0]["01_naive"].name, "01_naive.cu")  # without is_stub
            b = Path(tmp, "b")  # the release's labs/ and the work beside it
            (b / "labs").mkdir(parents=True)
            (b / "labs" / "01_naive.cu").write_text("stub\n")
            (b / "01_naive.cu").write_text("mine\n")
            found, ignored, notes, _ = grade.submission_notes(b, SECTIONS, is_stub)
            self.assertEqual(found["01_naive"], b / "01_naive.cu")
            self.assertEqual(notes, ["labs/01_naive.cu: ignored (an untouched stub); 01_naive.cu is the 01_naive file graded"])
            (b / "01_naive.cu").write_text("stub\n")  # both stubs: the first, as before
            self.assertEqual(grade.submission_notes(b, SECTIONS, is_stub)[0]["01_naive"], b / "labs" / "01_naive.cu")

    def test_a_class_folder_is_seen_as_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            for n in ("alice", "bob"):
                submission(Path(tmp, "submissions", n))
            Path(tmp, "submissions", "notes").mkdir()
            self.assertEqual([f.name for f in grade.submission_folders(Path(tmp, "submissions"), SECTIONS)], ["alice", "bob"])
            self.assertEqual(grade.submission_folders(Path(tmp, "submissions", "alice"), SECTIONS), [])


class StubRecognition(unittest.TestCase):
    """An untouched stub is named so whether it is today's or one the students got from an older
    commit, and whatever its line endings; one edited character makes it the student's work."""

    def test_stubs_of_any_commit(self):
        g = grade.Grader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, None, print)
        today = stub_of(self, "01_naive.cu")  # labs/01_naive.cu may hold the student's work by now
        log = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%H", "--", "labs/01_naive.cu"],
                             capture_output=True, text=True).stdout.split()
        if not (ROOT / "solutions").is_dir() and not log:
            self.skipTest("a release without git history: the grader knows no stub here")
        older = [subprocess.run(["git", "-C", str(ROOT), "show", f"{c}:labs/01_naive.cu"], capture_output=True).stdout
                 for c in log[1:]]
        older = [t for t in older if t and t != today]
        with tempfile.TemporaryDirectory() as tmp:
            def handed_in(text):
                path = Path(tmp, "01_naive.cu")
                path.write_bytes(text)
                return g.is_stub(path, "01_naive")
            self.assertTrue(handed_in(today))
            self.assertTrue(handed_in(today.replace(b"\n", b"\r\n")))
            self.assertFalse(handed_in(today.replace(b"return", b"return ", 1)))
            if not older:
                self.skipTest("this clone holds one version of labs/01_naive.cu")
            self.assertTrue(handed_in(older[-1]))


def stub_of(test, name):
    """labs/NAME as generated (bytes), never the student's work in it; the test is skipped where
    nothing tells (a release without git, its lab edited)."""
    stub = make_labs.generated_stub(ROOT / "labs" / name)
    if stub is None:
        test.skipTest(f"labs/{name} holds edits and nothing here tells its stub (no solutions/, no git history)")
    return stub


def filled_in(name):
    """A section's stub with every exercise done as the solution does it (its hints kept): what a
    student who changed nothing else hands in. Returns (that text, the stub, its regions)."""
    solution = (ROOT / "solutions" / name).read_text()
    regions = []
    stub = make_labs.make_stub(solution, name, regions=regions).splitlines()
    c = "#" if name.endswith(".py") else "//"
    begin, end, stub_line, comment = make_labs.SYNTAX[Path(name).suffix]
    answers, code, inside, leading = [], [], False, False
    for line in solution.splitlines():
        if begin.match(line):
            inside, leading, code = True, True, []
        elif end.match(line):
            inside = False
            answers.append(code)
        elif inside and not (leading and comment.match(line)):
            leading = False
            if not stub_line.match(line):
                code.append(line)
    out, at = [], 0
    for (first, last), code in zip(regions, answers):
        todo = next(i for i in range(first, last) if stub[i].lstrip().startswith(f"{c} TODO("))
        out += stub[at:todo] + code
        at = last
    return "\n".join(out + stub[at:]) + "\n", "\n".join(stub) + "\n", regions


class EditsOutsideExercises(unittest.TestCase):
    """The grader names the lines where a handed-in file changes the given code (main, the harness
    call, the checks), the place where a self-check could be bypassed; filling the exercises,
    helpers next to them, re-indentation and Windows line ends are not such edits."""

    @needs_solutions
    def test_every_section_filled_in_changes_nothing_outside(self):
        for src in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.*")):
            text, stub, regions = filled_in(src.name)
            self.assertNotEqual(text, stub, src.name)
            self.assertEqual(grade.edits_outside_exercises(text, stub, regions), [], src.name)

    @needs_solutions
    def test_edits_of_given_code_are_named_by_line(self):
        text, stub, regions = filled_in("02_v1_tile.cu")
        lines = text.splitlines()
        main = next(i for i, l in enumerate(lines) if l.startswith("int main("))
        given = regions[0][0] - 2  # a line of given code above the first exercise
        while not lines[given].strip():
            given -= 1
        check = lambda ls: grade.edits_outside_exercises("\n".join(ls) + "\n", stub, regions)
        self.assertEqual(check(lines[:main + 1] + ["  return 0;"] + lines[main + 1:]), [(main + 2, main + 2)])
        deleted = lines[:given] + lines[given + 1:]
        after = next(i for i in range(given, len(deleted)) if deleted[i].strip())
        self.assertEqual(check(deleted), [(after + 1, after + 1)])  # a deletion: at the next line
        self.assertEqual(check(lines[:given] + ["int helper() { return 1; }"] + lines[given:]), [(given + 1, given + 1)])
        # inside: a changed line of the student's own code, a helper right after an exercise's code
        todo = next(i for i in range(len(lines)) if "rows_in_tile" in lines[i] and "LAB_HD" in lines[i])
        self.assertEqual(check(lines[:todo + 1] + ["  // my note"] + lines[todo + 1:]), [])
        region_end = next(i for i in range(todo, len(lines)) if not lines[i].strip())
        self.assertEqual(check(lines[:region_end] + ["LAB_HD int helper() { return 1; }"] + lines[region_end:]), [])
        # not edits: indentation, trailing spaces, blank lines, CRLF
        self.assertEqual(grade.edits_outside_exercises(
            "\r\n".join("    " + l + "  " for l in lines) + "\r\n\r\n", stub, regions), [])

    @needs_solutions
    def test_a_file_from_an_older_release_is_compared_with_its_own_stub(self):
        """The given code changed since the students' release: their file is compared with the stub
        they were handed (its exercise regions regenerated from that commit's solution), so the
        release's differences are not theirs."""
        g = grade.Grader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, None, print)
        for src in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.cu")):
            versions = g.stub_versions(src.stem)
            today = versions[0][0]
            older = [v for v, c in versions[1:] if v != today and g.exercise_regions(src.stem, src.suffix, v, c) is not None]
            if older:
                break
        else:
            self.skipTest("this clone holds no older stub that today's make_labs regenerates")
        lines = older[0].decode().splitlines()
        main = next(i for i, l in enumerate(lines) if l.startswith("int main("))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, src.name)
            path.write_text("\n".join(lines[:main + 1] + ["  return 0;"] + lines[main + 1:]) + "\n")
            self.assertEqual(g.edits_outside(path, src.stem), [(main + 2, main + 2)])

    @needs_solutions
    def test_the_report_and_the_class_summary_name_the_lines(self):
        g = grade.Grader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, None, print)
        text, _, _ = filled_in("01_naive.cu")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "01_naive.cu")
            path.write_text(text)
            self.assertEqual(g.edits_outside(path, "01_naive"), [])
            lines = text.splitlines()
            main = next(i for i, l in enumerate(lines) if l.startswith("int main("))
            path.write_text("\n".join(lines[:main + 1] + ["  puts(\"PASS\");", "  return 0;"] + lines[main + 1:]) + "\n")
            spans = g.edits_outside(path, "01_naive")
            self.assertEqual(spans, [(main + 2, main + 3)])
            report = recorded_report()
            report["sections"]["01_naive"]["edits_outside_exercises"] = spans
            self.assertIn(f"at lines {main + 2}–{main + 3} of the handed-in file", grade.render_markdown(report))
            grade.write_class_summary([report], Path(tmp, "class.csv"))
            self.assertEqual(rows(Path(tmp, "class.csv"))[0]["edited_outside_exercises"],
                             f"01_naive (lines {main + 2}–{main + 3})")


    @needs_solutions
    def test_a_copy_of_the_solution_is_named_as_one_for_the_instructor(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "sub"), "02_v1_tile.cu")
            text = (ROOT / "solutions" / "01_naive.cu").read_text()
            (sub / "labs" / "01_naive.cu").write_text(text.replace("\n", "\r\n"))  # saved on Windows
            said = []
            g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
            r = g.grade(sub, Path(tmp, "grades"), SECTIONS, ["01_naive", "02_v1_tile"], None, 10, False, None, "abc",
                        said.append)
            sec = r["sections"]["01_naive"]
            self.assertEqual(sec["identical_to_solution"], "solutions/01_naive.cu")
            self.assertIn("sub: 01_naive: identical to the solution (solutions/01_naive.cu)", said)
            self.assertFalse([m for m in said if "01_naive: changed given code" in m], said)
            self.assertNotIn("identical_to_solution", r["sections"]["02_v1_tile"])
            grade.write_class_summary([r], Path(tmp, "class.csv"))
            self.assertEqual(rows(Path(tmp, "class.csv"))[0]["edited_outside_exercises"],
                             "01_naive (identical to the solution, solutions/01_naive.cu); 02_v1_tile (lines 1)")
            self.assertNotIn("solutions/", Path(tmp, "grades", "sub", "grade.md").read_text())  # the student's report

def passing_runs(cmd, timeout):
    """A stand-in run that passes: exit 0 and a passing record (what a forged record looks like too)."""
    rec = Path(cmd[cmd.index("--json") + 1])
    rec.write_text(json.dumps([{"build": "lab", "check": {"passed": True, "rows_checked": 4, "verdict": ""}}]))
    return 0, "PASS", 0.1


ONE_CASE = {"section": "01_naive", "variants": ["kernels"], "cases": [{"name": "T=1", "args": ["--t", "1"]}]}

# Code a student could put in an exercise region to write a passing record and end the run before
# the check: it closes the kernel, runs at file scope before main, then reopens a dummy function.
FORGED = ['  }',
          '  static int forged = [] { std::FILE* f = std::fopen("record.json", "w"); std::fputs("[]", f);',
          '    std::exit(0); return 0; }();',
          '  void reopened() {']


class ForgedResults(unittest.TestCase):
    """The self-check runs in the student's own program, which writes the record the grader trusts:
    code that leaves its exercise region's scope, or does file or process I/O, is flagged for the
    instructor's review (the score stands as computed)."""

    def region_of(self, text, stub, regions, k=0):
        """(first, end) 0-based of region k's lines in a handed-in text."""
        spans, _ = grade.exercise_spans(text, stub, regions)
        return spans[k]

    @needs_solutions
    def test_every_section_filled_in_has_nothing_to_review(self):
        for src in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.*")):
            text, stub, regions = filled_in(src.name)
            spans, added = grade.exercise_spans(text, stub, regions)
            self.assertNotIn(None, spans, src.name)
            self.assertEqual(added, [], src.name)
            self.assertEqual(grade.scope_leaks(text, spans, src.suffix), [], src.name)
            self.assertEqual(grade.io_lines(text, [(a + 1, b) for a, b in spans], src.suffix), [], src.name)

    @needs_solutions
    def test_code_that_closes_its_function_and_writes_the_record_is_flagged(self):
        g = grade.Grader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, None, print)
        text, stub, regions = filled_in("01_naive.cu")
        lines = text.splitlines()
        first, _ = self.region_of(text, stub, regions)
        at = first + 1  # right after the region's EXERCISE line
        # braces and calls in comments and literals are no scope and no I/O
        harmless = ['  (void)"}"; (void)\'{\';  // } std::exit(1) fopen', '  /* } */ (void)R"x(})x";']
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "01_naive.cu")
            path.write_text("\n".join(lines[:at] + harmless + lines[at:]) + "\n")
            checks = g.forgery_checks(path, "01_naive")
            self.assertEqual((checks["exercise_leaves_scope"], checks["exercise_io"], checks["edits_outside_exercises"]),
                             ([], [], []))
            path.write_text("\n".join(lines[:at] + FORGED + lines[at:]) + "\n")
            checks = g.forgery_checks(path, "01_naive")
            self.assertEqual(checks["exercise_leaves_scope"], [(at + 1, at + 4)])
            self.assertEqual(checks["exercise_io"], [(at + 2, at + 3)])
            self.assertEqual(checks["edits_outside_exercises"], [(at + 1, at + 4)])  # counted as an edit outside
            why = grade.review_reasons(checks)
            self.assertIn(f"exercise code leaves its scope (lines {at + 1}–{at + 4})", why)
            self.assertIn(f"exercise code does file or process I/O (lines {at + 2}–{at + 3})", why)
            self.assertNotIn("changed given code", why)  # the same lines, said once

    @needs_solutions
    def test_an_edit_of_main_that_writes_the_record_says_so(self):
        g = grade.Grader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, None, print)
        text, _, _ = filled_in("01_naive.cu")
        lines = text.splitlines()
        main = next(i for i, l in enumerate(lines) if l.startswith("int main("))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "01_naive.cu")
            path.write_text("\n".join(lines[:main + 1] + ['  std::FILE* f = std::fopen(argv[argc - 1], "w");']
                                      + lines[main + 1:]) + "\n")
            checks = g.forgery_checks(path, "01_naive")
            self.assertEqual(checks["given_code_io"], [(main + 2, main + 2)])
            self.assertEqual(grade.review_reasons(checks), f"changed given code (lines {main + 2}); changed given "
                                                            f"code does file or process I/O (lines {main + 2})")
            # a deletion is placed at the next line (here the harness call, which names argv): no I/O of the student's
            path.write_text("\n".join(lines[:main + 1] + lines[main + 2:]) + "\n")
            checks = g.forgery_checks(path, "01_naive")
            self.assertTrue(checks["edits_outside_exercises"])
            self.assertEqual(checks["given_code_io"], [])

    def test_python_code_at_module_level_or_doing_io_is_flagged(self):
        stub = ("def f(x):\n    # EXERCISE a: double it\n    # TODO(a): your code here.\n    # and fails.\n"
                "    return x\n")
        regions = [(1, 4)]
        mine = ("def f(x):\n    # EXERCISE a: double it\n    # we never open( a file\n    x = 2 * x\n"
                "    s = 'import os'\n    return x\n")
        spans, _ = grade.exercise_spans(mine, stub, regions)
        self.assertEqual(spans, [(1, 5)])
        self.assertEqual(grade.scope_leaks(mine, spans, ".py"), [])
        self.assertEqual(grade.io_lines(mine, [(2, 5)], ".py"), [])  # a comment, a string's text
        # module-level code run at import, then a dummy function that takes the given code's lines
        forged = ("def f(x):\n    # EXERCISE a: double it\n    x = 2 * x\nimport os\nos._exit(0)\ndef g(x):\n"
                  "    x = x\n    return x\n")
        spans, _ = grade.exercise_spans(forged, stub, regions)
        self.assertEqual(spans, [(1, 7)])
        self.assertEqual(grade.scope_leaks(forged, spans, ".py"), [(4, 7)])
        self.assertEqual(grade.io_lines(forged, [(2, 7)], ".py"), [(4, 5)])
        inside = "def f(x):\n    # EXERCISE a: double it\n    open('record.json', 'w').write('[]')\n    return x\n"
        spans, _ = grade.exercise_spans(inside, stub, regions)
        self.assertEqual(grade.io_lines(inside, [(spans[0][0] + 1, spans[0][1])], ".py"), [(3, 3)])

    @needs_solutions
    def test_a_flagged_section_is_named_for_review_everywhere(self):
        text, stub, regions = filled_in("01_naive.cu")
        lines = text.splitlines()
        at = self.region_of(text, stub, regions)[0] + 1
        said = []
        g = StandInGrader(ROOT, ROOT / "build", passing_runs, make_labs.make_stub, lambda s, hidden: ONE_CASE,
                          student.expand_cases, dict, print, program=lambda s, sol, build_dir=None, labs_dir=None: ["lab"])
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "mallory"))
            (sub / "labs" / "01_naive.cu").write_text("\n".join(lines[:at] + FORGED + lines[at:]) + "\n")
            r = g.grade(sub, Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, True, "GPU", "abc", said.append)
            sec = r["sections"]["01_naive"]
            self.assertEqual((sec["status"], r["total"]), ("graded", 100.0))  # the score stands: the instructor decides
            self.assertIn("exercise code leaves its scope", sec["review"])
            self.assertTrue([m for m in said if m.startswith("mallory: 01_naive: FOR REVIEW: exercise code leaves")], said)
            md = Path(tmp, "grades", "mallory", "grade.md").read_text()
            self.assertIn("| 01_naive | graded; for review: exercise code leaves its scope", md)
            self.assertIn("**For review**: exercise code leaves its scope", md)
            grade.write_class_summary([r], Path(tmp, "class.csv"))
            self.assertEqual(rows(Path(tmp, "class.csv"))[0]["review"], f"01_naive: {sec['review']}")
            self.assertEqual(grade.outcome_text(r), "100.0; FOR REVIEW: 01")
            self.assertIn("1 submission(s) to review", grade.review_line([r]))
            self.assertIn(": mallory (01)", grade.review_line([r]))
            clean = dict(r, sections={"01_naive": dict(sec, review=None)})
            self.assertIsNone(grade.review_line([clean]))


class HandedInFiles(unittest.TestCase):
    """What a handed-in file may be beside a student's lab: a release's stub copies, an untouched stub,
    a file saved as UTF-16, another section's file."""

    def test_a_releases_stub_copies_are_skipped_silently(self):
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "alice"))
            (sub / "labs" / ".stubs").mkdir()
            (sub / "labs" / ".stubs" / "01_naive.cu").write_text("stub\n")
            (sub / "labs" / "stubs.sha256").write_text("0  labs/01_naive.cu\n")
            found, ignored, notes, _ = grade.submission_notes(sub, SECTIONS)
            self.assertEqual((list(found), ignored, notes), (["01_naive"], [], []))

    @needs_solutions
    def test_an_untouched_stub_runs_no_case(self):
        ran = []
        solution = ROOT / "solutions" / "01_naive.cu"
        g = StandInGrader(ROOT, ROOT / "build", lambda cmd, t: ran.append(cmd) or passing_runs(cmd, t),
                          make_labs.make_stub, lambda s, hidden: ONE_CASE, student.expand_cases, dict, print,
                          program=lambda s, sol, build_dir=None, labs_dir=None: ["lab"])
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "alice"))
            (sub / "labs" / "01_naive.cu").write_text(make_labs.make_stub(solution.read_text(), solution.name))
            r = g.grade(sub, Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, True, "GPU", "abc", lambda m: None)
            md = Path(tmp, "grades", "alice", "grade.md").read_text()
        sec = r["sections"]["01_naive"]
        self.assertEqual(ran, [])
        self.assertEqual((sec["status"], sec["correctness"], sec["cases"], r["total"]), ("graded", 0.0, [], 0.0))
        self.assertEqual(grade.section_state(sec), "unmodified stub")
        self.assertIn("no exercise was attempted (0 points; its cases were not run)", md)
        self.assertNotIn("0 of 0 cases", md)

    @needs_solutions
    def test_a_file_saved_as_utf16_is_graded_as_its_text(self):
        text, _, _ = filled_in("01_naive.cu")
        solution = ROOT / "solutions" / "01_naive.cu"
        g = StandInGrader(ROOT, ROOT / "build", passing_runs, make_labs.make_stub, lambda s, hidden: ONE_CASE,
                          student.expand_cases, dict, print, program=lambda s, sol, build_dir=None, labs_dir=None: ["lab"])
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "alice"))
            (sub / "labs" / "01_naive.cu").write_bytes(text.replace("\n", "\r\n").encode("utf-16"))  # Windows' "Unicode"
            r = g.grade(sub, Path(tmp, "grades"), SECTIONS, ["01_naive"], None, 10, True, "GPU", "abc", lambda m: None)
            compiled = Path(tmp, "grades", "alice", "labs", "01_naive.cu").read_bytes()
            self.assertEqual(compiled, text.encode())  # what the compiler reads: its UTF-8 text
            stub = Path(tmp, "stub.cu")
            stub.write_bytes(make_labs.make_stub(solution.read_text(), solution.name).encode("utf-16"))
            self.assertTrue(g.is_stub(stub, "01_naive"))
        sec = r["sections"]["01_naive"]
        self.assertEqual((sec["status"], sec["edits_outside_exercises"], r["total"]), ("graded", [], 100.0))
        self.assertEqual(r["intake"], ["labs/01_naive.cu was saved as UTF-16; graded as its UTF-8 text (save it as UTF-8)"])

    @needs_solutions
    def test_another_sections_file_is_named_as_such(self):
        said = []
        with tempfile.TemporaryDirectory() as tmp:
            sub = submission(Path(tmp, "alice"), "01_naive.cu")
            (sub / "labs" / "02_v1_tile.cu").write_text(filled_in("01_naive.cu")[0])
            g = StandInGrader(ROOT, ROOT / "build", None, make_labs.make_stub, None, None, dict, print)
            r = g.grade(sub, Path(tmp, "grades"), SECTIONS, ["01_naive", "02_v1_tile"], None, 10, False, None, "abc",
                        said.append)
            md = Path(tmp, "grades", "alice", "grade.md").read_text()
        sec = r["sections"]["02_v1_tile"]
        self.assertEqual((sec["status"], sec["holds_section"]), ("compile error", "01_naive"))
        self.assertIn("02_v1_tile.cu holds section 01_naive's code", sec["log_excerpt"])
        self.assertNotIn("edits_outside_exercises", sec)  # not 60 line ranges of "edits"
        self.assertIn("Not built: 0 points. 02_v1_tile.cu holds section 01_naive's code", md)
        self.assertIn("alice: 02_v1_tile: compile error (02_v1_tile.cu holds section 01_naive's code, by its name line: "
                      "hand in the 02_v1_tile file)", said)
        self.assertEqual(r["sections"]["01_naive"]["status"], grade.NOT_RUN)  # "// mine": no name line, graded


class CompileErrorReport(unittest.TestCase):
    def test_a_file_that_does_not_compile_names_its_edits_of_the_given_code_too(self):
        report = recorded_report()
        report["sections"]["02_v1_tile"]["edits_outside_exercises"] = [(40, 41)]
        md = grade.render_markdown(report)
        section = md[md.index("## 02_v1_tile"):]
        self.assertIn("Does not compile", section)
        self.assertIn("Changed outside the exercise regions, at lines 40–41 of the handed-in file", section)


class BuildFolderPaths(unittest.TestCase):
    """A grade folder whose path the build tools mishandle ("o'brien": Ninja reads it as two paths in
    a depfile) is compiled in a build-safe folder of --out; its grade keeps its name and folder."""

    def build(self, names, deps=lambda build_dir, s: None):
        configured = []

        def step(cmd, env):
            cmd = [str(c) for c in cmd]
            if "-B" in cmd:
                configured.append((cmd[cmd.index("-B") + 1], next(c for c in cmd if c.startswith("-DLAB_LABS_DIR="))))
            elif "--target" in cmd:  # a build: the program it makes
                bin_dir = Path(cmd[cmd.index("--build") + 1], "bin")
                bin_dir.mkdir(parents=True, exist_ok=True)
                (bin_dir / cmd[cmd.index("--target") + 1]).write_text("program")
            return 0, ""
        g = grade.Grader(ROOT, ROOT / "build", None, make_labs.make_stub, lambda s, hidden: {}, None, dict, print)
        reports = {}
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(grade, "build_step", step), \
                mock.patch.object(grade, "read_dependencies", deps):
            out = Path(tmp, "grades")
            for name in names:
                sub = submission(Path(tmp, "subs", name))
                reports[name] = g.grade(sub, out, SECTIONS, ["01_naive"], None, 10, False, None, "abc", lambda msg: None)
                folder = out / name
                self.assertTrue((folder / "build" / "bin" / "lab_01_naive").is_file(), name)  # its program, kept
                reports[name]["md"] = (folder / "grade.md").read_text()
            self.assertEqual(sorted(p.name for p in out.iterdir() if not p.name.startswith(".")), sorted(names))
            self.assertEqual(list(out.glob(".*/*/labs")), [])  # the build-safe copies are gone
        return configured, reports

    def test_a_name_the_build_tools_mishandle_is_built_in_a_safe_folder(self):
        names = ["o'brien", "hank smith", "plain"]
        lab = lambda build_dir, s: [str(Path(build_dir).parent / "labs" / "01_naive.cu")]  # what nvcc read
        configured, reports = self.build(names, lab)
        self.assertEqual(len(configured), 3)
        for build_dir, labs_dir in configured:
            self.assertNotIn("'", build_dir + labs_dir)
        self.assertTrue(configured[1][0].endswith("/hank smith/build"), configured)  # a space is handled: as before
        for name in names:
            self.assertEqual(reports[name]["submission"], name)
            self.assertEqual(reports[name]["sections"]["01_naive"]["status"], grade.NOT_RUN)

    def test_a_missing_list_of_the_files_read_is_the_graders_problem(self):
        _, reports = self.build(["plain"])
        r = reports["plain"]
        self.assertEqual(r["sections"]["01_naive"]["status"], "not graded (grader problem)")
        self.assertIsNone(r["total"])
        self.assertNotIn("compile", grade.section_states(r).replace("compiled", ""))
        self.assertIn("a problem of the grading machine, not of your file", r["md"])
        self.assertNotIn("Does not compile", r["md"])
        self.assertEqual(grade.total_text(r), "no total (01 not graded (grader problem): regrade)")


class HungInTheSummary(unittest.TestCase):
    def test_a_section_whose_runs_timed_out_says_so_in_its_status(self):
        def report(name, statuses):
            cases = [{"case": f"c{i}", "variant": "v", "weight": 1, "status": st} for i, st in enumerate(statuses)]
            return {"submission": name, "total": 0.0, "gpu": "G", "graded_sections": ["02_v1_tile"],
                    "sections": {"02_v1_tile": {"status": "graded", "correctness": 0.0, "cases": cases}}}
        reports = [report("erin", ["timeout"] * 3 + [grade.AFTER_HANGS] * 19), report("fay", ["timeout", "pass"]),
                   report("gus", ["pass", "wrong answer"])]
        with tempfile.TemporaryDirectory() as tmp:
            grade.write_class_summary(reports, Path(tmp, "class.csv"))
            states = [r["02_v1_tile_status"] for r in rows(Path(tmp, "class.csv"))]
        self.assertEqual(states, ["graded (3 runs timed out, 19 not run after them)", "graded (1 run timed out)",
                                  "graded"])


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
        self.bad(dict(g, bugs=[{"bug": "x", "name": "b"}, {"bug": "x", "name": "b"}]), "bugs[1] 'b': duplicate name")
        cases.validate(dict(g, bugs=[{"bug": "x", "name": "b"}, {"bug": "y", "name": "b"}]), "f.json")  # "bug x: b", "bug y: b"
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

    def lab(self, *args, cwd=None):
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "grade", *map(str, args)],
                              capture_output=True, text=True, timeout=1200, cwd=cwd)

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
            self.assertIn("--allow-empty", r.stdout)
            self.assertNotIn("Traceback", r.stdout + r.stderr)
            self.assertFalse(out.exists())  # no grade written
            # one problem, one line; no --allow-empty advice where it would not help; "all" is a section list
            r = self.lab(Path(tmp, "does-not-exist"), "--no-gpu", "--sections", "all", "--out", out)
            self.assertEqual((r.returncode, r.stdout.count("\n")), (2, 1), r.stdout + r.stderr)
            self.assertIn("does-not-exist: no such folder; nothing written", r.stdout)
            self.assertNotIn("allow-empty", r.stdout)
            r = self.lab(subs / "empty", "--no-gpu", "--allow-empty", "--out", out, Path(tmp, "does-not-exist"))
            self.assertNotIn("allow-empty", r.stdout)

    def test_the_class_folder_given_as_one_submission_is_refused(self):
        """`scripts/lab grade submissions` for `submissions/*`: never the class graded as one student."""
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp, "submissions"), Path(tmp, "grades")
            for n in ("alice", "bob", "carol"):
                submission(subs / n)
            for extra in ([], ["--allow-empty"]):
                r = self.lab(subs, "--no-gpu", "--out", out, *extra)
                self.assertEqual((r.returncode, r.stdout.strip()),
                                 (2, f"lab: {subs} holds 3 submission folders: did you mean {subs}/*?; nothing written"),
                                 r.stderr)
                self.assertFalse(out.exists())

    def test_an_out_that_would_replace_a_submission_is_refused(self):
        """The grade folder of a submission is replaced whole: it must never be a submission."""
        with tempfile.TemporaryDirectory() as tmp:
            alice = submission(Path(tmp, "class3", "alice"))
            submission(Path(tmp, "class3", "bob"))
            for args, cwd in (([alice, "--out", alice.parent], None), ((["alice", "bob", "--out", "."]), alice.parent),
                              ([alice, "--out", alice / "grades"], None)):
                r = self.lab(*args, "--no-gpu", "--sections", "01", cwd=cwd)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("which is", r.stdout)
                self.assertIn("nothing written", r.stdout)
                self.assertNotIn("Traceback", r.stdout + r.stderr)
                self.assertEqual((alice / "labs" / "01_naive.cu").read_text(), "// mine\n")
                self.assertEqual(sorted(p.name for p in alice.parent.iterdir()), ["alice", "bob"])
                self.assertEqual(sorted(p.name for p in alice.iterdir()), ["labs"])

    def test_an_out_that_is_not_the_graders_is_refused(self):
        """A class summary the grader did not write, the repository's root or the file system's: one
        line, exit 2, nothing written or replaced."""
        with tempfile.TemporaryDirectory() as tmp:
            alice, out = submission(Path(tmp, "alice")), Path(tmp, "out")
            out.mkdir()
            Path(out, "class_summary.csv").write_text("keep\n")
            for args, cwd in (([alice, "--out", out], None), ([alice, "--out", "/"], None),
                              ([alice, "--out", ROOT], None), ([alice, "--out", ""], ROOT)):
                r = self.lab(*args, "--no-gpu", "--sections", "01", cwd=cwd)
                self.assertEqual((r.returncode, r.stdout.count("\n")), (2, 1), (args, r.stdout + r.stderr))
                self.assertIn("nothing written", r.stdout)
                self.assertNotIn("Traceback", r.stdout + r.stderr)
            self.assertEqual(sorted(p.name for p in out.iterdir()), ["class_summary.csv"])
            self.assertEqual(Path(out, "class_summary.csv").read_text(), "keep\n")

    def test_an_out_and_archives_among_the_submissions_are_skipped(self):
        """`scripts/lab grade subs/* --out subs/grades` grades the same twice (the rerun's glob holds
        grades/), and a zip beside the folder it unpacked to is skipped; a lone zip is refused."""
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp, "subs"), Path(tmp, "subs", "grades")
            stub = stub_of(self, "09_triton.py").decode()
            for folder in ("amy", "zack/zack"):  # zack.zip unpacked with unzip -d zack: a wrapper folder
                Path(subs, folder, "labs").mkdir(parents=True)
                Path(subs, folder, "labs", "09_triton.py").write_text(stub)
            Path(subs, "zack.zip").write_bytes(b"PK\x05\x06" + bytes(18))
            said = []
            for _ in range(2):
                r = self.lab(*sorted(subs.iterdir()), "--no-gpu", "--out", out)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                said.append(r.stdout)
                self.assertIn(f"zack.zip: not a folder; skipped (the folder {subs / 'zack'} is graded)", r.stdout)
                self.assertEqual(sorted(row["submission"] for row in rows(out / grade.SUMMARY)), ["amy", "zack"])
            self.assertNotIn("--out folder", said[0])
            self.assertIn("graded from the folder zack/ inside it", said[0])
            self.assertEqual(json.loads((out / "zack" / "grade.json").read_text())["sections"]["09_triton"]["status"],
                             grade.NOT_RUN)
            self.assertIn(f"{out}: the --out folder, not a submission; skipped", said[1])
            self.assertEqual(sorted(p.name for p in out.iterdir()), ["amy", "class_summary.csv", "zack"])
            # another grader-written folder in the glob: skipped too
            r = self.lab(*sorted(subs.iterdir()), "--no-gpu", "--out", Path(tmp, "elsewhere"))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"{out}: grades the grader wrote, not a submission; skipped", r.stdout)
            # a zip with no folder beside it is refused as before; so is grading grades alone
            r = self.lab(subs / "zack.zip", subs / "amy", "--no-gpu", "--out", out)
            self.assertEqual((r.returncode, r.stdout.strip()),
                             (2, f"lab: {subs / 'zack.zip'}: not a folder (unpack it into its own folder first: unzip -q "
                                 f"{subs / 'zack.zip'} -d {subs / 'zack'}); nothing written"))
            (subs / "kim.tar.gz").write_bytes(b"not unpacked")  # a tarball: the same, with tar's line
            r = self.lab(subs / "kim.tar.gz", "--no-gpu", "--out", out)
            self.assertEqual((r.returncode, r.stdout.strip()),
                             (2, f"lab: {subs / 'kim.tar.gz'}: not a folder (unpack it into its own folder first: "
                                 f"mkdir -p {subs / 'kim'} && tar xf {subs / 'kim.tar.gz'} -C {subs / 'kim'}); "
                                 "nothing written"))
            r = self.lab(out, "--no-gpu", "--out", out)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("no submission to grade", r.stdout)
            self.assertEqual(r.stdout.count("\n"), 1)
            self.assertNotIn("Traceback", r.stdout + r.stderr)

    def test_one_submission_that_breaks_the_grader_leaves_the_rest_graded(self):
        """An unforeseen error while grading one submission (an unreadable file, a full disk) names
        it and goes on: the others are graded, the summary is written, the exit is 1."""
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("lab_driver", str(ROOT / "scripts" / "lab"))
        driver = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_driver", loader))
        loader.exec_module(driver)
        real_build, real_run = grade.Grader.build, grade.Grader.run

        def flaky_build(self, path, *args, **kw):  # the compile half fails for one submission ...
            if path.name == "bad":
                raise OSError(28, "No space left on device")
            return real_build(self, path, *args, **kw)

        def flaky_run(self, staged, *args, **kw):  # ... and the run half for another
            if staged["report"]["submission"] == "worse":
                raise PermissionError(13, "Permission denied")
            return real_run(self, staged, *args, **kw)
        with tempfile.TemporaryDirectory() as tmp:
            stub = stub_of(self, "09_triton.py").decode()
            for name in ("good", "bad", "worse"):
                Path(tmp, "subs", name, "labs").mkdir(parents=True)
                Path(tmp, "subs", name, "labs", "09_triton.py").write_text(stub)
            out = Path(tmp, "grades")
            a = driver.parse(["grade", *(str(Path(tmp, "subs", n)) for n in ("bad", "worse", "good")), "--no-gpu",
                              "--sections", "09", "--out", str(out), "--build-jobs", "2"])
            with mock.patch.object(grade.Grader, "build", flaky_build), mock.patch.object(grade.Grader, "run", flaky_run), \
                    contextlib.redirect_stdout(io.StringIO()) as said:
                code = a.fn(a)
            self.assertEqual(code, 1, said.getvalue())
            self.assertIn("not graded: ", said.getvalue())
            self.assertIn("No space left on device", said.getvalue())
            self.assertIn("Permission denied", said.getvalue())
            self.assertIn("2 submission(s) not graded", said.getvalue())
            self.assertTrue((out / "good" / "grade.json").is_file())
            self.assertTrue((out / grade.SUMMARY).is_file())

    def test_submissions_compile_together_then_run_one_at_a_time(self):
        """--build-jobs N compiles N submissions at once; no case runs until every one is built, and
        the runs go one submission at a time, in the order given."""
        import importlib.machinery
        import importlib.util
        import threading
        loader = importlib.machinery.SourceFileLoader("lab_driver", str(ROOT / "scripts" / "lab"))
        driver = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_driver", loader))
        loader.exec_module(driver)
        real_build, real_run = grade.Grader.build, grade.Grader.run
        events, lock, active, most = [], threading.Lock(), [0], [0]

        def slow_build(self, path, *args, **kw):
            with lock:
                active[0] += 1
                most[0] = max(most[0], active[0])
            time.sleep(0.3)
            with lock:
                active[0] -= 1
                events.append(("built", path.name))
            return real_build(self, path, *args, **kw)

        def logged_run(self, staged, *args, **kw):
            events.append(("run", staged["report"]["submission"]))
            return real_run(self, staged, *args, **kw)
        names = ["s1", "s2", "s3", "s4"]
        with tempfile.TemporaryDirectory() as tmp:
            stub = stub_of(self, "09_triton.py").decode()
            for name in names:
                Path(tmp, "subs", name, "labs").mkdir(parents=True)
                Path(tmp, "subs", name, "labs", "09_triton.py").write_text(stub)
            a = driver.parse(["grade", *(str(Path(tmp, "subs", n)) for n in names), "--no-gpu", "--sections", "09",
                              "--out", str(Path(tmp, "grades")), "--build-jobs", "2"])
            with mock.patch.object(grade.Grader, "build", slow_build), mock.patch.object(grade.Grader, "run", logged_run), \
                    contextlib.redirect_stdout(io.StringIO()) as said:
                code = a.fn(a)
        self.assertEqual(code, 0, said.getvalue())
        self.assertIn("compiling 4 submission(s), 2 at a time", said.getvalue())
        self.assertEqual(most[0], 2)
        self.assertEqual([kind for kind, _ in events], ["built"] * 4 + ["run"] * 4)
        self.assertEqual([n for kind, n in events if kind == "run"], names)

    def test_resume_finishes_a_class_cut_short(self):
        """--resume keeps a grade finished under the same conditions for unchanged files, and grades
        the rest, each with its reason; a regrade stopped between its build and its run is not kept.
        Without --resume every submission is graded."""
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("lab_driver", str(ROOT / "scripts" / "lab"))
        driver = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_driver", loader))
        loader.exec_module(driver)
        real_run, ran = grade.Grader.run, []

        def stopped_at(name):  # Ctrl-C as that submission's cases begin
            def run(self, staged, *args, **kw):
                if staged["report"]["submission"] == name:
                    raise KeyboardInterrupt
                ran.append(staged["report"]["submission"])
                return real_run(self, staged, *args, **kw)
            return run
        names = ["s1", "s2", "s3"]
        with tempfile.TemporaryDirectory() as tmp:
            stub = stub_of(self, "09_triton.py").decode()
            for name in names:
                Path(tmp, "subs", name, "labs").mkdir(parents=True)
                Path(tmp, "subs", name, "labs", "09_triton.py").write_text(stub)
            out = Path(tmp, "grades")

            def lab(*extra, stop=None):
                ran.clear()
                a = driver.parse(["grade", *(str(Path(tmp, "subs", n)) for n in names), "--no-gpu", "--sections",
                                  "09", "--out", str(out), *extra])
                with mock.patch.object(grade.Grader, "run", stopped_at(stop)), \
                        mock.patch.object(student, "git_sha", return_value="abc1234"), \
                        contextlib.redirect_stdout(io.StringIO()) as said:
                    try:
                        code = a.fn(a)
                    except KeyboardInterrupt:
                        code = "interrupted"
                return code, said.getvalue()
            code, said = lab(stop="s3")
            self.assertEqual(code, "interrupted")  # s1 and s2 graded, s3 built only
            self.assertEqual(ran, ["s1", "s2"])
            # the grades finished are summed up, and the way on is said
            self.assertEqual([r["submission"] for r in rows(out / grade.SUMMARY)], ["s1", "s2"])
            self.assertIn(f"lab: 2 grade(s) in {out / grade.SUMMARY}; the same command with --resume grades the rest",
                          said)
            code, said = lab("--resume")
            self.assertEqual(code, 0, said)
            self.assertEqual(ran, ["s3"])
            self.assertIn("   s1: graded before, unchanged; kept (09 unmodified stub)\n", said)
            self.assertIn("   s3: regraded: its last grading did not finish\n", said)  # built, never run
            self.assertIn("--resume: 2 of 3 submission(s) kept", said)
            self.assertEqual([r["submission"] for r in rows(out / grade.SUMMARY)], names)
            self.assertRegex(said, r"\n   s1 +09 unmodified stub\n   s2 +09 unmodified stub\n   s3 ")  # in order
            code, said = lab("--resume")  # all finished: nothing to do but the summary
            self.assertEqual((code, ran), (0, []), said)
            self.assertIn("--resume: 3 of 3 submission(s) kept", said)
            self.assertNotIn("compiling", said)
            # a regrade stopped after the class is built: s2's and s3's last grades stay, unfinished
            self.assertEqual(lab(stop="s2")[0], "interrupted")
            Path(tmp, "subs", "s1", "labs", "09_triton.py").write_text(stub + "\n# mine\n")
            code, said = lab("--resume")
            self.assertEqual(ran, names, said)
            self.assertIn("   s1: regraded: labs/09_triton.py changed\n", said)
            self.assertIn("   s2: regraded: its last grading did not finish\n", said)
            self.assertIn("   s3: regraded: its last grading did not finish\n", said)
            code, said = lab("--resume", "--timeout", "30")
            self.assertEqual(ran, names, said)
            self.assertIn("   s1: regraded: timeout 120 s before, now 30 s\n", said)
            lab()
            self.assertEqual(ran, names)  # without --resume: all of them, as ever

    def test_the_grading_example_without_a_gpu_builds_nothing(self):
        """It needs a GPU: without one it says so before a build for nothing (minutes on a small machine)."""
        from types import SimpleNamespace
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(student, "has_gpu", return_value=False), \
                mock.patch.object(student, "build") as build, contextlib.redirect_stdout(io.StringIO()) as said:
            code = student.cmd_grading_example(SimpleNamespace(out=str(Path(tmp, "ge")), sections=["01"], gpus=1))
        self.assertEqual((code, build.call_count), (77, 0), said.getvalue())
        self.assertIn("lab: the grading example needs a GPU: no NVIDIA GPU found", said.getvalue())

    def test_the_grading_example_empties_only_its_own_folder(self):
        with tempfile.TemporaryDirectory() as tmp:
            course = Path(tmp, "course")
            submission(course / "submissions" / "alice")
            env = dict(os.environ, LAB_NO_BUILD="1", LAB_BUILD_DIR=str(Path(tmp, "build")))  # never the tree's build
            r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "grading-example", "--out", str(course),
                                "--sections", "01"], capture_output=True, text=True, timeout=600, env=env)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("not a grading example's folder", r.stdout)
            self.assertTrue((course / "submissions" / "alice" / "labs" / "01_naive.cu").is_file())

    def test_a_file_the_compiler_reads_from_outside_is_refused(self):
        """Real builds: an #include through a macro compiles nothing of the solution's, and a secret
        read the same way is named in grade.md, never quoted."""
        with tempfile.TemporaryDirectory() as tmp:
            sub, out = Path(tmp, "subs", "mallory"), Path(tmp, "grades")
            sub.mkdir(parents=True)
            secret = Path(tmp, "secret.txt")
            secret.write_text("password = hunter2\n")
            (sub / "01_naive.cu").write_text(f'#define SRC "{ROOT / "solutions" / "01_naive.cu"}"\n#include SRC\n')
            (sub / "02_v1_tile.cu").write_text(f'#define SECRET "{secret}"\n#include SECRET\n')
            r = self.lab(sub, "--no-gpu", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            report = json.loads((out / "mallory" / "grade.json").read_text())
            self.assertEqual(report["sections"]["01_naive"]["log_excerpt"], "labs/01_naive.cu: error: reads a file outside "
                             f"the submission: {(ROOT / 'solutions' / '01_naive.cu').resolve()}")
            self.assertEqual(report["sections"]["02_v1_tile"]["log_excerpt"], "labs/02_v1_tile.cu: error: reads a file "
                             f"outside the submission: {secret.resolve()}")
            for f in (out / "mallory").rglob("*"):
                if f.is_file():
                    self.assertNotIn(b"hunter2", f.read_bytes(), f)

    def test_triage(self):
        with tempfile.TemporaryDirectory() as tmp:
            subs, out = Path(tmp, "subs"), Path(tmp, "grades")
            (subs / "broken").mkdir(parents=True)
            (subs / "broken" / "01_naive.cu").write_text('#include "lab.cuh"\nint main(int argc, char** argv) { return lab::missing(argc); }\n')
            (subs / "stub").mkdir()
            solution = ROOT / "solutions" / "01_naive.cu"  # the stub as generated (labs/ may hold a student's work)
            # as a learning platform renames it: graded as labs/01_naive.cu, and still the stub
            (subs / "stub" / "stub_123456_01_naive.cu").write_text(make_labs.make_stub(solution.read_text(), solution.name))
            (subs / "unknown").mkdir()
            (subs / "unknown" / "notes.txt").write_text("hi")
            (subs / "unknown" / "naive.cu").write_text("x")
            # another "stub" (a Python section's: nothing to build), in another folder
            python_stub = Path(tmp, "sec2", "stub", "09_triton.py")
            python_stub.parent.mkdir(parents=True)
            solution = ROOT / "solutions" / "09_triton.py"
            python_stub.write_text(make_labs.make_stub(solution.read_text(), solution.name))
            r = self.lab(subs / "broken", subs / "stub", subs / "unknown", python_stub.parent, subs / "stub",
                         "--no-gpu", "--allow-empty", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("the same folder as", r.stdout)  # subs/stub given twice: graded once
            self.assertIn("graded as subs-stub", r.stdout)
            broken = json.loads((out / "broken" / "grade.json").read_text())
            # without --sections, every section handed in by the class counts for each submission; one
            # handed in only as an untouched stub (09 here) does not
            self.assertEqual(broken["graded_sections"], ["01_naive"])
            self.assertIn("graded sections (every one handed in; a missing one counts 0): 01_naive; 09_triton "
                          "handed in only as untouched stubs: not graded", r.stdout)
            sec = broken["sections"]["01_naive"]
            self.assertEqual(sec["status"], "compile error")
            self.assertIn("error", sec["log_excerpt"])
            self.assertIn("missing", sec["log_excerpt"])  # the compiler's own words
            self.assertIn("labs/01_naive.cu", sec["log_excerpt"])
            self.assertNotIn(str(out), sec["log_excerpt"])
            self.assertEqual(grade.section_score(sec), 0)
            self.assertEqual(broken["total"], 0.0)  # a compile error and a missing section: a known 0
            self.assertIn("Does not compile: 0 points", (out / "broken" / "grade.md").read_text())
            stub = json.loads((out / "subs-stub" / "grade.json").read_text())
            self.assertEqual(stub["sections"]["01_naive"]["status"], "not run (no GPU)")
            self.assertIsNone(stub["sections"]["01_naive"]["correctness"])  # no case was run
            self.assertEqual(stub["total"], 0.0)  # but an untouched stub scores 0, GPU or not
            self.assertTrue(stub["sections"]["01_naive"]["unmodified_stub"])
            self.assertEqual(stub["intake"], ["graded stub_123456_01_naive.cu as labs/01_naive.cu"])
            self.assertIn("   graded stub_123456_01_naive.cu as labs/01_naive.cu\n", r.stdout)
            md = (out / "subs-stub" / "grade.md").read_text()
            self.assertIn("| 01_naive | not run (no GPU), unmodified stub | – | – | – | 0.0 |", md)  # a known 0
            unknown = json.loads((out / "unknown" / "grade.json").read_text())
            self.assertEqual(sorted(unknown["ignored_files"]), ["naive.cu", "notes.txt"])
            self.assertEqual(unknown["misnamed"], ["naive.cu: not a lab file; expected labs/01_naive.cu"])
            self.assertEqual(unknown["total"], 0.0)
            self.assertNotIn(b"\r", (out / "class_summary.csv").read_bytes())
            table = {row["submission"]: row for row in rows(out / "class_summary.csv")}
            self.assertEqual(sorted(table), ["broken", "sec2-stub", "subs-stub", "unknown"])
            self.assertEqual([table["subs-stub"][k] for k in ("total", "01_naive", "01_naive_status")],
                             ["0.0", "0.0", "unmodified stub"])
            self.assertEqual([table["sec2-stub"][k] for k in ("total", "01_naive_status")], ["0.0", "missing"])
            self.assertNotIn("09_triton_status", table["sec2-stub"])
            self.assertEqual([table["broken"][k] for k in ("total", "01_naive", "01_naive_status")], ["0.0", "0.0", "compile error"])
            # the console's class summary names each section's state, not a total
            self.assertRegex(r.stdout, r"\n   broken +01 compile error\n")
            self.assertRegex(r.stdout, r"\n   subs-stub +01 unmodified stub\n")
            self.assertRegex(r.stdout, r"\n   unknown +01 missing\n")
            self.assertEqual(table["unknown"]["lab_files_not_graded"], "naive.cu")
            # the harness was built once, in --out, and linked: no submission compiled common/
            self.assertTrue((out / grade.HARNESS / "build" / "common" / "liblab_common.a").is_file())
            self.assertTrue((out / "subs-stub" / "build" / "bin" / "lab_01_naive").is_file())
            self.assertFalse((out / "subs-stub" / "build" / "common" / "CMakeFiles" / "lab_common.dir").exists())
            # of the build, only the programs stay (the objects and CMake's files are most of a grade
            # folder); the build logs stay, a failed build's too
            self.assertEqual([f.name for f in (out / "subs-stub" / "build").iterdir()], ["bin"])
            self.assertLessEqual({f.name for f in (out / "broken" / "build").iterdir()}, {"bin"})
            self.assertIn("missing", (out / "broken" / "build-01_naive.log").read_text())
            # regrading one submission updates its row and keeps the others'
            (subs / "broken" / "01_naive.cu").write_text("int main() { return 0; }\n")
            r = self.lab(subs / "broken", "--no-gpu", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            table = {row["submission"]: row for row in rows(out / "class_summary.csv")}
            self.assertEqual(sorted(table), ["broken", "sec2-stub", "subs-stub", "unknown"])
            self.assertEqual([table["broken"][k] for k in ("total", "01_naive_status")], ["", "not run (no GPU)"])
            # a whole file of its own is a change of the given code: named for review, on the console too
            self.assertRegex(r.stdout, r"\n   broken +01 compiled; FOR REVIEW: 01\n")
            # a late submission graded alone is graded over the class's sections: its 09, which no
            # one else handed in, is not graded (nor a column of the class summary), and it is said
            late = Path(tmp, "late")
            late.mkdir()
            (late / "09_triton.py").write_text((ROOT / "solutions" / "09_triton.py").read_text())
            r = self.lab(late, "--no-gpu", "--out", out)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(json.loads((out / "late" / "grade.json").read_text())["graded_sections"], ["01_naive"])
            self.assertIn("not graded, handed in now but not among them: 09_triton (to count it, grade the whole "
                          "class again with --sections 01 09)", r.stdout)
            self.assertNotIn("fewer than half", r.stdout)
            self.assertIn("graded sections (the class's, from the grades under --out; a missing one counts 0): "
                          "01_naive\n", r.stdout)
            table = {row["submission"]: row for row in rows(out / "class_summary.csv")}
            self.assertEqual(table["late"]["01_naive_status"], "missing")
            self.assertNotIn("09_triton", table["late"])
            self.assertNotIn("are not all over the same sections", r.stdout)


class GradeOnTheCpuModel(unittest.TestCase):
    """Real `scripts/lab grade --cpu` runs of section 01 (on one --out: the harness is built once):
    a triage of a correct lab, then --cpu --resume over it, the untouched stub and a lab whose
    exercise never ends at T_kv = 65, then --cpu --resume again."""
    TIMEOUT = "5"  # seconds a run: the hang costs one; every other run of 01 on the CPU model takes under 1 s

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        subs, cls.out = Path(cls.tmp.name, "subs"), Path(cls.tmp.name, "grades")
        text, stub, _ = filled_in("01_naive.cu")  # the solution's exercise code in the stub
        hang = text.replace("  // EXERCISE softmax:", "  if (t_kv == 65) {  // never ends\n    volatile bool spin = true;\n"
                                                     "    while (spin) {\n    }\n  }\n  // EXERCISE softmax:")
        for name, lab in (("good", text), ("stub", stub), ("hang", hang)):
            (subs / name).mkdir(parents=True)
            (subs / name / "01_naive.cu").write_text(lab)
        cls.hang_planted = hang != text
        lab = lambda *args: subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "grade", *map(str, args),
                                            "--sections", "01", "--out", str(cls.out), "--timeout", cls.TIMEOUT],
                                           capture_output=True, text=True, timeout=1200)
        cls.triage = lab(subs / "good", "--no-gpu")
        t0 = time.time()
        cls.cpu = lab(subs / "good", subs / "stub", subs / "hang", "--cpu", "--resume")
        cls.cpu_seconds = time.time() - t0
        cls.again = lab(subs / "good", subs / "stub", subs / "hang", "--cpu", "--resume")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def report(self, name):
        return json.loads((self.out / name / "grade.json").read_text())

    def test_it_ran(self):
        for r in (self.triage, self.cpu, self.again):
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertNotIn("Traceback", r.stdout + r.stderr)
        self.assertIn("a provisional grade on the CPU model", self.cpu.stdout)
        # the console says what the CPU model skipped: 01's cpu: false cases and its cublas variant
        self.assertIn("good: 01_naive: 20 runs on the CPU model; 24 GPU-only runs of the case list skipped", self.cpu.stdout)
        self.assertIn("runs of the case lists skipped as GPU-only, per submission: 01_naive 24", self.cpu.stdout)

    def test_a_correct_lab_scores_100_labelled_provisional(self):
        r = self.report("good")
        sec = r["sections"]["01_naive"]
        self.assertEqual((r["gpu"], r["total"], sec["status"], sec["correctness"]),
                         (grade.CPU_MODEL, 100.0, grade.CPU_GRADED, 100.0))
        self.assertEqual(len(sec["cases"]), 20)
        self.assertNotIn("bonus", sec)  # nothing is timed
        md = (self.out / "good" / "grade.md").read_text()
        self.assertIn("on the CPU model, not on a GPU", md)
        self.assertIn("not your kernel", md)
        self.assertIn("only a GPU shows is not seen", md)
        self.assertIn("**This grade is provisional** until graded on a GPU", md)
        self.assertIn("**Total: 100.0, provisional (CPU model)**", md)
        row = {r["submission"]: r for r in rows(self.out / grade.SUMMARY)}["good"]
        self.assertEqual([row[k] for k in ("total", "gpu", "01_naive", "01_naive_status")],
                         ["100.0", "none (CPU model)", "100.0", "graded on the CPU model"])
        self.assertRegex(self.cpu.stdout, r"\n   good +100\.0 on the CPU model \(provisional\)\n")

    def test_the_untouched_stub_scores_0(self):
        r = self.report("stub")
        sec = r["sections"]["01_naive"]
        self.assertEqual((r["total"], sec["correctness"], sec["unmodified_stub"]), (0.0, 0.0, True))
        self.assertFalse([c for c in sec["cases"] if c["status"] == "pass"])
        self.assertEqual({r["submission"]: r for r in rows(self.out / grade.SUMMARY)}["stub"]["gpu"], "none (CPU model)")

    def test_an_exercise_that_never_ends_times_out_as_a_failed_case(self):
        self.assertTrue(self.hang_planted, "the stub's softmax exercise line moved")
        sec = self.report("hang")["sections"]["01_naive"]
        self.assertEqual([c["case"] for c in sec["cases"] if c["status"] == "timeout"], ["T=65"])
        self.assertEqual([c["case"] for c in sec["cases"] if c["status"] != "pass"], ["T=65"])
        self.assertEqual(sec["correctness"], 95.0)
        self.assertLess(self.cpu_seconds, 600)  # stopped at its limit, not hung

    def test_resume_regrades_a_triage_grade_and_keeps_a_cpu_one(self):
        self.assertRegex(self.triage.stdout, r"\n   good +01 compiled\n")  # a triage grade first ...
        self.assertEqual(self.report("good")["gpu"], grade.CPU_MODEL)  # ... replaced by the CPU model's
        self.assertIn("   good: regraded: graded on no GPU (triage) before, now on the CPU model\n", self.cpu.stdout)
        self.assertIn("   stub: not graded before\n", self.cpu.stdout)
        self.assertIn("--resume: 0 of 3 submission(s) kept", self.cpu.stdout)
        self.assertIn("   good: graded before, unchanged; kept (total 100.0 on the CPU model (provisional))\n",
                      self.again.stdout)
        self.assertIn("--resume: 3 of 3 submission(s) kept", self.again.stdout)
        self.assertNotIn("compiling", self.again.stdout)

    def test_cpu_with_no_gpu_is_refused(self):
        """--no-gpu runs no case (triage), --cpu runs them on the CPU model: the two together are bad input."""
        with tempfile.TemporaryDirectory() as tmp:
            sub, out = submission(Path(tmp, "alice")), Path(tmp, "grades")
            r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "grade", str(sub), "--cpu", "--no-gpu",
                                "--out", str(out)], capture_output=True, text=True, timeout=120)
            self.assertEqual((r.returncode, r.stdout.count("\n")), (2, 1), r.stdout + r.stderr)
            self.assertIn("--cpu and --no-gpu", r.stdout)
            self.assertNotIn("Traceback", r.stdout + r.stderr)
            self.assertFalse(out.exists())


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
