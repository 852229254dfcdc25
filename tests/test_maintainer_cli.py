"""Unit tests of scripts/lab's maintainer commands (bench, gpu-check, ab) through the entry point,
without a GPU and without running a program: labcli.maintainer's run_limited and build are stand-ins
and the build folder is a temporary one. What each checks: bad input is found before anything runs
(exit 2, one line), a machine that cannot run the programs gets the reason alone (exit 77), and a
wrong output folder is refused up front instead of crashing after the runs.

  python3 -m unittest discover -s tests -p test_maintainer_cli.py -v
"""
import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
loader = importlib.machinery.SourceFileLoader("lab_driver_maintainer", str(ROOT / "scripts" / "lab"))
lab = importlib.util.module_from_spec(importlib.util.spec_from_loader("lab_driver_maintainer", loader))
loader.exec_module(lab)
from labcli import common, maintainer, setup  # noqa: E402

# bench times the reference solutions: a student release has none (bench exits 77 there).
needs_solutions = unittest.skipUnless((ROOT / "solutions").is_dir(), "a student release: no solutions/")

NO_GPU = ("cannot run here: no CUDA GPU found (no driver); add --cpu to run the CPU model of 01_naive instead\n", 77)


class Driver(unittest.TestCase):
    """Runs `scripts/lab ARGS` in this process; every program it would start is answered by
    self.answer(cmd) -> (output, exit code) and listed in self.runs."""

    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.tmp, True)
        (self.tmp / "build").mkdir()
        self.runs = []
        self.answer = self.passing_run
        self.builds, self.gpu = [], True  # nvidia-smi lists a GPU (whether a program runs is self.answer's)
        saved = {(maintainer, "run_limited"): maintainer.run_limited, (maintainer, "build"): maintainer.build,
                 (maintainer, "BUILD"): maintainer.BUILD, (maintainer, "has_gpu"): maintainer.has_gpu,
                 (setup, "ensure_baseline_packages"): setup.ensure_baseline_packages, (lab, "BUILD"): lab.BUILD}
        maintainer.run_limited = self.fake_run
        maintainer.build = lambda *args, **kw: self.builds.append(args)
        maintainer.BUILD = lab.BUILD = self.tmp / "build"  # the sweeps' scratch records, lab-error.log
        maintainer.has_gpu = lambda: self.gpu
        setup.ensure_baseline_packages = lambda variants: True  # never install a library

        def restore():
            for (module, name), value in saved.items():
                setattr(module, name, value)
        self.addCleanup(restore)

    def fake_run(self, cmd, timeout, capture=True):
        cmd = [str(c) for c in cmd]
        self.runs.append(cmd)
        out, code = self.answer(cmd)
        return code, out, 0.1

    def passing_run(self, cmd):
        """A kernel run that passes and appends its record to --json, as a program does."""
        if "--json" in cmd:
            path = Path(cmd[cmd.index("--json") + 1])
            records = json.loads(path.read_text()) if path.exists() else []
            records.append({"gpu": {"name": "fake", "slug": "fake-gpu"}, "build": "solution", "git_sha": "x",
                            "variant": cmd[cmd.index("--variant") + 1] if "--variant" in cmd else "v",
                            "check": {"passed": True}, "command": " ".join(cmd)})
            path.write_text(json.dumps(records))
        return "PASS\n", 0

    def lab(self, *argv):
        """(exit code, output) of scripts/lab ARGV."""
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                code = lab.main([str(a) for a in argv])
            except SystemExit as e:  # the argument parser's own exit
                code = e.code
        return code, buf.getvalue()

    def assertOneLine(self, out, *parts):
        lines = out.strip().splitlines()
        self.assertEqual(len(lines), 1, out)
        self.assertNotIn("Traceback", out)
        self.assertNotIn("internal error", out)
        for p in parts:
            self.assertIn(p, out)

    def a_file(self):
        f = self.tmp / "afile"
        f.write_text("a user's file\n")
        return f


class OutFolder(unittest.TestCase):
    def test_a_folder_to_be_made_is_fine_a_file_on_its_way_is_not(self):
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "afile"
            f.write_text("x")
            self.assertEqual(maintainer.folder_problem(tmp), "")
            self.assertEqual(maintainer.folder_problem(Path(tmp) / "new" / "deeper"), "")
            self.assertIn("is a file, not a folder", maintainer.folder_problem(f))
            self.assertIn(f"{f} is a file, not a folder", maintainer.folder_problem(f / "sub" / "dir"))
            self.assertEqual(maintainer.folder_problem(""), "an empty path")


@needs_solutions
class Bench(Driver):
    def test_every_section_is_resolved_before_the_first_sweep(self):
        code, out = self.lab("bench", "01", "13", "--quick", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_BAD_INPUT, out)
        self.assertOneLine(out, "unknown section '13'")
        self.assertEqual(self.runs, [])  # 01's sweep did not run first

    def test_a_tag_no_section_has_is_bad_input_naming_the_tags(self):
        code, out = self.lab("bench", "all", "--tag", "bogus")
        self.assertEqual(code, common.EXIT_BAD_INPUT, out)
        self.assertOneLine(out, "'bogus'", "accum-sweep", "exercise4")
        self.assertEqual(self.runs, [])
        code, out = self.lab("bench", "01", "--tag", "accum-sweep")  # a tag of another section
        self.assertEqual(code, common.EXIT_BAD_INPUT, out)
        self.assertOneLine(out, "01_naive", "'accum-sweep'")
        self.assertEqual(self.runs, [])

    def test_a_known_tag_runs_its_entries(self):
        code, out = self.lab("bench", "04", "--tag", "accum-sweep", "--no-baselines", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertTrue(self.runs)
        self.assertTrue((self.tmp / "r" / "04_fp16.accum-sweep.json").exists(), out)

    def test_without_a_gpu_only_the_reason_is_said(self):
        self.answer = lambda cmd: NO_GPU
        code, out = self.lab("bench", "01", "--quick", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_CANNOT_RUN, out)
        self.assertEqual(out.strip(), "lab: bench times kernels and needs a GPU: no CUDA GPU found (no driver)")
        # --ceilings (PyTorch's) cannot run either: still the one line
        self.answer = lambda cmd: (("baselines: cannot run here: no CUDA device visible to PyTorch\n", 77)
                                   if "--ceilings" in cmd else NO_GPU)
        code, out = self.lab("bench", "01", "--quick", "--ceilings", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_CANNOT_RUN, out)
        self.assertEqual(out.strip(), "lab: bench times kernels and needs a GPU: no CUDA GPU found (no driver)")

    def test_without_a_gpu_bench_says_so_before_building(self):
        # bench only times kernels: where nvidia-smi lists no GPU, the reason comes first, not after
        # minutes of building; bad input is still bad input there.
        self.gpu = False
        code, out = self.lab("bench", "04", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_CANNOT_RUN, out)
        self.assertOneLine(out, "bench times kernels and needs a GPU: no NVIDIA GPU found")
        self.assertEqual((self.builds, self.runs), ([], []))
        code, out = self.lab("bench", "13")
        self.assertEqual(code, common.EXIT_BAD_INPUT, out)
        self.assertOneLine(out, "unknown section '13'")

    def test_ceilings_that_cannot_run_are_still_reported_when_the_kernels_run(self):
        self.answer = lambda cmd: (("baselines: cannot run here: PyTorch is not importable\n", 77)
                                   if "--ceilings" in cmd else self.passing_run(cmd))
        code, out = self.lab("bench", "01", "--quick", "--ceilings", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertIn("baselines: cannot run here: PyTorch is not importable", out)
        self.assertIn("[1/1] 01_naive", out)

    def test_ceilings_land_beside_the_records_of_their_gpu(self):
        # `tables` reads results/<gpu>/ceilings.json: bench writes them there (or into --out),
        # never into a folder no table reads
        def answer(cmd):
            if "--ceilings" in cmd:
                Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps({"gpu": {"slug": "fake-gpu"}, "copy_gbps": 1}))
                return "ceilings measured\n", 0
            return self.passing_run(cmd)
        self.answer = answer
        code, out = self.lab("bench", "01", "--quick", "--ceilings", "--out", self.tmp / "r")
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertEqual(json.loads((self.tmp / "r" / "ceilings.json").read_text())["copy_gbps"], 1)
        saved = maintainer.ROOT
        maintainer.ROOT = self.tmp  # no --out: results/<slug>/ of the tree (a full tree: solutions/)
        (self.tmp / "solutions").mkdir()
        try:
            code, out = self.lab("bench", "01", "--quick", "--ceilings")
        finally:
            maintainer.ROOT = saved
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertTrue((self.tmp / "results" / "fake-gpu" / "ceilings.json").exists(), out)

    def test_out_a_file_is_refused_before_anything_runs(self):
        f = self.a_file()
        for out_arg in (f, f / "sub", ""):
            code, out = self.lab("bench", "01", "--quick", "--out", out_arg)
            self.assertEqual(code, common.EXIT_BAD_INPUT, out)
            self.assertOneLine(out, "bench: --out: ")
            self.assertEqual(self.runs, [])
        code, out = self.lab("bench", "01", "--quick", "--ceilings", "--out", f)
        self.assertEqual(code, common.EXIT_BAD_INPUT, out)
        self.assertEqual(f.read_text(), "a user's file\n")

    def test_a_sweep_writes_its_records_into_a_new_folder(self):
        code, out = self.lab("bench", "01", "--quick", "--out", self.tmp / "new" / "r")
        self.assertEqual(code, common.EXIT_PASS, out)
        records = json.loads((self.tmp / "new" / "r" / "01_naive.quick.json").read_text())
        self.assertEqual(len(records), len(self.runs))  # one per variant of the quick shape
        # A record names its program as run from the repository's root, not where the tree sat.
        for r in records:
            self.assertTrue(r["command"].startswith("build/bin/01_naive "), r["command"])
            self.assertNotIn(str(ROOT), r["command"])

    def test_recorded_commands_are_relative_to_the_tree(self):
        cmd = (f"{common.BUILD}/bin/08_tma_skeleton --variant ws --json {common.BUILD}/bench.json --quiet --t 64 "
               f"| {ROOT}/scripts/baselines.py --spec {{\"b\": [1, 2]}} /elsewhere/file")
        self.assertEqual(common.repo_relative(cmd),
                         "build/bin/08_tma_skeleton --variant ws --json build/bench.json --quiet --t 64 "
                         "| scripts/baselines.py --spec {\"b\": [1, 2]} /elsewhere/file")


class Ab(Driver):
    def fake_build(self):
        b = self.tmp / "fakebuild"
        (b / "bin").mkdir(parents=True)
        (b / "bin" / "01_naive").write_text("")
        return b

    def test_out_a_file_is_bad_input(self):
        b, f = self.fake_build(), self.a_file()
        for out_arg in (f, f / "sub"):
            code, out = self.lab("ab", b, b, "--case", "x=01_naive --t 1", "--out", out_arg)
            self.assertEqual(code, common.EXIT_BAD_INPUT, out)
            self.assertOneLine(out, "ab: --out: ", "is a file, not a folder")
        self.assertEqual(self.runs, [])


class GpuCheck(Driver):
    def gpu_check(self, *only):
        return self.lab("gpu-check", "--out", self.tmp / "gc", "--only", *only, "--sections", "01")

    def test_a_step_that_cannot_run_here_is_exit_77(self):
        self.answer = lambda cmd: ("lab: check needs a GPU: no CUDA GPU found (no driver)\n", 77)
        code, out = self.gpu_check("check")
        self.assertEqual(code, common.EXIT_CANNOT_RUN, out)
        self.assertIn("could not run here: check --solution", out.strip().splitlines()[-1])

    def test_a_failure_wins_over_cannot_run(self):
        self.answer = lambda cmd: ("", 77) if "--solution" in cmd else ("", 1)
        code, out = self.gpu_check("check", "stubs")
        self.assertEqual(code, common.EXIT_FAIL, out)
        self.assertIn("UNEXPECTED: check stubs", out.strip().splitlines()[-1])

    def test_all_passing_is_exit_0(self):
        self.answer = lambda cmd: ("", 0)
        code, out = self.gpu_check("check", "stubs")
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertEqual(out.strip().splitlines()[-1], "gpu-check: all as expected")

    def test_sanitizer_runs_go_several_at_once_and_report_in_listed_order(self):
        busy, most, lock = [0], [0], threading.Lock()

        def answer(cmd):
            with lock:
                busy[0] += 1
                most[0] = max(most[0], busy[0])
            time.sleep(0.2 if "memcheck" in cmd else 0.05)  # the first runs end last
            with lock:
                busy[0] -= 1
            return "========= ERROR SUMMARY: 0 errors\n", 0
        self.answer = answer
        code, out = self.gpu_check("sanitize")
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertGreater(most[0], 1, "one run at a time")
        titles = [line[3:] for line in out.splitlines() if line.startswith("== compute-sanitizer")]
        self.assertEqual(titles, [f"compute-sanitizer {tool} 01_naive {v}" for tool in ("memcheck", "racecheck", "synccheck")
                                  for v in ("kernels", "cublas")])

    def test_a_failing_sanitizer_run_is_unexpected_and_named(self):
        self.answer = lambda cmd: ("========= RACECHECK SUMMARY: 1 hazard displayed\n", 9) \
            if "racecheck" in cmd and "cublas" in cmd else ("", 0)
        code, out = self.gpu_check("sanitize")
        self.assertEqual(code, common.EXIT_FAIL, out)
        self.assertIn("UNEXPECTED: sanitizer racecheck 01_naive cublas", out.strip().splitlines()[-1])
        self.assertEqual(len(self.runs), 6)  # the failure stops nothing

    def test_ctrl_c_during_the_sanitizer_runs_ends_at_once(self):
        def answer(cmd):
            if "racecheck" in cmd:  # a long run, still going at Ctrl-C
                time.sleep(3)
            elif "memcheck" in cmd and "kernels" in cmd:
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            return "", 0
        self.answer = answer
        self.addCleanup(common._stopping.clear)  # the driver's stop is for this run only
        start = time.time()
        code, out = self.gpu_check("sanitize")
        self.assertEqual(code, 130, out)
        self.assertIn("lab: interrupted", out)
        self.assertLess(time.time() - start, 2, "waited for the runs in flight")

    def test_sanitizer_runs_are_dealt_round_the_gpus(self):
        self.answer = lambda cmd: ("", 0)
        with mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "3,5"}):
            code, out = self.lab("gpu-check", "--out", self.tmp / "gc", "--only", "sanitize", "--sections", "01",
                                 "--gpus", "2")
        self.assertEqual(code, common.EXIT_PASS, out)
        self.assertEqual(sorted(r[:2] for r in self.runs), [["env", "CUDA_VISIBLE_DEVICES=3"]] * 3 + [["env", "CUDA_VISIBLE_DEVICES=5"]] * 3)

    def test_out_a_file_is_bad_input(self):
        f = self.a_file()
        code, out = self.lab("gpu-check", "--out", f, "--only", "check", "--sections", "01")
        self.assertEqual(code, common.EXIT_BAD_INPUT, out)
        self.assertOneLine(out, "gpu-check: --out: ", "is a file, not a folder")
        self.assertEqual(self.runs, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
