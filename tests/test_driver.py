"""Unit tests of scripts/lab (its labcli modules) and scripts/make_labs.py (no GPU, no build needed)."""
import contextlib
import importlib.machinery
import io
import os
import json
import re
import importlib.util
import subprocess
import sys
import signal
import tempfile
import time
import unittest
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
loader = importlib.machinery.SourceFileLoader("lab_driver", str(ROOT / "scripts" / "lab"))
spec = importlib.util.spec_from_loader("lab_driver", loader)
lab = importlib.util.module_from_spec(spec)
loader.exec_module(lab)  # the entry point: its argument parsing
from labcli import common, maintainer, student  # noqa: E402
import make_labs  # noqa: E402

# A test that reads solutions/ has nothing to read in a student release.
needs_solutions = unittest.skipUnless((ROOT / "solutions").is_dir(), "a student release: no solutions/")


class TimeLimit(unittest.TestCase):
    def test_a_hang_is_stopped_and_reported(self):
        code, out, secs = common.run_limited([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
        self.assertEqual(code, common.EXIT_TIMEOUT)
        self.assertIn("TIMEOUT", out)
        self.assertLess(secs, 10)

    def test_child_processes_are_killed_too(self):
        code, out, _ = common.run_limited(["bash", "-c", "sleep 60 & sleep 60; wait"], timeout=1)
        self.assertEqual(code, common.EXIT_TIMEOUT)

    def test_an_interrupted_driver_stops_the_programs_it_started(self):
        """A program runs in a session of its own, out of reach of the terminal's Ctrl-C: an
        interrupted driver kills it (a long --cpu run went on for minutes after `lab: interrupted`),
        and a check's queued runs do not start."""
        driver = """
import concurrent.futures, sys
sys.path.insert(0, sys.argv[1])
from labcli import common
sleeper = ["bash", "-c", "echo $$ >> " + sys.argv[2] + "; exec sleep 60"]
try:
    if sys.argv[3] == "main":
        common.run_limited(sleeper, 120)
    else:  # check: runs in a pool, the main thread waits for the first
        pool = concurrent.futures.ThreadPoolExecutor(1)
        jobs = [pool.submit(common.run_limited, sleeper, 120) for _ in range(3)]
        jobs[0].result()
except KeyboardInterrupt:
    common.stop_running()  # as scripts/lab does
"""
        for where in ("main", "pool"):
            started = self.interrupted(driver, where)
            self.assertEqual(len(started), 1, where)  # the queued runs never started

    def test_an_interrupted_grade_stops_its_compiles(self):
        """A submission's build step (grade.build_step: cmake and its compilers) runs in a session of
        its own as a program does: an interrupted grade kills it, whichever thread waits for it."""
        driver = """
import concurrent.futures, sys
sys.path.insert(0, sys.argv[1])
import grade
from labcli import common
compiler = ["bash", "-c", "echo $$ >> " + sys.argv[2] + "; exec sleep 60"]
try:
    if sys.argv[3] == "main":
        grade.build_step(compiler, None)
    else:  # submissions built in a pool, the main thread waiting
        concurrent.futures.ThreadPoolExecutor(1).submit(grade.build_step, compiler, None).result()
except KeyboardInterrupt:
    common.stop_running()  # as scripts/lab does
"""
        for where in ("main", "pool"):
            self.interrupted(driver, where)

    def test_a_ctrl_c_right_after_a_start_still_stops_the_program(self):
        """A Ctrl-C between a program's start and its registration for stop_running (a loaded machine
        widens that gap) must not leave the program running after the driver: here the driver
        interrupts itself the moment Popen returns."""
        marker = f"{60 + os.getpid() % 30}.{os.getpid() % 9973}"  # sleep's argument, to find the program by
        driver = f"""
import os, signal, subprocess, sys
sys.path.insert(0, sys.argv[1])
from labcli import common
class InterruptedAtStart(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args[0] == "sleep":  # the program (not git, which the driver asks for its sha)
            os.kill(os.getpid(), signal.SIGINT)
subprocess.Popen = InterruptedAtStart
try:
    common.run_limited(["sleep", "{marker}"], 120)
except KeyboardInterrupt:
    common.stop_running()  # as scripts/lab does
"""
        proc = subprocess.run([sys.executable, "-c", driver, str(ROOT / "scripts")], timeout=60,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

        def sleepers():
            found = []
            for d in Path("/proc").iterdir():
                try:
                    argv = (d / "cmdline").read_bytes().split(b"\0")
                    state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue
                if argv[:2] == [b"sleep", marker.encode()] and state != "Z":
                    found.append(d.name)
            return found
        deadline = time.time() + 5
        while sleepers() and time.time() < deadline:
            time.sleep(0.05)
        left = sleepers()
        for pid in left:  # not left behind by a failing test
            os.kill(int(pid), signal.SIGKILL)
        self.assertEqual(left, [], f"the program outlived the driver (driver exit {proc.returncode})")

    def interrupted(self, driver, where):
        """Runs `driver` (python -c: its arguments scripts/, a file each program it starts appends its
        pid to, `where`), Ctrl-C once a program started; checks that the driver ended and the first
        program with it. Returns the pids of the programs started."""
        with tempfile.TemporaryDirectory() as tmp:
            pids = Path(tmp, "pids")
            proc = subprocess.Popen([sys.executable, "-c", driver, str(ROOT / "scripts"), str(pids), where],
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            deadline = time.time() + 30
            while not (pids.exists() and pids.read_text().strip()) and time.time() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            self.assertIsNotNone(proc.wait(timeout=20), where)
            started = [int(p) for p in pids.read_text().split()]

        def alive(pid):  # a killed child not yet reaped by init is a zombie (state Z), not alive
            try:
                return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            except (OSError, IndexError):
                return False
        deadline = time.time() + 5
        while alive(started[0]) and time.time() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(started[0]), f"{where}: the program outlived the driver")
        return started

    def test_a_crash_is_reported(self):
        code, out, _ = common.run_limited([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], 10)
        self.assertLess(code, 0)
        self.assertIn("CRASHED: the program was killed by SIGSEGV (signal 11): most often memory", out)

    def test_run_says_a_crash_is_a_failure(self):
        """`scripts/lab run` exits 1 for a program killed by a signal (the shell would see 128+N,
        none of the lab's codes)."""
        crash = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"]
        a = SimpleNamespace(section="01", solution=False, args=[], timeout=10)
        with mock.patch.object(student, "build", lambda t: None), \
                mock.patch.object(student, "program", lambda s, solution: crash), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(student.cmd_run(a), common.EXIT_FAIL)
        self.assertIn("killed by SIGABRT", out.getvalue())

    def test_only_the_same_verdict_is_folded(self):
        """check names a failure already shown instead of repeating it: the same verdict, numbers
        aside, behind whatever banner the program prints first; another verdict, or a crash, is new."""
        banner = "paged KV cache: page size 16 tokens, nhd pool of 23 blocks (21 in use)\n"
        unwritten = lambda n: banner + f"  check    output not written: all {n} elements of O still hold the poison\nFAIL: x"
        far = banner + "  check    O too far from fp64: max error 0.5 > bound 1e-05 (rule)\nFAIL: x"
        crash = banner + "  check    output not written: all 1024 elements of O still hold the poison\nCRASHED: killed"
        self.assertEqual(student.failure_key(unwritten(1024)), student.failure_key(unwritten(2048)))
        self.assertNotEqual(student.failure_key(unwritten(1024)), student.failure_key(far))
        self.assertNotEqual(student.failure_key(unwritten(1024)), student.failure_key(crash))
        self.assertIn("fp64", student.failure_key(far))  # letters and words are not masked as numbers
        self.assertIsNone(student.failure_key(""))

    def test_a_failed_run_shows_its_first_lines_and_its_verdict(self):
        out = "\n".join(["05 exercises"] + [f"failed: check {i}" for i in range(30)] + ["FAIL: 30 of 37 checks failed"])
        shown = student.excerpt(out)
        self.assertEqual(shown[:2], ["05 exercises", "failed: check 0"])  # the first failure, not the last
        self.assertEqual(shown[-1], "FAIL: 30 of 37 checks failed")
        self.assertIn("25 more lines", shown[-3])
        self.assertEqual(student.excerpt("a\nb\nFAIL"), ["a", "b", "FAIL"])
        # the unit tests' summary, one line an exercise above the verdict, is kept whole
        tests = out.replace("FAIL: 30", "exercise gqa: ok\nexercise split-state: 3 failed\nexercise split-merge: ok\nFAIL: 30")
        self.assertEqual(student.excerpt(tests)[-4:], ["exercise gqa: ok", "exercise split-state: 3 failed",
                                                       "exercise split-merge: ok", "FAIL: 30 of 37 checks failed"])

    def test_a_missing_program_is_a_failed_run(self):
        code, out, _ = common.run_limited(["no-such-tool-here", "--x"], 10)
        self.assertEqual(code, 127)
        self.assertIn("cannot start no-such-tool-here", out)

    def test_endless_output_keeps_its_start_and_end_only(self):
        # a program that prints while it hangs must not fill the memory of a grader running a class
        flood = "import sys\nprint('first line')\nfor i in range(400000): print('x' * 63)\nprint('last line')\n"
        code, out, _ = common.run_limited([sys.executable, "-c", flood], 60)
        self.assertEqual(code, 0)
        self.assertLess(len(out), common.OUTPUT_HEAD + common.OUTPUT_TAIL + 200)
        self.assertTrue(out.startswith("first line\n"))
        self.assertEqual(out.strip().splitlines()[-1], "last line")
        self.assertRegex(out, r"\[\.\.\. \d+ bytes of output left out \.\.\.\]")

    def test_a_program_that_reads_its_input_gets_none(self):
        # its input is closed: input() ends at once, never waiting on the instructor's terminal
        code, out, secs = common.run_limited([sys.executable, "-c", "input()"], 30)
        self.assertEqual(code, 1)
        self.assertIn("EOFError", out)
        self.assertLess(secs, 20)

    def test_no_core_dump_and_a_file_size_limit(self):
        # a crashing CUDA program's core can take gigabytes, and a grader's runs must not fill the
        # disk: limit_children (in a child Python, as `lab` calls it) and what its programs see
        with tempfile.TemporaryDirectory() as tmp:
            big = Path(tmp, "big")
            script = (f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
                      "from labcli import common\n"
                      "common.limit_children(*map(int, sys.argv[1:]))\n"
                      "print(common.run_limited(['sh', '-c', \"grep 'core file' /proc/$$/limits\"], 10)[1])\n"
                      f"code, out, _ = common.run_limited(['sh', '-c', 'exec head -c {3 << 20} /dev/zero > {big}'], 10)\n"
                      "print(code, out)\n")
            for limit in ([str(1 << 20)], []):
                r = subprocess.run([sys.executable, "-c", script, *limit], capture_output=True, text=True, timeout=60)
                self.assertRegex(r.stdout, r"Max core file size\s+0\s", r.stderr)  # the soft limit
                if limit:
                    self.assertIn(f"{-signal.SIGXFSZ} \nSTOPPED: it wrote a file larger than the 1 MB a run may write", r.stdout)
                    self.assertEqual(big.stat().st_size, 1 << 20)
                else:  # no limit asked: none
                    self.assertIn("0 ", r.stdout)
                    self.assertEqual(big.stat().st_size, 3 << 20)

    def test_exit_codes_pass_through(self):
        code, out, _ = common.run_limited([sys.executable, "-c", "print('hi'); raise SystemExit(77)"], 10)
        self.assertEqual((code, out.strip()), (77, "hi"))


    def test_a_run_is_shown_as_it_comes(self):
        """echo sees a line before the program ends (a long run is not silent), then how it ended."""
        seen = []
        prog = "import sys, time; print('first', flush=True); time.sleep(3); print('second')"
        start = time.time()
        code, out, _ = common.run_limited([sys.executable, "-c", prog], 1.5,
                                          echo=lambda b: seen.append((time.time() - start, b)))
        self.assertEqual(code, common.EXIT_TIMEOUT)
        early = b"".join(chunk for t, chunk in seen if t < 1.4)  # shown while the program still ran
        self.assertEqual(early, b"first\n")
        self.assertIn(b"TIMEOUT", seen[-1][1])
        self.assertEqual(out, "first\n" + seen[-1][1].decode())


class InARelease(unittest.TestCase):
    def test_the_instructors_commands_cannot_run_in_a_student_release(self):
        """grade, grading-example and make-labs need solutions/: in a release they exit 77 (cannot run
        here), as bench does, not 1 (a failure) or 2 (bad input)."""
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(student, "ROOT", Path(tmp)):
            for fn, a, why in ((student.cmd_grade, SimpleNamespace(sections=None, cases=None, out=tmp, submissions=[tmp]),
                                "not a release"),
                               (student.cmd_grading_example, SimpleNamespace(out=tmp), "not a release"),
                               (student.cmd_make_labs, SimpleNamespace(check=False, force=False), "a student release")):
                with self.assertRaises(common.LabError) as refused:
                    fn(a)
                self.assertEqual(refused.exception.code, common.EXIT_CANNOT_RUN)
                self.assertIn(why, str(refused.exception))


class HiddenCases(unittest.TestCase):
    def test_a_hidden_case_the_solution_refuses_stops_the_grading_before_it_starts(self):
        """A misspelt option in a hidden case is found once, on the solution, not as every student's
        "refused the input"; a case that runs on (or needs a GPU) is accepted."""
        said = {"--tt": (2, "bad input: unknown option --tt (see --help)\n"), "--t": (77, "cannot run here: no GPU\n"),
                "--slow": (124, "TIMEOUT\n")}
        with tempfile.TemporaryDirectory() as tmp:
            hidden = Path(tmp, "hidden.json")
            hidden.write_text(json.dumps({"section": "01_naive", "cases": [
                {"name": "fine", "args": ["--t", "3001"]}, {"name": "slow", "args": ["--slow"]},
                {"name": "typo", "args": ["--tt", "3001"]}]}))
            with mock.patch.multiple(student, build=lambda *a, **k: None, program=lambda s, solution: ["prog"],
                                     run_limited=lambda cmd, timeout: (*said[cmd[6]], 0.1)):
                refused = student.refused_hidden_cases(str(hidden))
                self.assertEqual(refused, [f"{hidden}: case 'typo' (kernels): the solution refuses it: "
                                           "bad input: unknown option --tt (see --help)"])
                hidden.write_text(json.dumps({"section": "01_naive", "cases": [{"name": "fine", "args": ["--t", "3"]}]}))
                self.assertEqual(student.refused_hidden_cases(str(hidden)), [])

    def test_sections_named_with_no_section_is_refused(self):
        a = SimpleNamespace(cpu=False, no_gpu=True, sections=[], cases=None)
        with self.assertRaises(common.LabError) as refused:
            student.grade_class(a)
        self.assertEqual(refused.exception.code, common.EXIT_BAD_INPUT)
        self.assertIn("--sections: name the sections to grade", str(refused.exception))


class LiveRun(unittest.TestCase):
    def run_cmd(self, runs, args=()):
        """cmd_run of 01 over stand-in runs [(exit, output)], the lines it printed."""
        calls = []

        def run_limited(cmd, timeout, echo=None, extra_env=None, stuck=None):
            code, text = runs[len(calls)]
            calls.append(cmd)
            self.assertEqual(extra_env, {"LAB_TIME_LIMIT_S": "60"})  # the note of a slow shape compares with it
            for piece in (text[:7], text[7:]):  # in two chunks, split mid-line
                echo(piece.encode())
            return code, text, 0.1
        a = SimpleNamespace(section="01", solution=False, args=list(args), timeout=60)
        with mock.patch.object(student, "run_limited", run_limited), mock.patch.object(student, "build"), \
                mock.patch.object(student, "python_parses"), mock.patch.object(student, "python_packages"), \
                mock.patch.object(make_labs, "is_untouched_stub", return_value=False), \
                mock.patch.object(make_labs, "untouched_exercises", return_value=[]), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            code = student.cmd_run(a)
        return code, printed.getvalue().splitlines(), calls

    def test_without_a_gpu_the_cpu_model_runs_and_the_no_gpu_line_is_not_shown(self):
        code, lines, calls = self.run_cmd([
            (77, "cannot run here: no CUDA GPU found (no driver); add --cpu to run the CPU model of 01_naive instead\n"),
            (1, "== CPU model ==\nFAIL: 01_naive kernels (CPU model)\n")])
        self.assertEqual(code, 1)
        self.assertEqual(calls[1][-1], "--cpu")
        self.assertEqual(lines, ["lab: no CUDA GPU found (no driver); running the CPU model of 01_naive instead "
                                 "(--cpu; the kernel itself needs a GPU)", "== CPU model ==", "FAIL: 01_naive kernels (CPU model)"])

    def test_a_run_only_a_gpu_does_is_not_sent_to_the_cpu_model(self):
        """A program that says only a GPU runs this (04's mma, a --bug that is a launch) would only
        answer "needs a GPU" under --cpu: its own line, with its advice, is the answer."""
        line = ("cannot run here: no CUDA GPU found (no driver), and only a GPU runs this: the mma variant's "
                "exercises run on mma.sync fragments; --cpu checks --variant scalar")
        code, lines, calls = self.run_cmd([(77, line + "\n"), (77, "not checked here: needs a GPU: ...\n")],
                                          ["--variant", "mma"])
        self.assertEqual((code, len(calls)), (77, 1))
        self.assertEqual(lines, [line])

    def test_where_the_cpu_model_cannot_run_either_the_reason_is_shown(self):
        code, lines, calls = self.run_cmd([(77, "cannot run here: 01_naive has no CPU model\n")], ["--cpu"])
        self.assertEqual((code, len(calls)), (77, 1))
        self.assertEqual(lines, ["cannot run here: 01_naive has no CPU model"])

    def test_a_last_line_without_its_newline_is_shown(self):
        _, lines, _ = self.run_cmd([(0, "PASS: 01_naive kernels\nno newline")])
        self.assertEqual(lines[:2], ["PASS: 01_naive kernels", "no newline"])

    def test_a_run_stopped_at_its_time_limit_says_what_that_most_often_is(self):
        code, lines, _ = self.run_cmd([(124, "== CPU model ==\n\nTIMEOUT: stopped after 60 s\n")], ["--t", "65"])
        self.assertEqual(code, common.EXIT_TIMEOUT)
        self.assertEqual(lines[-2], "TIMEOUT: stopped after 60 s")
        self.assertRegex(lines[-1], r"^lab: the program did not finish in 60 s: most often an endless loop, or a wait "
                                    r"that never completes, in the exercise; .*: scripts/lab run 01 --timeout 120 -- --t 65$")

    def test_a_run_stopped_while_it_said_it_was_working_is_not_called_stuck(self):
        """A program that announced a slow shape (a Python section's note, a CPU model's "still
        running" lines) and met the time limit was busy, not in an endless loop."""
        for said in ("note: B=1 H=32 T=4096 D=64 fp16 causal under --cpu takes roughly 35 min on one laptop core, "
                     "in silence until the verdict; --cpu without --t runs a small shape in seconds\n",
                     "  ... the CPU model still running: 15 s (a smaller shape finishes sooner)\n"):
            code, lines, _ = self.run_cmd([(124, said + "\nTIMEOUT: stopped after 60 s\n")], ["--t", "4096"])
            self.assertEqual(code, common.EXIT_TIMEOUT)
            self.assertRegex(lines[-1], r"^lab: the program was still working when stopped after 60 s: this shape is "
                                        r"large for the CPU .*a smaller --t runs in seconds, or give it longer: "
                                        r"scripts/lab run 01 --timeout 120 -- --t 4096$")

    def test_a_small_shape_still_running_at_the_limit_is_called_stuck(self):
        """A CPU model's "still running" lines prove nothing on a shape that takes a second: there
        the hint is the endless loop, in the shape's every spelling; a large one was busy. (The lines
        name the shape: the problem line comes only after the run.)"""
        for problem, busy in (("B=1 H=8 T=16 D=64 fp32", False), ("B=1 H=4 H_kv=2 T=64 D=64 fp16", False),
                              ("B=1 H=8 T_q=64 T_kv=100 D=64 fp32 causal", False),
                              ("B=1 H=32 T=4096 D=64 fp16", True), ("B=8 H=32 H_kv=8 T_q=1024 T_kv=8192 D=128 fp16", True)):
            said = f"  ... the CPU model still running: 595 s ({problem}: a smaller shape finishes sooner)\n"
            code, lines, _ = self.run_cmd([(124, said + "\nTIMEOUT: stopped after 60 s\n")], ["--t", "16"])
            self.assertEqual(code, common.EXIT_TIMEOUT)
            self.assertRegex(lines[-1], r"^lab: the program was still working" if busy else
                             r"^lab: the program did not finish in 60 s: most often an endless loop", problem)

    def run_stand_in(self, program_text, argv):
        """cmd_run of `scripts/lab run 01 ARGV...` (parsed as scripts/lab does: its default --timeout)
        over a stand-in program (Python; it reads nothing of its arguments but --cpu), with
        CPU_PROBE_LIMIT at 1 s: its exit, the lines printed, the seconds it took."""
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section.py"
            fake.write_text("import sys, time\ncpu = '--cpu' in sys.argv\nt0 = time.time()\n"
                            "def still_running(seconds, shape):\n"  # the C++ harness's notice (harness.cpp)
                            "    while time.time() - t0 < seconds:\n"
                            "        print(f'  ... the CPU model still running: {time.time() - t0:.0f} s "
                            "({shape}: a smaller shape finishes sooner)', flush=True)\n"
                            "        time.sleep(0.5)\n" + program_text)
            a = lab.parse(["run", "01", *argv])
            with mock.patch.multiple(student, build=lambda *args, **kw: None, python_parses=lambda *args: None,
                                     python_packages=lambda *args: None, CPU_PROBE_LIMIT=1,
                                     program=lambda section, solution: [sys.executable, fake]), \
                    mock.patch.object(make_labs, "is_untouched_stub", return_value=False), \
                    mock.patch.object(make_labs, "untouched_exercises", return_value=[]), \
                    contextlib.redirect_stdout(io.StringIO()) as printed:
                start = time.time()
                code = student.cmd_run(a)
            return code, printed.getvalue().splitlines(), time.time() - start

    def test_a_small_shape_stuck_on_the_cpu_model_is_stopped_in_check_s_probe_limit(self):
        """`run` without a GPU: a tiny shape still running after CPU_PROBE_LIMIT is an endless loop
        (the CPU model finishes it in a second), stopped then with the timeout's lines and exit, not
        after --timeout's ten minutes. Whether the CPU model runs as the fallback or by --cpu. (The
        stand-in stops by itself after 20 s: a driver that waits fails, it does not hang.)"""
        stuck = ("if not cpu:\n"
                 "    print('cannot run here: no CUDA GPU found (no driver); add --cpu to run the CPU model', "
                 "file=sys.stderr)\n"
                 "    sys.exit(77)\n"
                 "still_running(20, 'B=1 H=8 T=16 D=64 fp32')\n"
                 "print('01_naive [kernels] cpu-model   B=1 H=8 T=16 D=64 fp32')\nprint('PASS: 01_naive kernels (CPU model)')\n")
        for argv, rerun in (([], "scripts/lab run 01 --timeout 2"),
                            (["--", "--cpu"], "scripts/lab run 01 --timeout 2 -- --cpu")):
            code, lines, secs = self.run_stand_in(stuck, argv)
            self.assertEqual(code, common.EXIT_TIMEOUT, lines)
            self.assertLess(secs, 10, lines)
            self.assertEqual(lines[-2], "TIMEOUT: stopped after 1 s", lines)
            self.assertRegex(lines[-1], r"^lab: the program did not finish in 1 s: most often an endless loop, or a "
                                        r"wait that never completes, in the exercise; if it only needs longer: " +
                                        re.escape(rerun) + "$")
            self.assertFalse([l for l in lines if "CRASHED" in l or "Traceback" in l], lines)
        self.assertEqual(lab.parse(["run", "01"]).timeout, student.RUN_TIMEOUT)  # the default it stops early at

    def test_a_run_that_may_need_its_time_is_not_stopped_early(self):
        """Given its whole --timeout: a large shape on the CPU model (its "still running" lines are
        work), "still running" lines that name no shape (the program's word is taken), any shape on a
        GPU, and any run under a --timeout the student gave (the hint tells them to give one where a
        run only needs longer)."""
        def finishing(shape, seconds=3):
            return (f"still_running({seconds}, {shape!r})\nprint('01_naive [kernels] cpu-model   {shape}')\n"
                    "print('PASS: 01_naive kernels (CPU model)')\n")
        for text, argv in ((finishing("B=1 H=32 T=4096 D=64 fp16"), ["--", "--cpu"]),
                           (finishing("B=1 H=8 T=16 D=64 fp32"), []),  # a GPU run: it never asks for --cpu
                           (finishing("making the inputs"), ["--", "--cpu"])):
            code, lines, secs = self.run_stand_in(text, argv)
            self.assertEqual(code, common.EXIT_PASS, lines)
            self.assertGreaterEqual(secs, 3, lines)
        code, lines, secs = self.run_stand_in(finishing("B=1 H=8 T=16 D=64 fp32", 20), ["--timeout", "3", "--", "--cpu"])
        self.assertEqual(code, common.EXIT_TIMEOUT, lines)
        self.assertGreaterEqual(secs, 3, lines)
        self.assertRegex(lines[-1], r"^lab: the program did not finish in 3 s: most often an endless loop.*"
                                    r"scripts/lab run 01 --timeout 6 -- --cpu$")

    def test_a_run_that_checked_nothing_is_not_called_passed(self):
        """--help (or any run with no PASS line) ends in 0 but ran none of the exercise."""
        _, lines, _ = self.run_cmd([(0, "usage: lab_01_naive [options]\n  --t N  query rows\n")], ["--help"])
        self.assertEqual(lines, ["usage: lab_01_naive [options]", "  --t N  query rows"])

    def test_a_passing_lab_run_points_to_check(self):
        """One shape passing is not the exercise's verdict: a passing run of the lab names the
        case list; a failing one does not (its own lines say what is wrong)."""
        _, lines, _ = self.run_cmd([(0, "PASS: 01_naive kernels\n")])
        self.assertRegex(lines[-1], r"^lab: this run passed; scripts/lab check 01 runs the section's case list")
        _, lines, _ = self.run_cmd([(1, "FAIL: 01_naive kernels\n")])
        self.assertEqual(lines, ["FAIL: 01_naive kernels"])
        # a pass with an exercise still the stub (04's mma ones, which the CPU model does not run) says so
        with mock.patch.object(student, "stub_left", lambda section, on_cpu=False: "lab: EXERCISE x is still the stub"):
            _, lines, _ = self.run_cmd([(0, "PASS: 01_naive kernels\n")])
        self.assertEqual(lines[-1], "lab: EXERCISE x is still the stub")


class Architectures(unittest.TestCase):
    def test_a_build_is_for_this_machine(self):
        """Kernels are compiled for the GPU that is here (or sm_80 alone where there is none), not
        for the CMake default's two architectures; a GPU newer than the lab's keeps the default."""
        cases = {"8.6\n": "86", "9.0\n9.0\n": "90", "8.0\n8.9\n": "80;89", "12.0\n": None, "": None}
        with tempfile.TemporaryDirectory() as tmp:
            smi = Path(tmp, "nvidia-smi")
            for says, want in cases.items():
                smi.write_text(f"#!/bin/sh\nprintf '{says}'\n")
                smi.chmod(0o755)
                common.local_architectures.cache_clear()
                with mock.patch.dict(os.environ, {"PATH": tmp}):
                    self.assertEqual(common.local_architectures(), want, says)
            common.local_architectures.cache_clear()
            with mock.patch.dict(os.environ, {"PATH": str(Path(tmp, "none"))}):
                self.assertEqual(common.local_architectures(), "80")  # no GPU: the CPU model runs
                with mock.patch.dict(os.environ, {"LAB_CUDA_ARCHITECTURES": "90"}):
                    self.assertEqual(common.cmake_env()["LAB_CUDA_ARCHITECTURES"], "90")  # the user's choice wins
        common.local_architectures.cache_clear()


class ArchitectureChoice(unittest.TestCase):
    """LAB_CUDA_ARCHITECTURES: a value CMake's CUDA_ARCHITECTURES would refuse (or the lab cannot
    build for) is bad input before anything is configured; one other than build/ was configured
    with is said not to apply."""

    def build(self, value, cache=None):
        """(what build() said, whether it raised BadInput, the cmake commands it ran)."""
        ran = []
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(common, "BUILD", Path(tmp, "build")), \
                mock.patch.dict(os.environ, {"LAB_CUDA_ARCHITECTURES": value}), \
                mock.patch.object(common, "configure", lambda: ran.append("configure")), \
                mock.patch.object(common, "logged", lambda args, log, **kw: ran.append(args[1]) or 0), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            os.environ.pop("LAB_NO_BUILD", None)
            if cache is not None:
                Path(tmp, "build").mkdir()
                Path(tmp, "build", "CMakeCache.txt").write_text(f"LAB_CUDA_ARCHITECTURES:STRING={cache}\n")
            try:
                common.build(["lab_02_v1_tile"])
                refused = None
            except common.BadInput as e:
                refused = str(e)
        return out.getvalue(), refused, ran

    def test_a_value_cmake_would_refuse_is_bad_input_and_nothing_is_configured(self):
        for value, why in (("foo", "'foo' is not a CUDA architecture"), ("sm_90", "(CMake's spelling: 90)"),
                           ("80,90", "'80,90' is not"), ("75", "older than sm_80"), ("", "empty")):
            _, refused, ran = self.build(value)
            self.assertIn(f"LAB_CUDA_ARCHITECTURES={value}: ", refused or "", value)
            self.assertIn(why, refused)
            self.assertIn("e.g. LAB_CUDA_ARCHITECTURES='80;90a'", refused)
            self.assertEqual(ran, [], value)
        for value in ("80", "90a", "86-real", "90-virtual", "80;90a", "100f", "native", "all", "all-major"):
            said, refused, ran = self.build(value)
            self.assertEqual((refused, ran[0]), (None, "configure"), value)
            self.assertNotIn("LAB_CUDA_ARCHITECTURES", said)

    def test_other_architectures_than_build_keeps_are_said_to_be_kept(self):
        said, refused, _ = self.build("90", cache="80")
        self.assertIsNone(refused)
        self.assertRegex(said.splitlines()[0], r"^lab: (\S+/build) keeps the architectures it was configured for "
                                               r"\(80\), not LAB_CUDA_ARCHITECTURES=90; delete \1 to apply the new ones$")
        said, _, _ = self.build("80", cache="80")
        self.assertNotIn("keeps", said)

    def test_the_driver_refuses_it_in_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if k != "LAB_NO_BUILD"}
            r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "run", "02"], capture_output=True,
                               text=True, timeout=120, env=dict(env, LAB_CUDA_ARCHITECTURES="sm_90",
                                                                 LAB_BUILD_DIR=str(Path(tmp, "build"))))
            self.assertEqual(r.returncode, common.EXIT_BAD_INPUT, r.stdout + r.stderr)
            self.assertEqual(len((r.stdout + r.stderr).strip().splitlines()), 1, r.stdout + r.stderr)
            self.assertFalse(Path(tmp, "build").exists())


class Configure(unittest.TestCase):
    def test_the_tests_run_under_the_drivers_python(self):
        """ctest's Python is the one scripts/lab installs numpy into, not CMake's first python3 on PATH."""
        from labcli import setup
        seen = []
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(common, "BUILD", Path(tmp, "build")), \
                mock.patch.object(setup, "ensure_cpp_deps", lambda: None), \
                mock.patch.object(common.shutil, "which", lambda name, path=None: "/usr/bin/" + name), \
                mock.patch.object(common, "logged", lambda args, log, **kw: seen.append(args) or 0), \
                contextlib.redirect_stdout(io.StringIO()):
            common.configure()
        self.assertIn(f"-DPython3_EXECUTABLE={sys.executable}", seen[0])


class ParallelCheck(unittest.TestCase):
    """check --jobs N runs N programs at once but reports every verdict, in case order."""
    def test_jobs_keep_the_verdicts_and_the_order(self):
        import argparse
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section"  # --t N: sleeps (5 - N) / 10 s, exits N % 2 (odd T fails)
            fake.write_text("#!/usr/bin/env python3\nimport sys, time\nt = int(sys.argv[sys.argv.index('--t') + 1])\n"
                            "time.sleep((5 - t) / 10)\nsys.exit(t % 2)\n")
            fake.chmod(0o755)
            data = {"section": "99_fake", "variants": ["v"],
                    "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in range(1, 5)]}
            saved = (student.load_cases, student.program, student.gpu_available)
            student.load_cases = lambda section, extra=None: data
            student.program = lambda section, solution: [fake]
            student.gpu_available = lambda section, solution, timeout: (True, "")
            try:
                verdicts = {}
                for jobs in (1, 4):
                    a = argparse.Namespace(cases=None, solution=True, cpu=False, require_gpu=True, no_bugs=True,
                                           expect_fail=False, timeout=30, verbose=False, jobs=jobs)
                    results = student.check_section("99_fake", a)
                    verdicts[jobs] = [(r["case"], r["ok"]) for r in results]
            finally:
                student.load_cases, student.program, student.gpu_available = saved
        self.assertEqual(verdicts[1], [("t1", False), ("t2", True), ("t3", False), ("t4", True)])
        self.assertEqual(verdicts[4], verdicts[1])

    def checked_lines(self, program_body, data, solution=True):
        """What check_section printed over a stand-in program (Python; program_body follows `import
        sys`) and the case list `data`, on a GPU, one run at a time."""
        import argparse
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section"
            fake.write_text("#!/usr/bin/env python3\nimport sys\n" + program_body)
            fake.chmod(0o755)
            with mock.patch.object(student, "load_cases", lambda section, extra=None: data), \
                    mock.patch.object(student, "program", lambda section, solution: [fake]), \
                    mock.patch.object(student, "gpu_available", lambda section, solution, timeout: (True, "")), \
                    contextlib.redirect_stdout(io.StringIO()) as printed:
                a = argparse.Namespace(cases=None, solution=solution, cpu=False, require_gpu=True, no_bugs=True,
                                       expect_fail=False, timeout=30, verbose=False, jobs=1)
                student.check_section("99_fake", a)
        return printed.getvalue().splitlines()

    def test_the_columns_line_up_for_long_names(self):
        """A case list's lines keep their columns (the exit code, the seconds) whatever the length
        of a case's name or a variant's (09's names pass 58 characters, 08's variants 8)."""
        data = {"section": "99_fake", "variants": ["v", "ws-persistent"],
                "cases": [{"name": "short", "args": []},
                          {"name": "T_q=300 > T_kv=40 causal fp16 D=128 (whole tiles with no key) and more", "args": []}]
                + [{"name": f"filler {k}", "args": []} for k in range(48)]}  # 100 runs: [  1/100] .. [100/100]
        lines = [l for l in self.checked_lines("sys.exit(0)\n", data) if l.startswith("  [")]
        self.assertEqual(len(lines), 100, lines)
        self.assertEqual(len({l.index(" exit ") for l in lines}), 1, "\n".join(lines))
        self.assertEqual(len({l.index(" ok ") for l in lines}), 1, "\n".join(lines))

    def test_a_failure_already_shown_is_named_on_its_line(self):
        """A stub fails every case alike: the first failure's excerpt is shown, each later one is named
        on its own line (numbers aside), so the list stays one line a case."""
        data = {"section": "99_fake", "variants": ["v"],
                "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in range(1, 5)]}
        lines = self.checked_lines("t = sys.argv[sys.argv.index('--t') + 1]\n"  # the same verdict, its own numbers
                                   "print(f'  check    O too far from fp64: max error {t}.5')\nprint('FAIL: 99_fake v')\n"
                                   "sys.exit(1)\n", data, solution=False)
        cases = [l for l in lines if l.startswith("  [")]
        self.assertEqual(len(cases), 4, lines)
        self.assertFalse(cases[0].endswith(")"), cases)
        self.assertTrue(all(l.endswith("(the same kind of failure as [1])") for l in cases[1:]), cases)
        self.assertEqual(sum("max error" in l for l in lines), 1, lines)  # the excerpt once

    def test_another_variants_failure_is_shown_whatever_its_verdict(self):
        """Two variants are two exercises: the same verdict in both (numbers aside) is two failures,
        each with its excerpt; within one variant a repeat is named."""
        data = {"section": "99_fake", "variants": ["window", "document"],
                "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in (1, 2)]}
        lines = self.checked_lines("v = sys.argv[sys.argv.index('--variant') + 1]\n"
                                   "print(f'  check    O too far from fp64: max error 0.1 ({v})')\n"
                                   "sys.exit(1)\n", data, solution=False)
        cases = [l for l in lines if l.startswith("  [")]
        self.assertEqual([l.endswith(")") for l in cases], [False, False, True, True], cases)
        self.assertTrue(cases[2].endswith("(the same kind of failure as [1])") and cases[3].endswith("(the same kind of failure as [2])"),
                        cases)
        self.assertEqual(sum("max error" in l for l in lines), 2, lines)

    def test_a_bad_input_case_names_no_variant(self):
        """A bad-input case passes no --variant (its arguments are refused first): its line shows none,
        and its name gets no " causal" from its arguments."""
        data = {"section": "99_fake", "variants": ["softcap"], "cases": [],
                "bad_inputs": [{"name": "window without --window", "args": ["--variant", "window", "--causal"]}]}
        lines = self.checked_lines("print('bad input: --variant window needs --window')\nsys.exit(2)\n", data)
        case = next(l for l in lines if l.startswith("  ["))
        self.assertIn(" -        bad input: window without --window", case)
        self.assertFalse(case.endswith("causal") or "softcap" in case, case)

    @staticmethod
    def raising(condition, error):
        """A stand-in program's body that, where `condition` holds, fails as the Python harness reports
        an exception (labharness.run: one error line, exit 1), and passes elsewhere."""
        line = f"error: labs/99_fake.py:7 in kernel: {error} (LAB_TRACEBACK=1 shows the whole traceback)"
        return f"if {condition}:\n    print({line!r}, file=sys.stderr)\n    sys.exit(1)\n"

    def test_a_variant_that_raises_the_same_error_stops_its_runs(self):
        """A typo in one exercise raises the same error in every run of its variant: after the first
        few, its other runs are not started (said at the end, with the run that shows the error); the
        other variants' runs all go on."""
        data = {"section": "99_fake", "variants": ["typo", "fine"],
                "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in range(1, 7)]}
        lines = self.checked_lines(self.raising("sys.argv[sys.argv.index('--variant') + 1] == 'typo'",
                                                "AttributeError: module 'triton.language' has no attribute 'maximun'"), data)
        cases = [l for l in lines if l.startswith("  [")]
        self.assertEqual(sum(" typo " in l for l in cases), student.SAME_ERRORS_IN_A_ROW, cases)
        self.assertEqual(sum(" fine " in l and " ok " in l for l in cases), 6, cases)
        self.assertIn(f"; 3 runs of typo not run: its first {student.SAME_ERRORS_IN_A_ROW} raised the same error "
                      "(fix it first: [1])", lines[-1])
        self.assertIn("6 passed, 3 failed", lines[-1])

    def test_errors_that_differ_stop_nothing(self):
        """Runs of a variant that raise different errors, or pass between errors, all run."""
        data = {"section": "99_fake", "variants": ["v"],
                "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in range(1, 6)]}
        lines = self.checked_lines(self.raising("sys.argv[sys.argv.index('--t') + 1] != '2'", "ValueError: bad"), data)
        self.assertEqual(len([l for l in lines if l.startswith("  [")]), 5, lines)
        self.assertNotIn("not run", lines[-1])

    def test_a_bug_run_that_raises_is_not_caught(self):
        """A --bug run counts as caught when its self-check fails (exit 1, FAIL), not when the
        Python harness reports an exception with the same exit 1 (a branch that raises NameError)."""
        import argparse
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section"
            fake.write_text("#!/usr/bin/env python3\nimport sys\nbug = sys.argv[sys.argv.index('--bug') + 1] "
                            "if '--bug' in sys.argv else None\n"
                            "if bug == 'raises':\n"
                            "    print(\"error: labs/99_fake.py:7 in sweep: NameError: name 'BLOCK_M' is not defined "
                            "(LAB_TRACEBACK=1 shows the whole traceback)\", file=sys.stderr)\n"
                            "    sys.exit(1)\n"
                            "if bug == 'caught':\n"
                            "    print('FAIL: 99_fake: O too far from fp64')\n"
                            "    sys.exit(1)\n")
            fake.chmod(0o755)
            data = {"section": "99_fake", "variants": ["v"], "cases": [{"name": "t1", "args": ["--t", "1"]}],
                    "bugs": [{"bug": "caught", "name": "caught"}, {"bug": "raises", "name": "raises"}]}
            with mock.patch.object(student, "load_cases", lambda section, extra=None: data), \
                    mock.patch.object(student, "program", lambda section, solution: [fake]), \
                    mock.patch.object(student, "gpu_available", lambda section, solution, timeout: (True, "")), \
                    contextlib.redirect_stdout(io.StringIO()):
                a = argparse.Namespace(cases=None, solution=True, cpu=False, require_gpu=True, no_bugs=False,
                                       expect_fail=False, timeout=30, verbose=False, jobs=1)
                verdicts = [(r["case"], r["ok"]) for r in student.check_section("99_fake", a)]
        self.assertEqual(verdicts, [("t1", True), ("bug caught: caught", True), ("bug raises: raises", False)])

    def test_without_jobs_a_python_gpu_check_runs_several_at_once_and_others_one(self):
        import argparse
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section"  # appends "start end" of its run to runs (the probe: no --t)
            fake.write_text("#!/usr/bin/env python3\nimport sys, time\nstart = time.time()\n"
                            "time.sleep(0.4 if '--t' in sys.argv else 0)\n"
                            f"open('{tmp}/runs', 'a').write(f'{{start}} {{time.time()}}\\n')\n")
            fake.chmod(0o755)
            data = {"section": "99_fake", "variants": ["v"],
                    "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in range(1, 9)]}
            at_once = {}
            with mock.patch.object(student, "load_cases", lambda section, extra=None: data), \
                    mock.patch.object(student, "program", lambda section, solution: [fake]), \
                    contextlib.redirect_stdout(io.StringIO()):
                for on_gpu, python in ((True, True), (False, True), (True, False)):
                    (Path(tmp) / "runs").write_text("")
                    a = argparse.Namespace(cases=None, solution=True, cpu=not on_gpu, require_gpu=False, no_bugs=True,
                                           expect_fail=False, timeout=30, verbose=False, jobs=None)
                    with mock.patch.object(student, "gpu_available", lambda section, solution, timeout: (True, "")), \
                            mock.patch.object(student, "is_python", lambda section: python):
                        self.assertTrue(all(r["ok"] for r in student.check_section("99_fake", a)))
                    spans = [tuple(map(float, line.split())) for line in (Path(tmp) / "runs").read_text().split("\n") if line]
                    at_once[on_gpu, python] = max(sum(s0 <= t < s1 for s0, s1 in spans) for t, _ in spans)
        self.assertEqual(at_once, {(True, True): student.GPU_CHECK_JOBS, (False, True): 1, (True, False): 1})
        self.assertEqual(student.check_jobs(2, True, False), 2)  # --jobs, where given, is kept

    def test_check_all_goes_past_a_section_that_cannot_run_here(self):
        import argparse
        calls = []
        def fake_check(section, a):
            calls.append(section)
            return None if section == "08_b" else [{"ok": section != "09_c"}]
        saved = (student.resolve_all, student.build, student.check_section)
        student.resolve_all = lambda names: ["07_a", "08_b", "09_c"]
        student.build = lambda *args, **kw: None
        student.check_section = fake_check
        try:
            a = argparse.Namespace(section=["all"], solution=False, report=None)
            code_with_failure = student.cmd_check(a)
            student.resolve_all = lambda names: ["07_a", "08_b"]
            code_unchecked = student.cmd_check(a)
        finally:
            student.resolve_all, student.build, student.check_section = saved
        self.assertEqual(calls, ["07_a", "08_b", "09_c", "07_a", "08_b"])  # 09 is still checked after 08's 77
        self.assertEqual(code_with_failure, 1)
        self.assertEqual(code_unchecked, 77)

    @staticmethod
    @contextlib.contextmanager
    def stand_in_section(program_text, on_gpu):
        """check wired to one stand-in program (a Python script given --t) and a case list the test
        sets in the yielded dict; yields (a scratch folder, the case data)."""
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section"
            fake.write_text("#!/usr/bin/env python3\nimport sys\nt = sys.argv[sys.argv.index('--t') + 1]\n" + program_text)
            fake.chmod(0o755)
            data = {"section": "99_fake", "variants": ["v"], "cases": []}
            with mock.patch.multiple(student, program=lambda section, solution: [fake],
                                     gpu_available=lambda section, solution, timeout: (on_gpu, None if on_gpu else "no GPU"),
                                     resolve_all=lambda names: ["99_fake"], build=lambda *args, **kw: None,
                                     unit_test_program=lambda section, solution: None,
                                     load_cases=lambda section, extra=None: data):
                yield Path(tmp), data

    @staticmethod
    def check_args(**kw):
        import argparse
        return argparse.Namespace(**dict(dict(section=["99"], cases=None, solution=False, cpu=False, require_gpu=False,
                                              no_bugs=True, expect_fail=False, timeout=30, verbose=False, jobs=1,
                                              report=None), **kw))

    def test_a_gpu_only_rest_is_not_checked_never_passed(self):
        # Without a GPU, a run that exits 77 saying "not checked here" (its host part passed, the
        # rest only a GPU runs) is neither a pass nor a failure, and check ends 77, never 0.
        codes = {}
        with self.stand_in_section("if t == '1': print('FAIL'); sys.exit(1)\n"  # --t 1: a wrong answer
                                   "print('not checked here: needs a GPU: the mma part'); sys.exit(77)\n",
                                   on_gpu=False) as (tmp, data):
            for ts in (["2"], ["2", "1"]):
                data["cases"] = [{"name": f"t{t}", "args": ["--t", t]} for t in ts] + [
                    {"name": "gpu only", "args": ["--t", "3"], "cpu": False}]  # not run here: counted, said
                a = self.check_args(cpu=True, report=str(tmp / "r.json"))
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    codes[len(ts)] = student.cmd_check(a)
                report = json.loads(Path(a.report).read_text())
                self.assertEqual([bool(r["not_checked"]) for r in report], [True] + [False] * (len(ts) - 1))
        self.assertEqual(codes, {1: 77, 2: 1})
        self.assertIn("== 99_fake (CPU model): 0 passed, 1 failed, 1 not checked here (needs a GPU: the mma part); "
                      "1 GPU-only run of the case list not run here", out.getvalue())

    def test_runs_that_need_a_gpu_are_listed_once_a_variant(self):
        # 04's mma variant: one needs-gpu line a case would bury the scalar verdicts; the first is
        # listed (saying the rest are counted), the rest only counted; --verbose lists them all
        with self.stand_in_section("if '--variant' in sys.argv and sys.argv[sys.argv.index('--variant') + 1] == 'mma':\n"
                                   "    print('not checked here: needs a GPU: the mma part'); sys.exit(77)\n"
                                   "print('PASS: 99_fake v (CPU model)')\n", on_gpu=False) as (tmp, data):
            data["variants"] = data["cpu_variants"] = ["scalar", "mma"]
            data["cases"] = [{"name": f"t{t}", "args": ["--t", t]} for t in "123"]
            said = {}
            for verbose in (False, True):
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    code = student.cmd_check(self.check_args(cpu=True, verbose=verbose))
                self.assertEqual(code, 77)
                said[verbose] = out.getvalue()
        rows = [l for l in said[False].splitlines() if l.startswith("  [")]
        self.assertEqual([l.split("]")[1].split()[0] for l in rows], ["ok", "needs-gpu", "ok", "ok"], said[False])
        self.assertIn("(the other mma runs that need a GPU: counted at the end, not listed)", rows[1])
        self.assertIn("3 passed, 0 failed, 3 not checked here (needs a GPU: the mma part)", said[False])
        self.assertEqual(sum(" needs-gpu " in l for l in said[True].splitlines()), 3, said[True])

    def test_a_host_part_that_passed_is_told_from_one_never_checked(self):
        # 07's and 12's CPU model runs the student's host exercises and says "CPU part passed" before
        # "not checked here": such a run reads cpu-ok and is counted as passed as far as the model
        # goes, apart from a run that checked nothing (needs-gpu); check still ends 77.
        with self.stand_in_section("if t == '1': print('not checked here: needs a GPU: the mma part'); sys.exit(77)\n"
                                   "print('CPU part passed: 99_fake v (CPU model)')\n"
                                   "print('not checked here: needs a GPU: the mma part; the model checked your span')\n"
                                   "sys.exit(77)\n", on_gpu=False) as (tmp, data):
            data["cases"] = [{"name": f"t{t}", "args": ["--t", t]} for t in "122"]
            with contextlib.redirect_stdout(io.StringIO()) as out:
                code = student.cmd_check(self.check_args(cpu=True))
        said = out.getvalue()
        self.assertEqual(code, 77)
        self.assertEqual([l.split("]")[1].split()[0] for l in said.splitlines() if l.startswith("  [")],
                         ["needs-gpu", "cpu-ok", "cpu-ok"])
        self.assertIn("== 99_fake (CPU model): 0 passed, 0 failed, 2 passed as far as the CPU model goes (needs a GPU: "
                      "the mma part; the model checked your span), 1 not checked here (needs a GPU: the mma part)", said)

    def test_a_run_this_gpu_cannot_do_is_named_not_failed(self):
        # On a GPU, a run that exits 77 saying "cannot run here" (a Hopper-only variant, more shared
        # memory per block than this GPU has) is not checked here, and check ends 77; with
        # --require-gpu (the GPU machine's own tests) it is a failure.
        codes = {}
        with self.stand_in_section("if t == '1': print('PASS'); sys.exit(0)\n"  # --t 2: too much shared memory
                                   "print('cannot run here: this kernel needs 170 KB of shared memory per block and X "
                                   "(sm_86) allows 99 KB; add --cpu to run the CPU model instead', file=sys.stderr); "
                                   "sys.exit(77)\n", on_gpu=True) as (tmp, data):
            data["cases"] = [{"name": f"t{t}", "args": ["--t", t]} for t in "12"]
            for require_gpu in (False, True):
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    codes[require_gpu] = student.cmd_check(self.check_args(require_gpu=require_gpu))
                if not require_gpu:
                    said = out.getvalue()
        self.assertEqual(codes, {False: 77, True: 1})
        self.assertIn("== 99_fake: 1 passed, 0 failed, 1 not checked here (this kernel needs 170 KB", said)
        self.assertEqual(said.count("1 passed, 0 failed"), 1)  # one section: its line, not a total again

    def test_a_hanging_lab_stops_the_check_after_two_timeouts_in_a_row(self):
        # An endless loop hangs every case: two in a row stop the check (the rest named, not run),
        # which ends in 124 with a line on what a timeout most often is; apart, every case still runs.
        # The first case is also the probe run: if it hangs, no case is run at all.
        for hangs, want in (("234", "0 passed, 3 failed; stopped after 2 runs in a row timed out: 1 run not run ("),
                            ("24", "0 passed, 4 failed ("),
                            ("1", "== 99_fake: FAIL: the first case did not finish in 1 s: no case run")):
            with self.stand_in_section(f"import time\nif t in {hangs!r}: time.sleep(60)\nsys.exit(1)\n",
                                       on_gpu=False) as (tmp, data):
                data["cases"] = [{"name": f"t{t}", "args": ["--t", t]} for t in "1234"]
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    start = time.time()
                    code = student.cmd_check(self.check_args(cpu=True, timeout=1))
            said = out.getvalue()
            self.assertEqual(code, common.EXIT_TIMEOUT, said)
            self.assertLess(time.time() - start, 30)
            self.assertEqual(said.count(" TIMEOUT "), 0 if hangs == "1" else 2, said)
            self.assertIn(want, said)
            self.assertIn("lab: the program did not finish in 1 s: most often an endless loop", said)
            self.assertIn("scripts/lab check 99 --timeout 2", said)

    def test_the_cpu_models_first_case_hangs_in_a_minute_not_the_checks_limit(self):
        """The probe is a tiny shape: at check's default --timeout it is given CPU_PROBE_LIMIT, not
        five minutes; a --timeout the student gives holds for it too."""
        limits = []

        def run_limited(cmd, timeout, *args, **kwargs):
            limits.append(timeout)
            return common.EXIT_TIMEOUT, "\nTIMEOUT: stopped\n", timeout
        for timeout, want in ((student.CHECK_TIMEOUT, student.CPU_PROBE_LIMIT), (900, 900)):
            with self.stand_in_section("sys.exit(0)\n", on_gpu=False) as (tmp, data), \
                    mock.patch.object(student, "run_limited", run_limited), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                data["cases"] = [{"name": "t1", "args": ["--t", "1"]}]
                limits.clear()
                code = student.cmd_check(self.check_args(timeout=timeout))
            self.assertEqual((code, limits[-1]), (common.EXIT_TIMEOUT, want), out.getvalue())
            self.assertIn(f"the first case did not finish in {want} s: no case run", out.getvalue())

    def test_the_rerun_line_runs_from_where_the_student_is(self):
        # printed for the student's folder (from /tmp: the absolute path); the report's, as from the root
        here = os.getcwd()
        with self.stand_in_section("", on_gpu=False) as (tmp, data):
            data["cases"] = [{"name": "t1", "args": ["--t", "1"]}]
            missing = ROOT / "build" / "bin" / "lab_99_fake"  # never built: the run fails
            with mock.patch.object(student, "program", lambda section, solution: [missing]), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                os.chdir(tmp)
                try:
                    student.cmd_check(self.check_args(cpu=True, report=str(tmp / "r.json")))
                finally:
                    os.chdir(here)
            report = json.loads((tmp / "r.json").read_text())
        self.assertIn(f"the first failure, to run it alone: {missing} --variant v --iters 0 --t 1 --cpu\n", out.getvalue())
        self.assertEqual(report[0]["rerun"], "build/bin/lab_99_fake --variant v --iters 0 --t 1 --cpu")

    def test_each_failing_section_names_its_first_failure(self):
        # check 09 10 with both failing: a rerun line for each, so that fixing 09 leaves 10's on screen
        def rows(section, _):
            return [student.result_row(section, f"t{t}", "v", "pass", 1, False, None, 0.1, 1,
                                       [f"build/bin/lab_{section}", "--t", str(t)]) for t in (1, 2)]
        a = SimpleNamespace(section=["09", "10"], solution=False, report=None, cases=None, timeout=60)
        for sections, want in ((["09_triton", "10_flex"], ["the first failure of 09_triton, to run it alone: "
                                                           "build/bin/lab_09_triton --t 1",
                                                           "the first failure of 10_flex, to run it alone: "
                                                           "build/bin/lab_10_flex --t 1"]),
                               (["09_triton"], ["the first failure, to run it alone: build/bin/lab_09_triton --t 1"])):
            with mock.patch.object(student, "resolve_all", return_value=sections), \
                    mock.patch.object(student, "check_section", side_effect=rows), \
                    mock.patch.object(student, "build"), mock.patch.object(student, "python_parses"), \
                    mock.patch.object(student, "python_packages"), mock.patch.object(student, "stub_left"), \
                    mock.patch.object(student, "unit_test_targets", return_value=[]), \
                    contextlib.redirect_stdout(io.StringIO()) as printed:
                self.assertEqual(student.cmd_check(a), common.EXIT_FAIL)
            self.assertEqual([l for l in printed.getvalue().splitlines() if l.startswith("the first failure")], want)

    def test_a_stubs_passes_are_said_to_be_its_bad_input_cases(self):
        # a stub fails every case but the bad inputs, which the harness refuses before the student's
        # code runs: "1 passed" is not progress, and the summary says so (only then)
        program = "if t == '0': print('bad input: --t must be >= 1'); sys.exit(2)\nsys.exit(1 if t == '1' else 0)\n"
        with self.stand_in_section(program, on_gpu=False) as (tmp, data):
            data["bad_inputs"] = [{"name": "T=0", "args": ["--t", "0"]}]
            said = {}
            for ts in ("1", "12"):
                data["cases"] = [{"name": f"t{t}", "args": ["--t", t]} for t in ts]
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    student.cmd_check(self.check_args(cpu=True))
                said[ts] = out.getvalue()
        self.assertIn(": 1 passed (a bad-input case, which passes before your code runs), 1 failed", said["1"])
        self.assertIn(": 2 passed, 1 failed", said["12"])

    def test_a_lab_that_runs_another_sections_exercises_names_it(self):
        # 06 runs 05's exercises, 07 and 12 run 08's: a failure there may be the other file's
        self.assertEqual([student.included_labs(s) for s in ("01_naive", "06_paged", "07_sliding_window", "12_ring")],
                         [[], ["05_decode"], ["08_tma_skeleton"], ["08_tma_skeleton"]])

    def test_a_bug_caught_by_a_failing_lab_proves_nothing(self):
        # check --bugs on a lab that fails the case without the bug: the bug run "catches" it only
        # because everything fails, so it is marked early, neither passed nor failed; once the lab
        # passes the case, catching the bug counts
        said = {}
        for fails in ("1", "none"):
            program = f"sys.exit(1 if t == '{fails}' or '--bug' in sys.argv else 0)\n"
            with self.stand_in_section(program, on_gpu=False) as (tmp, data):
                data["cases"] = [{"name": "t1", "args": ["--t", "1"]}]
                data["bugs"] = [{"bug": "b", "name": "t2", "args": ["--t", "2"]}]
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    code = student.cmd_check(self.check_args(cpu=True, no_bugs=False, bugs=True))
                said[fails] = (code, out.getvalue())
        self.assertEqual(said["1"][0], common.EXIT_FAIL)
        self.assertRegex(said["1"][1], r"\] early +exit 1 .* bug b: t2")
        self.assertIn(": 0 passed, 1 failed, 1 --bug run not counted (marked early", said["1"][1])
        self.assertEqual(said["none"][0], common.EXIT_PASS)
        self.assertIn(": 2 passed, 0 failed", said["none"][1])

    def test_report_path_is_checked_before_anything_runs(self):
        import argparse
        ran = []
        saved = (student.resolve_all, student.build)
        student.resolve_all = lambda names: ["01_naive"]
        student.build = lambda *args, **kw: ran.append("build")
        try:
            with tempfile.TemporaryDirectory() as tmp:
                for bad in (str(Path(tmp) / "no" / "r.json"), tmp):
                    a = argparse.Namespace(section=["01"], solution=False, report=bad)
                    with self.assertRaises(common.BadInput):
                        student.cmd_check(a)
        finally:
            student.resolve_all, student.build = saved
        self.assertEqual(ran, [])

    def test_a_missing_hidden_case_file_is_refused_before_the_build(self):
        a = SimpleNamespace(section=["11"], solution=False, report=None, cases="/no/such/cases.json")
        with mock.patch.object(student, "build") as build, self.assertRaises(common.BadInput) as refused:
            student.cmd_check(a)
        self.assertFalse(build.called)  # a build takes minutes on a laptop: not for a typo
        self.assertIn("/no/such/cases.json", str(refused.exception))

    def test_unit_tests_run_first_in_a_check(self):
        self.assertEqual(student.unit_test_program("05_decode", False).name, "lab_exercises_05_decode")
        self.assertEqual(student.unit_test_program("05_decode", True).name, "exercises_05_decode")
        self.assertEqual(student.unit_test_program("12_ring", False).name, "lab_exercises_12_ring")
        self.assertIsNone(student.unit_test_program("01_naive", False))

    def test_gpus_spread_the_runs_over_the_visible_devices(self):
        import argparse
        import os
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake_section"  # writes the device it was given to dev<T>
            fake.write_text("#!/usr/bin/env python3\nimport os, sys\nt = sys.argv[sys.argv.index('--t') + 1]\n"
                            f"open('{tmp}/dev' + t, 'w').write(os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))\n")
            fake.chmod(0o755)
            data = {"section": "99_fake", "variants": ["v"],
                    "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in range(1, 5)]}
            saved = (student.load_cases, student.program, student.gpu_available, os.environ.get("CUDA_VISIBLE_DEVICES"))
            student.load_cases = lambda section, extra=None: data
            student.program = lambda section, solution: [fake]
            student.gpu_available = lambda section, solution, timeout: (True, "")
            os.environ["CUDA_VISIBLE_DEVICES"] = "3,5,7"
            try:
                a = argparse.Namespace(cases=None, solution=True, cpu=False, require_gpu=True, no_bugs=True,
                                       expect_fail=False, timeout=30, verbose=False, jobs=4, gpus=2)
                self.assertTrue(all(r["ok"] for r in student.check_section("99_fake", a)))
                devices = [(Path(tmp) / f"dev{t}").read_text() for t in range(1, 5)]
            finally:
                student.load_cases, student.program, student.gpu_available = saved[:3]
                if saved[3] is None:
                    del os.environ["CUDA_VISIBLE_DEVICES"]
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved[3]
        self.assertEqual(devices, ["3", "5", "3", "5"])  # the first two of the visible ones, in turn
        self.assertEqual(common.gpu_devices(1), [None])      # one GPU: the environment is left alone

    def test_more_gpus_than_the_machine_shows_is_bad_input(self):
        """--gpus 3 on a machine of two (or none): refused before anything runs, not runs that cannot
        start on a GPU that is not there (a grade would leave them out of its total)."""
        saved = os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        try:
            with mock.patch.object(common, "gpu_count", lambda: 2):
                self.assertEqual(common.gpu_devices(2), ["0", "1"])
                with self.assertRaisesRegex(common.BadInput, r"^--gpus 3: this machine shows 2 GPUs \(nvidia-smi -L\)"):
                    common.gpu_devices(3)
            with mock.patch.object(common, "gpu_count", lambda: 0):
                with self.assertRaisesRegex(common.BadInput, "shows no GPUs"):
                    common.gpu_devices(2)
            os.environ["CUDA_VISIBLE_DEVICES"] = "4"
            with self.assertRaisesRegex(common.BadInput, r"shows 1 GPU \(CUDA_VISIBLE_DEVICES\)"):
                common.gpu_devices(2)
        finally:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            if saved is not None:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved


class Cases(unittest.TestCase):
    data = {"section": "01_naive", "variants": ["kernels", "cublas"],
            "cases": [{"name": "a", "args": ["--t", "1"]}, {"name": "big", "args": ["--t", "5000"], "cpu": False},
                      {"name": "one variant", "args": [], "variants": ["cublas"]}],
            "bugs": [{"bug": "no-max-subtract", "name": "b", "args": ["--magnitude", "8"]}]}

    def test_gpu_solution_runs_every_variant_and_the_bugs(self):
        runs = student.expand_cases(self.data, solution=True, bugs=True, on_gpu=True)
        self.assertEqual(len(runs), 2 + 2 + 1 + 2)
        bug_runs = [r for r in runs if r[3] == "fail"]
        self.assertEqual(len(bug_runs), 2)
        self.assertEqual(bug_runs[0][2][-2:], ["--bug", "no-max-subtract"])

    def test_bug_cases_run_only_when_asked(self):
        runs = student.expand_cases(self.data, solution=False, bugs=False, on_gpu=True)
        self.assertTrue(all(r[3] == "pass" for r in runs))
        runs = student.expand_cases(self.data, solution=False, bugs=True, on_gpu=True)  # check --bugs on a lab
        self.assertEqual([r[2][-1] for r in runs if r[3] == "fail"], ["no-max-subtract"] * 2)

    def test_cpu_model_skips_heavy_cases_and_runs_one_variant(self):
        runs = student.expand_cases(self.data, solution=True, bugs=True, on_gpu=False)
        # "one variant" is cublas's alone, a variant the CPU does not run here: not relabelled, skipped
        self.assertEqual([r[0] for r in runs], ["a", "bug no-max-subtract: b"])
        self.assertTrue(all(r[1] == "kernels" for r in runs))

    def test_cpu_variants_run_each_case_on_each_of_them(self):
        # 05's split runs the merge that single never needs; 10's cases each name their own variant
        data = dict(self.data, cpu_variants=["kernels", "cublas"])
        runs = student.expand_cases(data, solution=False, bugs=False, on_gpu=False)
        self.assertEqual([(r[0], r[1]) for r in runs], [("a", "kernels"), ("a", "cublas"), ("one variant", "cublas")])
        for f in ("05_decode", "06_paged"):  # the committed case files say so
            with self.subTest(f):
                cpu = {r[1] for r in student.expand_cases(student.load_cases(f), False, False, on_gpu=False)}
                self.assertEqual(cpu, {"single", "split"})
        flex = student.expand_cases(student.load_cases("10_flex"), False, False, on_gpu=False)
        self.assertEqual({r[1] for r in flex}, {"softcap", "alibi", "window", "document"})
        self.assertTrue(all(r[0].split()[0] == r[1] for r in flex if r[3] == "pass"), "each case on its own variant")

    def test_bad_inputs_run_for_stubs_and_solutions_alike(self):
        data = dict(self.data, bad_inputs=[{"name": "T=0", "args": ["--t", "0"]}])
        for solution in (False, True):
            runs = student.expand_cases(data, solution=solution, bugs=True, on_gpu=True)
            self.assertEqual([r[3] for r in runs if r[0] == "bad input: T=0"], ["bad-input"])

    def test_no_bench_entry_times_a_run_twice(self):
        # the same variant on the same arguments (in any order) in two entries of one sweep or study:
        # the bench would time it twice and the tables hold two records of one run
        for path in (ROOT / "tests" / "cases").glob("*.json"):
            data = student.load_cases(path.stem)
            seen = {}
            for n, e in enumerate(data.get("bench", [])):
                for v in e.get("variants", data["variants"]):
                    key = (e.get("tag"), e.get("program"), v, tuple(sorted(e["args"])))
                    self.assertFalse(key in seen, f"{path.name}: bench[{n}] repeats bench[{seen.get(key)}] ({v})")
                    seen[key] = n

    def test_every_committed_case_file_is_well_formed(self):
        for path in (ROOT / "tests" / "cases").glob("*.json"):
            data = student.load_cases(path.stem)
            folder = ROOT / ("solutions" if (ROOT / "solutions").is_dir() else "labs")  # (a student release: labs/)
            self.assertTrue(any((folder / f"{data['section']}{x}").exists() for x in (".cu", ".py")), path)
            for case in data["cases"] + data.get("bugs", []):
                self.assertIn("name", case, path)
                self.assertIsInstance(case.get("args", []), list, path)

    def test_sanitizer_shapes(self):
        import cases
        base = {"section": "06_paged", "cases": []}
        self.assertEqual(cases.sanitize_shapes(base), [cases.DEFAULT_SANITIZE_SHAPE])
        self.assertEqual(cases.sanitize_shapes(dict(base, sanitize={"args": ["--t", "5"]})), [["--t", "5"]])
        two = dict(base, sanitize={"shapes": [["--page-size", "16"], ["--page-size", "32"]]})
        self.assertEqual(cases.sanitize_shapes(cases.validate(two)), [["--page-size", "16"], ["--page-size", "32"]])
        for bad in ({"shapes": []}, {"shapes": [["--t", 5]]}, {"args": ["--t", "1"], "shapes": [["--t", "1"]]}):
            with self.assertRaises(cases.CaseFileError):
                cases.validate(dict(base, sanitize=bad))
        # 06 sanitizes page 16 (the default page) and page 32 (a page size read at run time), and two
        # sliding windows whose keys lie past the split's first staged table window (re-staged); then
        # the smaller configurations (--smem-limit 99: one warp set at D = 128, a re-staged window
        # among them, and 2-stage rings at D = 64; 163: 2-stage rings at D = 128).
        shapes = cases.sanitize_shapes(student.load_cases("06_paged"))
        self.assertEqual([s[s.index("--page-size") + 1] for s in shapes], ["16", "32", "16", "16", "16", "16"] + ["16"] * 4)
        self.assertEqual(sum("hnd" in s for s in shapes), 1)  # and the hnd pool layout once
        self.assertEqual(sum("--window" in s for s in shapes), 3)
        limits = lambda section: sorted({s[s.index("--smem-limit") + 1] for s in cases.sanitize_shapes(student.load_cases(section))
                                         if "--smem-limit" in s})
        self.assertEqual(limits("06_paged"), ["163", "99"])
        self.assertEqual(limits("05_decode"), ["48", "99"])  # 05 at 163 KB takes its full configuration
        # 05 and 06 each sanitize a shape whose K/V exceed the H200's 50 MB L2: the kernel that copies
        # them evict-first (common/decode/decode.cuh, STREAM_KV). Both sections default to D = 128, fp16.
        def kv_megabytes(shape):
            arg = lambda name, default: int(shape[shape.index(name) + 1]) if name in shape else default
            return arg("--b", 1) * arg("--t-kv", 1024) * arg("--h-kv", arg("--h", 8)) * arg("--d", 128) * 2 * 2 / 1e6
        for section in ("05_decode", "06_paged"):
            sizes = [kv_megabytes(s) for s in cases.sanitize_shapes(student.load_cases(section))]
            self.assertTrue(any(mb > 50 for mb in sizes) and any(mb < 50 for mb in sizes), (section, sizes))

    def test_a_python_lab_copied_out_of_the_tree_finds_the_harness(self):
        # The grader runs each submission's copy from a folder of its own, not from labs/.
        with tempfile.TemporaryDirectory() as tmp:
            for s in ("09_triton", "10_flex"):
                stub = make_labs.generated_stub(ROOT / "labs" / f"{s}.py")  # not the student's work in progress
                if stub is None:
                    self.skipTest(f"labs/{s}.py holds edits and nothing here tells its stub")
                Path(tmp, f"{s}.py").write_bytes(stub)
                code, out, _ = common.run_limited(common.program(s, False, labs_dir=tmp) + ["--help"], 120)
                self.assertEqual(code, 0, out)
                self.assertIn("--variant", out)
                self.assertNotIn("Traceback", out)

    @needs_solutions
    def test_a_solution_handed_in_as_a_lab_says_so(self):
        # The grading example's full-marks submission: the grader counts only a lab's records.
        py = student.handed_in(ROOT / "solutions" / "09_triton.py")
        self.assertIn('build="lab",', py)
        self.assertNotIn('build="solution"', py)
        cu = ROOT / "solutions" / "01_naive.cu"
        self.assertEqual(student.handed_in(cu), cu.read_text())  # the build system marks a compiled lab

    @needs_solutions
    def test_the_grading_example_checks_the_solutions_speed(self):
        # A copy of the solution that does not time as the solution (or not at all) is a grader fault.
        names = ["01_naive", "10_flex", "11_backward"]
        c01 = student.load_cases("01_naive")["cases"]

        def verdicts(speeds):
            def step(title, cmd, timeout):
                grades = Path(cmd[cmd.index("--out") + 1])
                def write(sub, sections):
                    (grades / sub).mkdir(parents=True, exist_ok=True)
                    (grades / sub / "grade.json").write_text(json.dumps({"gpu": "NVIDIA H200", "total": 0.0, "sections": sections}))
                write("solutions", {s: {"correctness": 100.0, "speed_ratio": speeds[s]} for s in names})
                write("stubs", {s: {"correctness": 0.0, "unmodified_stub": True} for s in names})
                bug = lambda c: "wrong answer" if "--magnitude" in c.get("args", []) else "pass"
                write("planted-bug", {"01_naive": {"cases": [{"case": c["name"], "status": bug(c)} for c in c01]}})
                hung = lambda c: "timeout" if "65" in c.get("args", []) else "pass"
                write("hang", {"01_naive": {"cases": [{"case": c["name"], "status": hung(c)} for c in c01]}})
                return common.EXIT_PASS
            with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()) as said:
                code = student.grading_example(Path(tmp, "ge"), names, ["lab"], step)
            return code, said.getvalue()

        code, said = verdicts({"01_naive": 1.0, "10_flex": 0.98, "11_backward": 1.03})
        self.assertEqual(code, common.EXIT_PASS, said)
        code, said = verdicts({"01_naive": 1.0, "10_flex": 0.72, "11_backward": None})
        self.assertEqual(code, common.EXIT_FAIL, said)
        self.assertIn("10_flex timed at 0.72x the solution", said)
        self.assertIn("11_backward was not timed", said)

    def test_a_failed_case_is_shown_as_a_command_to_run_alone(self):
        exe = [ROOT / "build" / "bin" / "lab_01_naive"]
        self.assertEqual(student.rerun_line(exe + ["--variant", "kernels", "--quiet", "--t", "1", "--dump", "/tmp/a b"]),
                         "build/bin/lab_01_naive --variant kernels --t 1 --dump '/tmp/a b'")
        self.assertEqual(student.rerun_line([sys.executable, ROOT / "labs" / "09_triton.py", "--cpu"]),
                         "python3 labs/09_triton.py --cpu")
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as elsewhere:
            try:  # printed, from the student's folder: relative under it, else absolute
                for folder, shown in ((ROOT, "build/bin/lab_01_naive"), (ROOT / "labs", str(exe[0])),
                                      (elsewhere, str(exe[0]))):
                    os.chdir(folder)
                    self.assertEqual(student.rerun_line(exe + ["--t", "1"], common.cwd_relative), f"{shown} --t 1")
                    self.assertEqual(student.rerun_line(exe + ["--t", "1"]), "build/bin/lab_01_naive --t 1")
            finally:
                os.chdir(here)

    @needs_solutions
    def test_make_labs_refuses_what_it_does_not_know(self):
        # make_labs.py regenerates every lab: an option it does not know (--help included) must
        # write nothing, not take it for a plain run over a student's work in progress.
        with tempfile.TemporaryDirectory() as tmp:
            for d in ("scripts", "solutions", "labs"):
                Path(tmp, d).mkdir()
            script = Path(tmp, "scripts", "make_labs.py")
            script.write_text((ROOT / "scripts" / "make_labs.py").read_text())
            Path(tmp, "solutions", "01_naive.cu").write_text((ROOT / "solutions" / "01_naive.cu").read_text())
            lab = Path(tmp, "labs", "01_naive.cu")
            lab.write_text("// the student's work\n")
            for args in (["--help"], ["--chek"], ["--check", "--force"]):
                r = subprocess.run([sys.executable, str(script)] + args, capture_output=True, text=True)
                self.assertEqual(r.returncode, 2, args)
                self.assertIn("usage: make_labs.py", r.stderr)
                self.assertEqual(lab.read_text(), "// the student's work\n", args)
            r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "['01_naive.cu']"))
            self.assertEqual(lab.read_text(), "// the student's work\n")

    @needs_solutions
    def test_stub_tests_stand_down_once_a_lab_is_filled(self):
        # A student's finished lab must not turn `scripts/lab test` red: the tests that want a
        # lab to fail hold only for the untouched stub (expect_exit.py --stub skips them after).
        expect = [sys.executable, str(ROOT / "tests" / "expect_exit.py"), "--code", "1"]
        fails = ["--", sys.executable, "-c", "import sys; sys.exit(1)"]
        with tempfile.TemporaryDirectory() as tmp:
            sol, lab = Path(tmp, "solutions", "01_naive.cu"), Path(tmp, "labs", "01_naive.cu")
            sol.parent.mkdir()
            lab.parent.mkdir()
            sol.write_text((ROOT / "solutions" / "01_naive.cu").read_text())
            lab.write_text(make_labs.make_stub(sol.read_text(), sol.name))
            self.assertTrue(make_labs.is_untouched_stub(lab))
            self.assertEqual(subprocess.run(expect + ["--stub", str(lab)] + fails, capture_output=True).returncode, 0)
            lab.write_text(sol.read_text())  # the student's work
            self.assertFalse(make_labs.is_untouched_stub(lab))
            r = subprocess.run(expect + ["--stub", str(lab)] + fails, capture_output=True, text=True)
            self.assertEqual(r.returncode, 77, r.stdout)
            self.assertIn("not the generated stub", r.stdout)
            sol.unlink()  # a student release, before its stubs' digests are written
            self.assertIsNone(make_labs.is_untouched_stub(lab))
            # a release's digests tell the stub from the student's work without solutions/
            stub = make_labs.make_stub((ROOT / "solutions" / "01_naive.cu").read_text(), sol.name)
            lab.write_text(stub)
            (lab.parent / make_labs.STUB_DIGESTS).write_text("mangled\n" + make_labs.stub_digests(lab.parent))
            self.assertTrue(make_labs.is_untouched_stub(lab))
            lab.write_text(stub.replace("TODO(", "TODO (", 1))  # one character of the student's
            self.assertFalse(make_labs.is_untouched_stub(lab))
            self.assertIsNone(make_labs.is_untouched_stub(lab.parent / "02_v1_tile.cu"))  # not listed

    @needs_solutions
    def test_the_regions_read_from_a_stub_hold_the_whole_region(self):
        # a release has no solution to make the stub's regions again: reading them from the stub
        # must take in every line a student rewrites, or an edited region could pass for untouched
        for src in sorted((ROOT / "solutions").glob("[0-9][0-9]_*.*")):
            regions = []
            stub = make_labs.make_stub(src.read_text(), src.name, regions=regions).splitlines()
            read = make_labs.stub_regions(stub)
            self.assertEqual([first for _, first, _ in read], [first for first, _ in regions], src.name)
            for (ident, _, end), (_, exact_end) in zip(read, regions):
                self.assertGreaterEqual(end, exact_end, f"{src.name}: {ident}")

    @needs_solutions
    def test_a_failure_names_the_exercises_still_the_stub(self):
        # one exercise written, the other not: the check's failure of the whole section must not
        # read as the written one being wrong
        sol_text = (ROOT / "solutions" / "03_v2_loop_order.cu").read_text()
        stub = make_labs.make_stub(sol_text, "03_v2_loop_order.cu")
        written = make_labs.make_stub(sol_text, "03_v2_loop_order.cu", only={"deferred-normalisation"})
        runs = [(1, "FAIL: 03_v2_loop_order v2 (CPU model)\n")]

        def run_limited(cmd, timeout, echo=None, extra_env=None, stuck=None):
            echo(runs[0][1].encode())
            return runs[0][0], runs[0][1], 0.1
        with tempfile.TemporaryDirectory() as tmp:
            sol, lab = Path(tmp, "solutions", "03_v2_loop_order.cu"), Path(tmp, "labs", "03_v2_loop_order.cu")
            sol.parent.mkdir()
            lab.parent.mkdir()
            sol.write_text(sol_text)
            for tree in ("instructor", "release"):
                said = {}
                for name, text in (("stub", stub), ("one written", written), ("both written", sol_text)):
                    lab.write_text(text)
                    a = SimpleNamespace(section="03", solution=False, args=[], timeout=60)
                    with mock.patch.object(student, "ROOT", Path(tmp)), \
                            mock.patch.object(student, "run_limited", run_limited), \
                            mock.patch.object(student, "build"), mock.patch.object(student, "python_parses"), \
                            mock.patch.object(student, "python_packages"), \
                            contextlib.redirect_stdout(io.StringIO()) as printed:
                        self.assertEqual(student.cmd_run(a), 1)
                    said[name] = printed.getvalue().splitlines()[1:]
                self.assertEqual(said["stub"], [student.still_the_stub("03_v2_loop_order")], tree)
                self.assertEqual(said["one written"], [
                    "lab: EXERCISE deferred-normalisation in labs/03_v2_loop_order.cu is still the stub: the check "
                    "cannot pass until it is written (ch12/03_v2_loop_order.md)"], tree)
                self.assertEqual(said["both written"], [], tree)
                if tree == "instructor":  # then a release: no solutions/; its digests and commit tell the stub
                    lab.write_text(stub)
                    (lab.parent / make_labs.STUB_DIGESTS).write_text(make_labs.stub_digests(lab.parent))
                    sol.unlink()
                    for args in (["init", "-q"], ["add", "labs"], ["commit", "-q", "-m", "release"]):
                        subprocess.run(["git", "-C", tmp, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                                       capture_output=True, check=True)

    @needs_solutions
    def test_the_exercises_only_a_gpu_runs_are_named_apart_on_the_cpu_model(self):
        # 07 without a GPU: its CPU model runs tile-span and edge-mask, never mma-online-softmax. A
        # failure there is not the softmax's, and a run that passes what it can (exit 77, "not
        # checked here") with the softmax still the stub must say so, not leave it unsaid
        sol_text = (ROOT / "solutions" / "07_sliding_window.cu").read_text()
        softmax_left = make_labs.make_stub(sol_text, "07_sliding_window.cu", only={"mma-online-softmax"})
        two_left = make_labs.make_stub(sol_text, "07_sliding_window.cu", only={"edge-mask", "mma-online-softmax"})
        gpu_line = ("lab: EXERCISE mma-online-softmax in labs/07_sliding_window.cu is still the stub: only a GPU runs "
                    "it, and a GPU's check cannot pass until it is written (ch12/07_sliding_window.md)")
        passed_in_part = (77, "PASS\nnot checked here: needs a GPU: EXERCISE mma-online-softmax runs in the mma "
                              "kernel only\n")
        failed = (1, "FAIL: 07_sliding_window window (CPU model)\n")
        with tempfile.TemporaryDirectory() as tmp:
            sol, lab = Path(tmp, "solutions", "07_sliding_window.cu"), Path(tmp, "labs", "07_sliding_window.cu")
            sol.parent.mkdir()
            lab.parent.mkdir()
            sol.write_text(sol_text)

            def said_by_run(text, result, args):
                lab.write_text(text)

                def run_limited(cmd, timeout, echo=None, extra_env=None, stuck=None):
                    echo(result[1].encode())
                    return result[0], result[1], 0.1
                a = SimpleNamespace(section="07", solution=False, args=args, timeout=60)
                with mock.patch.object(student, "ROOT", Path(tmp)), \
                        mock.patch.object(student, "run_limited", run_limited), \
                        mock.patch.object(student, "build"), mock.patch.object(student, "python_parses"), \
                        mock.patch.object(student, "python_packages"), \
                        contextlib.redirect_stdout(io.StringIO()) as printed:
                    self.assertEqual(student.cmd_run(a), result[0])
                return [l for l in printed.getvalue().splitlines() if l.startswith("lab: EXERCISE")]
            self.assertEqual(said_by_run(softmax_left, passed_in_part, ["--cpu"]), [gpu_line])
            self.assertEqual(said_by_run(two_left, failed, ["--cpu"]), [
                "lab: EXERCISE edge-mask in labs/07_sliding_window.cu is still the stub: the check cannot pass until "
                "it is written (ch12/07_sliding_window.md)", gpu_line])
            self.assertEqual(said_by_run(two_left, failed, []), [  # on a GPU both are the check's
                "lab: EXERCISE edge-mask, mma-online-softmax in labs/07_sliding_window.cu are still the stub: the "
                "check cannot pass until they are written (ch12/07_sliding_window.md)"])
            # all written: the GPU-only one is named as not checked here, not passed over in silence
            self.assertEqual(said_by_run(sol_text, passed_in_part, ["--cpu"]), [
                "lab: EXERCISE mma-online-softmax in labs/07_sliding_window.cu is written and compiled but not "
                "checked here (only a GPU runs it): scripts/lab check 07 on a GPU checks it"])
            self.assertEqual(said_by_run(sol_text, (1, "FAIL: 07_sliding_window window\n"), []), [])  # on a GPU

            # check: a case list checked in part on the CPU model says it too, after its summary
            lab.write_text(softmax_left)
            row = student.result_row("07_sliding_window", "T=63 W=1", "window", "pass", 77, False,
                                     "needs a GPU: EXERCISE mma-online-softmax runs in the mma kernel only", 0.1, 1,
                                     ["build/bin/lab_07_sliding_window", "--variant", "window", "--cpu"])
            a = SimpleNamespace(section=["07"], solution=False, report=None, cases=None, timeout=60)
            with mock.patch.object(student, "ROOT", Path(tmp)), \
                    mock.patch.object(student, "check_section", return_value=[row]), \
                    mock.patch.object(student, "build"), mock.patch.object(student, "python_parses"), \
                    mock.patch.object(student, "python_packages"), \
                    mock.patch.object(student, "unit_test_targets", return_value=[]), \
                    contextlib.redirect_stdout(io.StringIO()) as printed:
                self.assertEqual(student.cmd_check(a), common.EXIT_CANNOT_RUN)
            self.assertEqual([l for l in printed.getvalue().splitlines() if l.startswith("lab: EXERCISE")], [gpu_line])

    def test_every_gpu_exercise_of_a_case_file_is_an_exercise_of_its_section(self):
        for path in sorted((ROOT / "tests" / "cases").glob("[0-9][0-9]_*.json")):
            names = json.loads(path.read_text()).get("gpu_exercises", [])
            source = next((ROOT / d / f"{path.stem}{ext}" for d in ("solutions", "labs") for ext in (".cu", ".py")
                           if (ROOT / d / f"{path.stem}{ext}").exists()))
            for name in names:
                self.assertIn(f"EXERCISE {name}:", source.read_text(), f"{path.name}: gpu_exercises names {name}")

    def test_every_test_that_wants_a_lab_to_fail_is_a_stub_test(self):
        ctest = common.BUILD / "tests" / "CTestTestfile.cmake"
        if not ctest.exists():
            self.skipTest(f"no configured tests in {common.BUILD}")
        text = ctest.read_text()
        for line in text.splitlines():
            if not line.startswith("add_test("):
                continue
            runs_lab = re.search(r'"[^"]*/(bin/lab_[0-9]|labs/[0-9][0-9]_)', line) or '"--expect-fail"' in line
            wants_failure = '"--code" "1"' in line or '"--expect-fail"' in line
            if runs_lab and wants_failure and "_filled" not in line:
                self.assertIn('"--stub"', line, line[:160])
            if '"--stub"' in line:  # its skip (77) must count as skipped, not failed
                name = re.match(r"add_test\((\[=\[.*?\]=\])", line).group(1)
                props = next(l for l in text.splitlines() if l.startswith(f"set_tests_properties({name} "))
                self.assertIn('SKIP_RETURN_CODE "77"', props, name)

    @needs_solutions
    def test_make_labs_never_overwrites_a_students_work_unasked(self):
        with tempfile.TemporaryDirectory() as tmp:
            root, build_dir = Path(tmp), Path(tmp, "build")
            (root / "solutions").mkdir()
            sol = root / "solutions" / "01_naive.cu"
            sol.write_text((ROOT / "solutions" / "01_naive.cu").read_text())
            make_labs.generate_all(root / "solutions", root / "labs")
            git = lambda *args: subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                                               capture_output=True, check=True)
            git("init", "-q")
            git("add", "solutions", "labs")
            git("commit", "-q", "-m", "stubs")
            lab = root / "labs" / "01_naive.cu"
            update = lambda check, force=False: student.update_labs(root, check, force, build_dir)
            edit_given_code = lambda n: sol.write_text(sol.read_text().replace(
                "  // BEGIN EXERCISE softmax", f"  // given code, edit {n}\n  // BEGIN EXERCISE softmax", 1))
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(update(True), common.EXIT_PASS)
                lab.write_text(lab.read_text() + "// my softmax\n")  # a student's work
                self.assertEqual(update(True), common.EXIT_PASS)  # not a stale stub
                with self.assertRaises(common.BadInput):
                    update(False)
                self.assertIn("my softmax", lab.read_text())  # nothing written
                update(False, force=True)  # copied aside, then the stub
                self.assertNotIn("my softmax", lab.read_text())
                self.assertIn("my softmax", next(build_dir.glob("labs-backup/*/01_naive.cu")).read_text())
                git("checkout", "-q", "labs")
                edit_given_code(1)  # a maintainer's edit: the committed stub is stale, then rewritten
                self.assertEqual(update(True), common.EXIT_FAIL)
                self.assertEqual(update(False), common.EXIT_PASS)
                edit_given_code(2)  # and again, before any commit: the lab is as make-labs wrote it
                self.assertEqual(update(True), common.EXIT_FAIL)
                self.assertEqual(update(False), common.EXIT_PASS)
                self.assertIn("edit 2", lab.read_text())
                lab.write_text(lab.read_text() + "// my softmax again\n")  # work on a stub make-labs wrote
                with self.assertRaises(common.BadInput):
                    update(False)

    def test_the_generated_stub_is_read_never_the_students_work(self):
        """What a test of the stub reads, in this tree and in a release (no solutions/), with and
        without git: the stub as generated, though the student edited or even committed the lab."""
        import shutil
        stub = make_labs.make_stub((ROOT / "solutions" / "01_naive.cu").read_text(), "01_naive.cu").encode() \
            if (ROOT / "solutions").is_dir() else make_labs.generated_stub(ROOT / "labs" / "01_naive.cu")
        if stub is None:
            self.skipTest("labs/01_naive.cu holds edits and nothing here tells its stub")
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "labs").mkdir()
            lab = root / "labs" / "01_naive.cu"
            if (ROOT / "solutions").is_dir():  # a full tree: made from the solution
                (root / "solutions").mkdir()
                shutil.copy(ROOT / "solutions" / "01_naive.cu", root / "solutions")
                lab.write_bytes(stub + b"// my work\n")
                self.assertEqual(make_labs.generated_stub(lab), stub)
                shutil.rmtree(root / "solutions")
            # a release: the untouched file, by its digest
            lab.write_bytes(stub)
            (root / "labs" / make_labs.STUB_DIGESTS).write_text(make_labs.stub_digests(root / "labs"))
            self.assertEqual(make_labs.generated_stub(lab), stub)
            lab.write_bytes(stub + b"// my work\n")
            self.assertIsNone(make_labs.generated_stub(lab))  # no git, no copy: nothing tells
            lab.write_bytes(stub)
            make_labs.keep_stub_copies(root / "labs")  # as scripts/lab release keeps them
            lab.write_bytes(stub + b"// my work\n")
            self.assertEqual(make_labs.generated_stub(lab), stub)
            (root / "labs" / make_labs.STUB_COPIES / lab.name).write_bytes(stub + b"// edited\n")
            self.assertIsNone(make_labs.generated_stub(lab))  # a copy that is no longer the stub tells nothing
            git = lambda *args: subprocess.run(["git", "-C", tmp, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                                               capture_output=True, check=True)
            git("init", "-q")
            lab.write_bytes(stub)
            git("add", "labs")
            git("commit", "-qm", "release")
            lab.write_bytes(stub + b"// my work\n")
            git("commit", "-qam", "my work")  # the student's own commit: HEAD is not the stub
            self.assertEqual(make_labs.generated_stub(lab), stub)

    def test_sections_resolve_by_number(self):
        self.assertEqual(common.resolve("1"), "01_naive")
        self.assertEqual(common.resolve("01"), "01_naive")
        with self.assertRaises(common.BadInput):
            common.resolve("42")

    def test_sections_resolve_by_name_without_the_number(self):
        for name, section in (("naive", "01_naive"), ("V1_Tile", "02_v1_tile"), ("tile", "02_v1_tile"),
                              ("window", "07_sliding_window"), ("decode", "05_decode"), ("ring", "12_ring")):
            self.assertEqual(common.resolve(name), section, name)
        for part in ("on", "ive", "_tile"):  # whole words only: not the end of one
            with self.assertRaisesRegex(common.BadInput, "unknown section"):
                common.resolve(part)
        with mock.patch.object(common, "sections", lambda: ["07_sliding_window", "14_tumbling_window"]):
            with self.assertRaisesRegex(common.BadInput, r"section 'window' is ambiguous: it could be "
                                                         r"07_sliding_window, 14_tumbling_window \(give its number\)"):
                common.resolve("window")
        # the whole name wins over a longer name it ends
        with mock.patch.object(common, "sections", lambda: ["07_sliding_window", "13_window"]):
            self.assertEqual(common.resolve("window"), "13_window")

    def test_only_a_command_that_takes_all_offers_it(self):
        with self.assertRaises(common.BadInput) as one:
            common.resolve("nope")
        self.assertNotIn("all", str(one.exception).split("sections:")[1])
        with self.assertRaisesRegex(common.BadInput, r"12_ring, or all\)$"):
            common.resolve_all(["nope"])


class BaselineServer(unittest.TestCase):
    """bench's one baselines process: answers in order, keeps serving after a failed spec, and a spec
    past the time limit or a server that dies is a failed spec, never a hang."""
    FAKE = (
        "import json, sys, time\n"
        "for line in sys.stdin:\n"
        "    spec = json.loads(line)['spec']\n"
        "    if spec.get('sleep'): time.sleep(spec['sleep'])\n"
        "    if spec.get('die'): print('dying'); sys.exit(3)\n"
        "    print('timed', spec['t'])\n"
        "    print('SERVE_DONE', spec.get('code', 0), flush=True)\n")

    def server(self):
        return maintainer.BaselineServer([sys.executable, "-c", self.FAKE])

    def test_each_spec_gets_its_own_answer_from_one_process(self):
        srv = self.server()
        self.assertEqual(srv.run("s", {"t": 1}, "/x.json", 30)[:2], (0, "timed 1\n"))
        first = srv.proc.pid
        self.assertEqual(srv.run("s", {"t": 2, "code": 1}, "/x.json", 30)[:2], (1, "timed 2\n"))
        self.assertEqual(srv.proc.pid, first)  # the same process served both
        srv.stop()

    def test_a_spec_past_its_limit_or_a_dead_server_fails_and_the_next_spec_gets_a_new_one(self):
        srv = self.server()
        code, out, secs = srv.run("s", {"t": 1, "sleep": 30}, "/x.json", 1)
        self.assertEqual(code, maintainer.EXIT_TIMEOUT)
        self.assertIn("TIMEOUT", out)
        self.assertLess(secs, 10)
        code, out, _ = srv.run("s", {"t": 2, "die": True}, "/x.json", 30)
        self.assertEqual(code, 3)
        self.assertIn("dying", out)
        self.assertEqual(srv.run("s", {"t": 3}, "/x.json", 30)[:2], (0, "timed 3\n"))
        srv.stop()


class PythonBench(unittest.TestCase):
    """What bench gives the Python sections: compiler caches in the build folder, the SDPA baselines
    beside 09's sweep and its tma study, 10's sliding window on 07's window shapes."""

    @staticmethod
    def problem(args):
        plain = [x for x in args if x != "--causal"]
        a = dict(zip(plain[::2], plain[1::2]))
        return (int(a["--b"]), int(a["--h"]), int(a["--t"]), int(a["--d"]), a["--dtype"], "--causal" in args)

    def test_compiler_caches_go_to_the_build_folder_unless_set(self):
        got = maintainer.compiler_caches({}, "/b")
        self.assertEqual(got, {"TRITON_CACHE_DIR": "/b/triton-cache", "TORCHINDUCTOR_CACHE_DIR": "/b/inductor-cache"})
        self.assertEqual(maintainer.compiler_caches({"TRITON_CACHE_DIR": "/mine"}, "/b"),
                         {"TORCHINDUCTOR_CACHE_DIR": "/b/inductor-cache"})

    def test_baselines_run_for_the_sweep_and_the_named_studies_only(self):
        shape = {"b": 1, "h": 16, "t": 4096, "d": 128, "dtype": "bf16"}
        studied, other = dict(shape, variants=["sdpa-flash"]), dict(shape, t=16384, variants=["sdpa-flash"])
        entry = ["--dtype", "bf16", "--b", "1", "--t", "4096", "--h", "16", "--d", "128", "--iters", "20"]
        data = {"baselines": [studied, other], "baseline_tags": ["tma"],
                "bench": [{"args": entry, "tag": "tma"}, {"args": entry[:5] + ["16384"] + entry[6:]}]}
        self.assertEqual(maintainer.bench_baselines(data, None, False, False), data["baselines"])
        self.assertEqual(maintainer.bench_baselines(data, "tma", False, False), [studied])  # its own shapes only
        self.assertEqual(maintainer.bench_baselines(data, "other", False, False), [])
        self.assertEqual(maintainer.bench_baselines(data, None, True, False), [])   # --quick
        self.assertEqual(maintainer.bench_baselines(data, "tma", False, True), [])  # --no-baselines

    def test_a_baseline_spec_is_timed_beside_the_entry_of_its_shape(self):
        args = ["--dtype", "bf16", "--b", "4", "--t", "4096", "--h", "16", "--d", "128", "--causal", "--iters", "20"]
        spec = {"variants": ["fa4"], "b": 4, "h": 16, "t": 4096, "d": 128, "dtype": "bf16", "causal": True}
        self.assertTrue(maintainer.spec_matches_entry(spec, args))
        self.assertFalse(maintainer.spec_matches_entry(dict(spec, causal=False), args))
        self.assertFalse(maintainer.spec_matches_entry(dict(spec, window=1024), args))
        self.assertFalse(maintainer.spec_matches_entry(dict(spec, h_kv=4), args))
        self.assertFalse(maintainer.spec_matches_entry(dict(spec, dtype="fp16"), args))
        self.assertFalse(maintainer.spec_matches_entry(spec, [a for a in args if a not in ("--dtype", "bf16")]))
        window = ["--dtype", "bf16", "--b", "1", "--t", "8192", "--h", "32", "--d", "64", "--causal", "--window", "4096"]
        self.assertTrue(maintainer.spec_matches_entry(dict(spec, b=1, t=8192, h=32, d=64, window=4096), window))
        self.assertTrue(maintainer.spec_matches_entry(dict(spec, b=1, t=8192, h=32, d=64, window=4096),
                                                      ["--against-07"] + window + ["--warmup", "5"]))  # a flag alone

    def test_baseline_tags_name_tags_of_the_bench(self):
        import cases
        base = {"section": "09_triton", "cases": [], "bench": [{"args": ["--t", "4"], "tag": "tma"}]}
        cases.validate(dict(base, baseline_tags=["tma"]))
        for bad in (["nope"], "tma", [1]):
            with self.assertRaises(cases.CaseFileError):
                cases.validate(dict(base, baseline_tags=bad))

    def test_an_entry_may_run_another_sections_program_in_a_study_only(self):
        import cases
        where = str(ROOT / "tests" / "cases" / "09_triton.json")  # (a program must have a case file beside it)
        entry = {"args": ["--t", "4"], "tag": "exercise4", "program": "04_fp16", "variants": ["mma"]}
        cases.validate({"section": "09_triton", "cases": [], "bench": [entry]}, where)
        for bad in (dict(entry, tag=None), dict(entry, variants=[]), dict(entry, program="4"),
                    dict(entry, program="42_nowhere")):
            with self.assertRaises(cases.CaseFileError):
                cases.validate({"section": "09_triton", "cases": [], "bench": [{k: v for k, v in bad.items() if v is not None}]},
                               where)
        # resume tells 04's mma on a shape from a 09 variant of the same name on it
        args = ["--dtype", "bf16", "--t", "4096"]
        self.assertNotEqual(maintainer.kernel_run_id("mma", args, "04_fp16"), maintainer.kernel_run_id("mma", args))
        done, _ = maintainer.done_in([{"git_sha": "a", "build": "solution", "variant": "mma", "section": "04_fp16",
                                       "command": "/b/bin/04_fp16 --variant mma --json j --quiet --dtype bf16 --t 4096"}],
                                     "a", "09_triton")
        self.assertEqual(done, {maintainer.kernel_run_id("mma", args, "04_fp16")})

    def test_exercise4_times_triton_04_mma_and_08_ws_on_each_bf16_shape_with_the_libraries(self):
        data = student.load_cases("09_triton")
        study = [e for e in data["bench"] if e.get("tag") == "exercise4"]
        by_shape = {}
        for e in study:
            by_shape.setdefault(self.problem(e["args"]), set()).add((e.get("program", "09_triton"), *e["variants"]))
        self.assertEqual(len(by_shape), 8)
        for shape, runs in by_shape.items():
            self.assertEqual(shape[4], "bf16")
            self.assertEqual(runs, {("09_triton", "triton"), ("04_fp16", "mma"), ("08_tma_skeleton", "ws")})
            self.assertTrue(any(maintainer.spec_matches_entry(s, next(e["args"] for e in study)) for s in data["baselines"]))
        self.assertIn("exercise4", data["baseline_tags"])

    def test_09_sweep_and_tma_study_have_flash_and_cudnn_on_every_shape(self):
        data = student.load_cases("09_triton")
        specs = {(s["b"], s["h"], s["t"], s["d"], s["dtype"], s["causal"]): s for s in data["baselines"]}
        for tag, variant in (("", "triton"), ("tma", "triton-tma")):
            entries = [e for e in data["bench"] if e.get("tag", "") == tag]
            shapes = {self.problem(e["args"]) for e in entries}
            self.assertEqual({tuple(e["variants"]) for e in entries}, {(variant,)})
            self.assertEqual(shapes, set(specs), tag)
        self.assertEqual(len(specs), 16)
        self.assertEqual({b * t for b, h, t, d, dt, c in specs}, {16384})  # B·T = 16k tokens
        self.assertEqual({(d, dt, c) for b, h, t, d, dt, c in specs},
                         {(d, dt, c) for d in (64, 128) for dt in ("fp16", "bf16") for c in (False, True)})
        for s in specs.values():
            self.assertEqual(set(s["variants"]), {"sdpa-flash", "sdpa-cudnn"})
        self.assertIn("tma", data["baseline_tags"])

    def test_10_times_the_window_on_every_window_shape_of_07(self):
        def windows(section, variant):
            out = set()
            for e in student.load_cases(section)["bench"]:
                a = e["args"]
                if variant in e.get("variants", []) and "--window" in a and not e.get("tag"):
                    out.add((self.problem(a), a[a.index("--window") + 1]))
            return out
        seven = windows("07_sliding_window", "window")
        self.assertEqual(len(seven), 8)
        self.assertEqual(windows("10_flex", "window"), seven)
        self.assertTrue(all("--against-07" in e["args"] for e in student.load_cases("10_flex")["bench"]
                            if "window" in e.get("variants", [])))


class Compare(unittest.TestCase):
    """compare: each section on its own shapes (exercise 2), or all on one section's (exercise 4)."""

    def test_sections_run_on_one_sections_shapes_with_the_variant_named(self):
        nine = student.compare_shapes(student.load_cases("09_triton"))
        plan = student.compare_plan(["03", "04:mma", "08:ws", "09"], shapes_of="09")
        self.assertEqual(len(plan), 4 * len(nine))
        self.assertEqual({(s, v) for s, v, _ in plan}, {("03_v2_loop_order", student.load_cases("03_v2_loop_order")["variants"][0]),
                                                         ("04_fp16", "mma"), ("08_tma_skeleton", "ws"),
                                                         ("09_triton", "triton")})
        self.assertEqual([sh for s, _, sh in plan if s == "04_fp16"], [sh for _, sh in nine])
        self.assertTrue(all("--iters" not in sh and "--warmup" not in sh for _, _, sh in plan))

    def test_own_shapes_by_default_and_an_unknown_variant_is_bad_input(self):
        plan = student.compare_plan(["02", "03"])
        self.assertEqual(len(plan), len(student.compare_shapes(student.load_cases("02_v1_tile")))
                         + len(student.compare_shapes(student.load_cases("03_v2_loop_order"))))
        with self.assertRaises(common.BadInput):
            student.compare_plan(["04:nope"])


class BenchResume(unittest.TestCase):
    """bench --resume: which runs of a sweep cut short by a time limit are already measured."""
    spec = {"variants": ["sdpa-flash", "sdpa-cudnn"], "b": 1, "h": 16, "t": 16384, "d": 128, "dtype": "bf16"}

    def records(self, sha):
        kernel = {"git_sha": sha, "build": "solution", "variant": "ws",
                  "command": "/x/build/bin/08_tma_skeleton --variant ws --json /x/b.json --quiet --dtype bf16 --t 1024"}
        flash = {"git_sha": sha, "build": "baseline", "variant": "sdpa-flash",
                 "command": maintainer.baseline_spec_command(self.spec)}
        return [kernel, flash]

    def test_runs_of_this_commit_are_done(self):
        kernels, baselines = maintainer.done_in(self.records("abc1234"), "abc1234")
        self.assertIn(maintainer.kernel_run_id("ws", ["--dtype", "bf16", "--t", "1024"]), kernels)
        self.assertNotIn(maintainer.kernel_run_id("ws-overlap", ["--dtype", "bf16", "--t", "1024"]), kernels)
        self.assertNotIn(maintainer.kernel_run_id("ws", ["--dtype", "fp16", "--t", "1024"]), kernels)
        # a baseline spec is done only when every variant it names has a record: cuDNN is missing
        self.assertEqual(baselines[maintainer.baseline_spec_command(self.spec)], {"sdpa-flash"})
        self.assertFalse(set(self.spec["variants"]) <= baselines[maintainer.baseline_spec_command(self.spec)])

    def test_runs_of_another_commit_count_for_nothing(self):
        kernels, baselines = maintainer.done_in(self.records("0ld0ld0"), "abc1234")
        self.assertEqual((kernels, baselines), (set(), {}))

    def test_a_library_that_could_not_run_is_not_done(self):
        # e.g. flash-attn-4 not installed: a resume after installing it times the spec again
        missing = {"git_sha": "abc1234", "build": "baseline", "variant": "sdpa-cudnn",
                   "command": maintainer.baseline_spec_command(self.spec),
                   "check": {"passed": False, "rule": "baseline unavailable", "verdict": "ModuleNotFoundError"}}
        _, baselines = maintainer.done_in(self.records("abc1234") + [missing], "abc1234")
        self.assertEqual(baselines[maintainer.baseline_spec_command(self.spec)], {"sdpa-flash"})

    def test_timing_a_spec_again_drops_its_older_records_only(self):
        command = maintainer.baseline_spec_command(self.spec)
        other = dict(self.spec, t=4096)
        records = self.records("abc1234") + [{"build": "baseline", "variant": "sdpa-flash",
                                               "command": maintainer.baseline_spec_command(other)}]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.json"
            path.write_text(json.dumps(records))
            maintainer.drop_baseline_records(path, command)
            kept = json.loads(path.read_text())
        self.assertEqual([r["variant"] for r in kept], ["ws", "sdpa-flash"])
        self.assertNotIn(command, [r.get("command") for r in kept])
        maintainer.drop_baseline_records(Path("/nonexistent/bench.json"), command)  # no file: nothing to do

    def test_the_spec_command_is_the_one_baselines_writes(self):
        text = (ROOT / "scripts" / "baselines.py").read_text()
        self.assertIn('"scripts/baselines.py --spec " + json.dumps(spec, separators=(",", ":"))', text)
        self.assertEqual(maintainer.baseline_spec_command({"variants": ["flex"], "t": 4}),
                         'scripts/baselines.py --spec {"variants":["flex"],"t":4}')


class AB(unittest.TestCase):
    """ab runs each case on both builds, the order flipping every round, and compares medians."""
    def make_build(self, root, name, ms, passed=True):
        fake = Path(root) / name / "bin" / "fake"  # writes a record with its time; logs its name to $AB_ORDER
        fake.parent.mkdir(parents=True)
        fake.write_text("#!/usr/bin/env python3\nimport json, os, sys\n"
                        f"open(os.environ['AB_ORDER'], 'a').write('{name} ' + sys.argv[1] + '\\n')\n"
                        "path = sys.argv[sys.argv.index('--json') + 1]\n"
                        f"json.dump([{{'timing': {{'median_ms': {ms}}}, 'check': {{'passed': {passed}}}}}], open(path, 'w'))\n")
        fake.chmod(0o755)
        return fake.parent.parent

    def run_ab(self, tmp, a_dir, b_dir, cases, rounds=3):
        import argparse, contextlib, io, os
        from unittest import mock
        args = argparse.Namespace(build_a=str(a_dir), build_b=str(b_dir), case=cases, rounds=rounds,
                                  out=str(Path(tmp) / "out"), timeout=30)
        with mock.patch.dict(os.environ, {"AB_ORDER": str(Path(tmp) / "order.txt")}), \
                contextlib.redirect_stdout(io.StringIO()) as printed:
            code = maintainer.cmd_ab(args)
        return code, printed.getvalue(), json.loads((Path(tmp) / "out" / "ab.json").read_text())

    def test_order_flips_and_the_ratio_is_a_over_b(self):
        with tempfile.TemporaryDirectory() as tmp:
            a_dir, b_dir = self.make_build(tmp, "A", 2.0), self.make_build(tmp, "B", 0.5)
            code, printed, summary = self.run_ab(tmp, a_dir, b_dir, ["one=fake x1", "two=fake x2"])
            self.assertEqual(code, common.EXIT_PASS)
            order = (Path(tmp) / "order.txt").read_text().split("\n")
            self.assertEqual(order[:8], ["A x1", "B x1", "A x2", "B x2", "B x1", "A x1", "B x2", "A x2"])
            self.assertEqual([c["a_over_b"] for c in summary["cases"]], [4.0, 4.0])
            self.assertEqual(summary["cases"][0]["A"]["runs_ms"], [2.0, 2.0, 2.0])
            self.assertIn("A/B  4.000", printed)

    def test_a_failed_check_fails_the_comparison(self):
        with tempfile.TemporaryDirectory() as tmp:
            a_dir, b_dir = self.make_build(tmp, "A", 1.0), self.make_build(tmp, "B", 0.5, passed=False)
            code, printed, summary = self.run_ab(tmp, a_dir, b_dir, ["one=fake x"], rounds=1)
            self.assertEqual(code, common.EXIT_FAIL)
            self.assertIsNone(summary["cases"][0]["a_over_b"])
            self.assertIn("FAIL", printed)

    def test_an_ab_cut_short_keeps_its_finished_rounds(self):
        import argparse, contextlib, io, os
        from unittest import mock
        with tempfile.TemporaryDirectory() as tmp:
            a_dir, b_dir = self.make_build(tmp, "A", 2.0), self.make_build(tmp, "B", 1.0)
            real, calls = common.run_limited, []
            def limited(cmd, timeout):  # the 5th run (round 3's first) is where the time limit strikes
                calls.append(cmd)
                if len(calls) == 5:
                    raise KeyboardInterrupt
                return real(cmd, timeout)
            args = argparse.Namespace(build_a=str(a_dir), build_b=str(b_dir), case=["one=fake x"], rounds=3,
                                      out=str(Path(tmp) / "out"), timeout=30)
            with mock.patch.dict(os.environ, {"AB_ORDER": str(Path(tmp) / "order.txt")}), \
                    mock.patch.object(maintainer, "run_limited", limited), contextlib.redirect_stdout(io.StringIO()) as printed:
                with self.assertRaises(KeyboardInterrupt):
                    maintainer.cmd_ab(args)
            summary = json.loads((Path(tmp) / "out" / "ab.json").read_text())
            self.assertEqual(summary["rounds_done"], 2)
            self.assertEqual(summary["cases"][0]["A"]["runs_ms"], [2.0, 2.0])
            self.assertEqual(summary["cases"][0]["a_over_b"], 2.0)
            self.assertIn("round 2 of 3 done: one 2.000", printed.getvalue())

    def test_bad_cases_are_refused(self):
        for bad in ("no-equals-sign", "=fake", "label=", "label=  "):
            with self.assertRaises(common.BadInput):
                maintainer.parse_ab_case(bad)
        for bad in ("x=fake |", "x=| fake", "x=fake | other | third"):
            with self.assertRaises(common.BadInput):
                maintainer.parse_ab_case(bad)
        same = ("06_paged", ["--b", "8", "--t-kv", "1024"])
        self.assertEqual(maintainer.parse_ab_case("06-1k=06_paged --b 8 --t-kv 1024"), ("06-1k", {"A": same, "B": same}))
        self.assertEqual(maintainer.parse_ab_case("pair=05_decode --b 8 | 06_paged --b 8 --page-size 16"),
                         ("pair", {"A": ("05_decode", ["--b", "8"]), "B": ("06_paged", ["--b", "8", "--page-size", "16"])}))

    def test_a_pair_runs_two_programs_of_one_build(self):
        with tempfile.TemporaryDirectory() as tmp:
            build = self.make_build(tmp, "A", 2.0)
            other = build / "bin" / "other"  # the same fake under another name, its time halved
            other.write_text((build / "bin" / "fake").read_text().replace("'A '", "'other '").replace("2.0", "1.0"))
            other.chmod(0o755)
            code, printed, summary = self.run_ab(tmp, build, build, ["pair=fake x | other y"], rounds=2)
            self.assertEqual(code, common.EXIT_PASS)
            order = (Path(tmp) / "order.txt").read_text().split("\n")
            self.assertEqual(order[:4], ["A x", "other y", "other y", "A x"])
            self.assertEqual(summary["cases"][0]["a_over_b"], 2.0)
            self.assertEqual(summary["cases"][0]["command_b"], "other y")


class MakeLabs(unittest.TestCase):
    SOLUTION = """// header
__global__ void k(float* o) {
  int i = threadIdx.x;
  // BEGIN EXERCISE write: write o[i] = 1.
  //   the hint goes on
  // STUB: (void)i;
  o[i] = 1.f;  // secret
  // END EXERCISE
}
"""

    def test_region_becomes_hint_plus_stub(self):
        stub = make_labs.make_stub(self.SOLUTION, "99_x.cu")
        self.assertIn("// EXERCISE write: write o[i] = 1.", stub)
        self.assertIn("//   the hint goes on", stub)
        self.assertIn("  (void)i;", stub)
        self.assertNotIn("secret", stub)
        self.assertNotIn("BEGIN EXERCISE", stub)
        self.assertTrue(stub.startswith("// STUDENT STUB"))

    def test_malformed_regions_are_errors(self):
        with self.assertRaisesRegex(make_labs.ExerciseError, "no END EXERCISE"):
            make_labs.make_stub(self.SOLUTION.replace("  // END EXERCISE\n", ""), "99_x.cu")
        with self.assertRaisesRegex(make_labs.ExerciseError, "no BEGIN EXERCISE"):
            make_labs.make_stub("int main() {}\n", "99_x.cu")
        with self.assertRaisesRegex(make_labs.ExerciseError, "outside a region"):
            make_labs.make_stub("// END EXERCISE\n", "99_x.cu")

    def test_check_mode_reports_drift_without_writing(self):
        with tempfile.TemporaryDirectory() as tmp:
            sol, labs = Path(tmp, "solutions"), Path(tmp, "labs")
            sol.mkdir()
            (sol / "99_x.cu").write_text(self.SOLUTION)
            self.assertEqual(make_labs.generate_all(sol, labs, check_only=True), ["99_x.cu"])
            self.assertFalse((labs / "99_x.cu").exists())
            self.assertEqual(make_labs.generate_all(sol, labs), ["99_x.cu"])
            self.assertEqual(make_labs.generate_all(sol, labs, check_only=True), [])


class Arguments(unittest.TestCase):
    """The driver's arguments in any natural order, its own bad input exit 2 in one line."""

    def test_run_options_in_any_order(self):
        for argv in (["run", "01", "--solution", "--", "--t", "4096", "--causal"],
                     ["run", "--solution", "01", "--", "--t", "4096", "--causal"]):
            a = lab.parse(argv)
            self.assertEqual((a.section, a.solution, a.args), ("01", True, ["--t", "4096", "--causal"]), argv)
        a = lab.parse(["run", "01", "--cpu", "--t", "65"])  # options the driver does not know go to the program
        self.assertEqual((a.section, a.solution, a.args), ("01", False, ["--cpu", "--t", "65"]))

    def cli(self, *args):
        import subprocess
        return subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), *args], capture_output=True, text=True,
                              timeout=120, env=dict(__import__("os").environ, LAB_NO_BUILD="1"))

    def test_bad_driver_input_is_exit_2_in_one_line(self):
        for args, message in ((["run", "99"], "unknown section '99'"),
                              (["check", "01", "--timeout", "0"], "--timeout: must be >= 1 second"),
                              (["check", "01", "--jobs", "0"], "--jobs: must be >= 1"),
                              (["check", "all", "--gpus", "-1"], "--gpus: must be >= 1"),
                              (["check", "nope"], "unknown section 'nope'"),
                              (["bench", "01", "--timeout", "x"], "expected seconds"),
                              (["frobnicate"], "no command 'frobnicate' (the commands: run, check, test"),
                              (["chek", "09"], "no command 'chek': did you mean check?"),
                              (["run", "09", "10"], "unrecognized arguments: 10; run takes one section (check takes "
                                                    "several: scripts/lab check 09 10)"),
                              (["make-labs", "--", "x"], "takes no program arguments"),
                              (["release", str(ROOT / "inside")], "inside this tree"),
                              (["test", "-L", "nope"], "invalid choice: 'nope' (choose from 'cpu', 'gpu')")):
            r = self.cli(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(message, r.stdout, args)
            self.assertEqual(len((r.stdout + r.stderr).strip().splitlines()), 1, (args, r.stdout, r.stderr))
            self.assertNotIn("Traceback", r.stdout + r.stderr)

    def test_a_release_names_only_the_students_commands(self):
        """In a student release (no solutions/), an unknown command lists the commands a student has."""
        with mock.patch.object(lab, "ROOT", Path("/nonexistent-release")), \
                contextlib.redirect_stdout(io.StringIO()) as printed, self.assertRaises(SystemExit):
            lab.parse(["chek", "01"])
        self.assertIn("did you mean check? (the commands: run, check, test, compare, help)", printed.getvalue())

    def test_a_run_of_the_default_variant_names_the_one_written(self):
        """10's variants are its exercises: a run with no --variant ran the first (softcap); with only
        alibi written, the run says how to run alibi. Not when --variant is given or the default is written."""
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "labs").mkdir()
            (Path(tmp) / "labs" / "10_flex.py").write_text("".join(f"# BEGIN EXERCISE {e}\n# END EXERCISE\n" for e in
                                                                   ("alibi", "softcap", "window", "document")))
            data = {"variants": ["softcap", "alibi", "window", "document"]}
            with mock.patch.object(student, "ROOT", Path(tmp)), \
                    mock.patch.object(student, "load_cases", lambda section, extra=None: data), \
                    mock.patch.object(student.make_labs, "untouched_exercises",
                                      lambda lab: ["softcap", "window", "document"]):
                self.assertEqual(student.written_variant_not_run("10_flex", []), "alibi")
                self.assertIsNone(student.written_variant_not_run("10_flex", ["--variant", "window"]))
                self.assertIsNone(student.written_variant_not_run("10_flex", ["--variant=window"]))
            with mock.patch.object(student, "ROOT", Path(tmp)), \
                    mock.patch.object(student, "load_cases", lambda section, extra=None: data), \
                    mock.patch.object(student.make_labs, "untouched_exercises", lambda lab: ["alibi", "window"]):
                self.assertIsNone(student.written_variant_not_run("10_flex", []))  # softcap is written: it ran

    def test_a_mistyped_option_points_to_its_commands_help_and_the_option_meant(self):
        for args, message in ((["check", "01", "--solutions"], "unrecognized arguments: --solutions; did you mean "
                                                               "--solution? (see scripts/lab check --help)"),
                              (["check", "01", "--cpuu"], "unrecognized arguments: --cpuu; did you mean --cpu? (see scripts/lab check --help)"),
                              (["make-labs", "--chek"], "unrecognized arguments: --chek; did you mean --check? "
                                                  "(see scripts/lab make-labs --help)"),
                              (["check", "01", "--wat"], "unrecognized arguments: --wat (see scripts/lab check --help)")):
            r = self.cli(*args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertEqual(r.stdout, f"lab: bad input: {message}\n", args)

    def test_run_refuses_a_near_miss_of_its_own_options_the_program_would_refuse(self):
        for typo, meant in (("--soluton", "--solution"), ("--solutions", "--solution"), ("--timout", "--timeout")):
            r = self.cli("run", "01", typo)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (2, f"lab: bad input: unknown option {typo}; did you "
                                                                  f"mean {meant} (an option of scripts/lab run)?\n", ""))
        # the program's options, and whatever follows --, still go to the program
        self.assertEqual(lab.parse(["run", "01", "--cpuu", "--t", "65"]).args, ["--cpuu", "--t", "65"])
        self.assertEqual(lab.parse(["run", "01", "--", "--soluton"]).args, ["--soluton"])
        with mock.patch.object(lab, "program_options", lambda: {"--solutions"}):
            self.assertEqual(lab.parse(["run", "01", "--solutions"]).args, ["--solutions"])
        with mock.patch.object(lab, "program_options", lambda: {"--solutoon"}):  # as near a program option
            self.assertEqual(lab.parse(["run", "01", "--soluton"]).args, ["--soluton"])

    def test_the_programs_options_are_read_from_their_sources(self):
        known = common.program_options()
        for option in ("--t", "--cpu", "--causal", "--json", "--variant", "--softcap", "--simulate", "--kv-lens"):
            self.assertIn(option, known)
        self.assertFalse({"--solution", "--timeout"} & known)

    def test_a_file_on_the_way_of_a_path_is_named_not_called_missing(self):
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp, "notes.txt")
            f.write_text("x")
            sub = Path(tmp, "alice", "labs")
            sub.mkdir(parents=True)
            (sub / "01_naive.cu").write_text("// mine\n")
            commands = [["check", "01", "--report", f / "r.json"], ["deps", "--vendor", f / "tree"],
                        ["deps", "--vendor", f], ["tables", "--results", f], ["tables", "--results", f / "h200"],
                        ["tables", "--results", tmp, "--readme", f / "README.md"], ["release", f / "out"],
                        ["ab", tmp, tmp, "--case", "x=y", "--out", f / "ab"], ["gpu-check", "--out", f / "g"]]
            if (ROOT / "solutions").is_dir():  # (a release grades and benches nothing)
                commands += [["bench", "01", "--out", f / "b"], ["grade", sub.parent, "--no-gpu", "--out", f / "grades"],
                             ["grading-example", "--out", f / "x"],
                             ["grade", f / "bob", "--no-gpu", "--out", Path(tmp, "grades")]]
            for args in commands:
                r = self.cli(*map(str, args))
                self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
                self.assertIn(f"{f} is a file, not a folder", r.stdout, args)
                self.assertEqual(len((r.stdout + r.stderr).strip().splitlines()), 1, (args, r.stdout, r.stderr))
            self.assertEqual(sorted(p.name for p in Path(tmp).iterdir()), ["alice", "notes.txt"])  # nothing written
            self.assertEqual(common.folder_problem(Path(tmp, "no", "r"), must_exist=True),
                             f"the folder {Path(tmp, 'no', 'r')} does not exist")
            self.assertEqual(common.folder_problem(Path(tmp, "no", "r")), "")  # an --out is made, parents and all
            here = os.getcwd()
            os.chdir(tmp)
            try:  # named as given: the user's relative path, not one made absolute
                self.assertEqual(common.folder_problem("notes.txt/x"), "notes.txt is a file, not a folder")
            finally:
                os.chdir(here)

    def test_help_is_the_help_option(self):
        def shown(argv):
            with contextlib.redirect_stdout(io.StringIO()) as out, self.assertRaises(SystemExit) as end:
                lab.parse(argv)
            self.assertEqual(end.exception.code, 0, argv)
            return out.getvalue()
        self.assertEqual(shown(["help"]), shown(["--help"]))
        self.assertEqual(shown(["help", "help"]), shown(["--help"]))
        self.assertEqual(shown(["help", "check"]), shown(["check", "--help"]))
        self.assertIn("--expect-fail", shown(["help", "check"]))
        r = self.cli("help", "frobnicate")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no command 'frobnicate'", r.stdout)
        r = self.cli()  # no command at all: the list of commands (exit 2: nothing was run)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, shown(["--help"]))

    def test_the_help_lists_every_command_once(self):
        # one list (the description's), not argparse's again beneath it; in a student release, the
        # student's commands alone, without --solution
        with contextlib.redirect_stdout(io.StringIO()) as out, self.assertRaises(SystemExit):
            lab.parse(["--help"])
        listed = lambda text: [l.split()[1] for l in text.splitlines() if l.startswith("  scripts/lab ")
                               and "Examples:" not in text.split(l)[0]]
        self.assertEqual(sorted(listed(lab.__doc__)), sorted(lab.make_parser().commands))
        self.assertEqual(out.getvalue().count(lab.description()), 1)
        self.assertNotIn("positional arguments", out.getvalue())
        self.assertLess(len(out.getvalue().splitlines()), 40)
        with mock.patch.object(lab, "ROOT", Path(tempfile.gettempdir(), "a-release")):
            release = lab.description()
        self.assertEqual(sorted(listed(release)), sorted(lab.STUDENT_COMMANDS))
        self.assertNotIn("--solution", release)

    def test_an_unexpected_error_is_one_line_not_a_traceback(self):
        import contextlib, io
        from unittest import mock
        def boom(a):
            raise ValueError("something broke")
        with mock.patch.object(student, "cmd_make_labs", boom), contextlib.redirect_stdout(io.StringIO()) as out:
            code = lab.main(["make-labs"]) if False else None
            a = lab.parse(["make-labs"])
            a.fn = boom
            with mock.patch.object(lab, "parse", lambda argv: a):
                code = lab.main(["make-labs"])
        self.assertEqual(code, common.EXIT_FAIL)
        self.assertIn("lab: internal error in `make-labs`: ValueError: something broke", out.getvalue())
        self.assertNotIn("Traceback", out.getvalue())


class ClosedPipe(unittest.TestCase):
    def test_a_reader_that_goes_ends_the_driver_quietly(self):
        """`scripts/lab grade ... | head`: the driver stops with 141, as a Unix tool does, with no
        traceback on stderr and no internal-error log."""
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the first line
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "run", "99"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        os.close(w)
        self.assertEqual(p.returncode, 128 + signal.SIGPIPE)
        self.assertEqual(p.stderr, "")


class PythonSections(unittest.TestCase):
    """A section whose solution is NN_name.py: no CMake target, run as [python3, FILE]."""

    def test_the_cpu_fallback_line_names_whose_code_runs(self):
        self.assertIn("checking your 10_flex on the CPU instead", student.cpu_fallback("10_flex", "checking"))
        self.assertIn("checking the solution of 10_flex on the CPU instead",
                      student.cpu_fallback("10_flex", "checking", solution=True))
        self.assertIn("the CPU model of 01_naive instead", student.cpu_fallback("01_naive", "running", solution=True))

    def test_a_python_section_is_listed_and_run_with_python(self):
        import shutil
        from unittest import mock
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for folder in ("solutions", "labs"):
                (root / folder).mkdir()
                (root / folder / "09_fake.py").write_text("import sys\nsys.exit(0)\n")
            (root / "solutions" / "01_naive.cu").write_text("")
            with mock.patch.object(common, "ROOT", root):
                self.assertEqual(common.sections(), ["01_naive", "09_fake"])
                self.assertTrue(common.is_python("09_fake"))
                self.assertEqual(common.targets(["01_naive", "09_fake"]), ["01_naive", "lab_01_naive"])
                self.assertEqual(common.program("09_fake", True), [sys.executable, root / "solutions" / "09_fake.py"])
                self.assertEqual(common.program("09_fake", False), [sys.executable, root / "labs" / "09_fake.py"])
                self.assertEqual(common.source_name("09_fake"), "09_fake.py")
                code, _, _ = common.run_limited(common.program("09_fake", True) + ["--t", "1"], 30)
                self.assertEqual(code, 0)
                shutil.rmtree(root / "solutions")  # a student release: the sections are the stubs
                self.assertEqual(common.sections(), ["09_fake"])
                self.assertTrue(common.is_python("09_fake"))

    def test_check_runs_a_python_program(self):
        import argparse, contextlib, io
        from unittest import mock
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "09_fake.py"  # passes for even T, fails for odd T
            fake.write_text("import sys\nt = int(sys.argv[sys.argv.index('--t') + 1])\nsys.exit(t % 2)\n")
            data = {"section": "09_fake", "variants": ["v"], "cases": [{"name": f"t{t}", "args": ["--t", str(t)]} for t in (1, 2)]}
            a = argparse.Namespace(cases=None, solution=True, cpu=False, require_gpu=True, no_bugs=True,
                                   expect_fail=False, timeout=30, verbose=False, jobs=1)
            with mock.patch.object(student, "load_cases", lambda s, extra=None: data), \
                    mock.patch.object(student, "program", lambda s, solution: [sys.executable, fake]), \
                    mock.patch.object(student, "gpu_available", lambda *x: (True, "")), \
                    contextlib.redirect_stdout(io.StringIO()):
                results = student.check_section("09_fake", a)
        self.assertEqual([(r["case"], r["ok"]) for r in results], [("t1", False), ("t2", True)])


class Setup(unittest.TestCase):
    """A fresh machine: what is missing is installed, or one line names the command."""

    def test_a_failed_configure_names_what_is_missing(self):
        """CMake's own error about a missing CUDA toolkit or an old CMake becomes one line saying what
        to install; any other failure points at the log."""
        from labcli import setup
        logs = {"CMake Error at CMakeDetermineCUDACompiler.cmake:227 (message):\n  Couldn't find CUDA library root.":
                "CMake found no working CUDA toolkit",
                "CMake Error: No CMAKE_CUDA_COMPILER could be found.": "needed even on a machine with no GPU",
                "CMake Error at CMakeLists.txt:4 (cmake_minimum_required):\n  CMake 3.24 or higher is required.  "
                "You are running version 3.22.1": "-m pip install cmake",
                "CMake Error at CMakeLists.txt:99: something else": r"^log: "}
        with tempfile.TemporaryDirectory() as tmp:
            for text, said in logs.items():
                log = Path(tmp, "lab-build.log")
                log.write_text(text)
                self.assertRegex(setup.configure_failure_hint(log), said, text)

    def test_missing_python_helpers_are_installed_or_named(self):
        import contextlib, io
        from unittest import mock
        from labcli import setup
        for pip_code, expect_ok, expect_text in ((0, True, "installing numpy, matplotlib (about 43 MB to download)"),
                                                 (1, False, "pip install -r scripts/requirements.txt")):
            with tempfile.TemporaryDirectory() as tmp, \
                    mock.patch.object(setup, "externally_managed", lambda: False), \
                    mock.patch.object(setup.importlib.util, "find_spec", lambda name: None), \
                    mock.patch.object(setup, "logged", lambda cmd, log, env=None: pip_code), \
                    mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(setup.ensure_python_deps(), expect_ok)
            self.assertIn(expect_text, out.getvalue())

    def test_python_sections_and_baselines_install_only_the_lines_they_miss(self):
        import contextlib, io
        from unittest import mock
        from labcli import setup
        self.assertEqual(setup.requirement_lines("requirements-gpu.txt", ["flashinfer", "flash_attn"]),
                         ["flashinfer-python==0.7.4", "flash-attn-4==4.0.0b36"])
        self.assertEqual(setup.requirement_lines("requirements-cpu.txt", ["triton"]), ["triton==3.6.*"])
        installed = []

        def pip(cmd, log, env=None):
            installed.append([x for x in cmd[cmd.index("15") + 1:] if x != "--user"])
            return 0
        present = {"torch", "numpy"}
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(setup, "externally_managed", lambda: False), \
                mock.patch.object(setup.importlib.util, "find_spec", lambda name: name if name in present else None), \
                mock.patch.object(setup, "logged", pip), \
                mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertTrue(setup.ensure_section_packages(on_gpu=False))
            self.assertTrue(setup.ensure_baseline_packages({"fa4", "flashinfer", "sdpa-flash"}))
            self.assertTrue(setup.ensure_baseline_packages({"sdpa-cudnn"}))  # PyTorch's own: nothing to install
        self.assertEqual(installed[0], ["triton==3.6.*"])  # torch is there: a user's own torch stays
        self.assertEqual(installed[1], ["flashinfer-python==0.7.4", "flash-attn-4==4.0.0b36"])  # torch is there
        self.assertEqual(len(installed), 2)
        self.assertIn("installing triton (about 188 MB to download) into", out.getvalue())

    def test_an_install_says_about_how_much_it_downloads(self):
        """A student on a laptop sees the size before pip starts (PyPI's torch with its CUDA libraries
        is gigabytes; the CPU build from PyTorch's index, a tenth of it), and every module the driver
        may install has its figure."""
        import contextlib, io
        from labcli import setup

        def said(on_gpu, gpu, missing, sections=()):
            with tempfile.TemporaryDirectory() as tmp, \
                    mock.patch.object(setup, "externally_managed", lambda: False), \
                    mock.patch.object(setup, "has_gpu", lambda: gpu), \
                    mock.patch.object(setup.importlib.util, "find_spec", lambda m: None if m in missing else m), \
                    mock.patch.object(setup, "logged", lambda cmd, log, env=None: 0), \
                    mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertTrue(setup.ensure_section_packages(on_gpu, sections))
            return [line for line in out.getvalue().splitlines() if "installing" in line]
        self.assertIn("lab: installing triton (about 188 MB to download) into",
                      said(False, False, {"triton"}, ["09_triton"])[0])
        self.assertIn("lab: installing torch (about 200 MB to download; the CPU build, from PyTorch's CPU index) into",
                      said(False, False, {"torch"}, ["10_flex"])[0])
        self.assertIn("lab: installing triton, torch (about 2.7 GB to download) into",
                      said(True, True, {"triton", "torch"})[0])
        for module in [*setup.PY_MODULES, *setup.SECTION_MODULES, *setup.BASELINE_MODULE.values()]:
            self.assertRegex(setup.download_size([module]), r"^about [0-9.]+ [MG]B$", module)

    def test_a_python_lab_that_does_not_parse_is_said_once(self):
        """check and run stop at a SyntaxError in one line, as at a failed C++ build, instead of
        running every case into it."""
        with tempfile.TemporaryDirectory() as tmp:
            lab = Path(tmp, "labs", "09_triton.py")
            lab.parent.mkdir()
            lab.write_text("def f(:\n    pass\n")
            with mock.patch.object(student, "program", lambda s, solution: ["python3", lab]), \
                    mock.patch.object(student, "ROOT", Path(tmp)), \
                    mock.patch.object(student, "is_python", lambda s: True):
                with self.assertRaises(common.LabError) as caught:
                    student.python_parses(["09_triton"], False)
                lab.write_text("def f():\n    pass\n")
                student.python_parses(["09_triton"], False)  # parses: nothing said
        self.assertRegex(str(caught.exception), r"^labs/09_triton.py:1: SyntaxError: .*; nothing run$")

    def test_section_09_without_a_gpu_installs_no_pytorch(self):
        """Triton's interpreter runs 09 over numpy arrays: a laptop without a GPU gets triton, not the
        4.7 GB of PyTorch's CUDA wheel; 10 (eager FlexAttention) and 09 on a GPU need torch."""
        from unittest import mock
        from labcli import setup
        asked = []
        with mock.patch.object(setup.importlib.util, "find_spec", lambda name: None), \
                mock.patch.object(setup, "has_gpu", lambda: False), \
                mock.patch.object(setup, "pip_install",
                                  lambda missing, *rest, index=None, what=None, **more: asked.append((sorted(missing), index)) or True):
            setup.ensure_section_packages(False, ["09_triton"])
            setup.ensure_section_packages(False, ["09_triton", "10_flex"])
            setup.ensure_section_packages(True, ["09_triton"])
        # without a GPU, torch is PyTorch's CPU build (about 200 MB), from its own index, not PyPI's CUDA build
        self.assertEqual(asked, [(["numpy", "triton"], None),
                                 (["torch"], setup.TORCH_CPU_INDEX), (["numpy", "triton"], None),
                                 (["numpy", "torch", "triton"], None)])

    def test_torch_for_the_cpu_comes_from_pytorchs_cpu_index(self):
        import contextlib, io
        from labcli import setup
        for code in (0, 1):
            cmds = []
            with tempfile.TemporaryDirectory() as tmp, \
                    mock.patch.object(setup, "externally_managed", lambda: False), \
                    mock.patch.object(setup, "has_gpu", lambda: False), \
                    mock.patch.object(setup.importlib.util, "find_spec", lambda name: None if name == "torch" else name), \
                    mock.patch.object(setup, "logged", lambda cmd, log, env=None: cmds.append(cmd) or code), \
                    mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(setup.ensure_section_packages(False, ["10_flex"]), code == 0)
            self.assertEqual(len(cmds), 1)
            self.assertIn("torch==2.11.*", cmds[0])
            self.assertEqual(cmds[0][-2:], ["--index-url", setup.TORCH_CPU_INDEX])
            self.assertIn("installing torch (about 200 MB to download; the CPU build, from PyTorch's CPU index)",
                          out.getvalue())
            if code:  # the command to type names the same index
                self.assertIn(f"install 'torch==2.11.*' --index-url {setup.TORCH_CPU_INDEX}", out.getvalue())
        # a GPU machine's --cpu run installs PyPI's build: the CPU one would stay and stop its GPU runs
        cmds = []
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(setup, "externally_managed", lambda: False), \
                mock.patch.object(setup, "has_gpu", lambda: True), \
                mock.patch.object(setup.importlib.util, "find_spec", lambda name: None if name == "torch" else name), \
                mock.patch.object(setup, "logged", lambda cmd, log, env=None: cmds.append(cmd) or 0), \
                mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                contextlib.redirect_stdout(io.StringIO()):
            setup.ensure_section_packages(False, ["10_flex"])
        self.assertNotIn("--index-url", cmds[0])

    def test_a_failed_install_says_why_and_where_the_cpu_index_is_unreachable_offers_pypi(self):
        """pip's own last word for an index it cannot reach is "Could not find a version": the line
        names the unreachable host instead, and for PyTorch's CPU index, PyPI's build as the way out."""
        import contextlib, io
        from labcli import setup
        unreachable = ("WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(... "
                       "Failed to establish a new connection: [Errno -2] Name or service not known')': /whl/cpu/torch/\n"
                       "ERROR: Could not find a version that satisfies the requirement torch==2.11.* (from versions: none)\n")
        other = "ERROR: No matching distribution found for triton==3.6.*\n"
        said = {}
        for name, text, module in (("cpu-index", unreachable, "torch"), ("pypi", other, "triton")):
            with tempfile.TemporaryDirectory() as tmp, \
                    mock.patch.object(setup, "externally_managed", lambda: False), \
                    mock.patch.object(setup, "has_gpu", lambda: False), \
                    mock.patch.object(setup.importlib.util, "find_spec", lambda n, m=module: None if n == m else n), \
                    mock.patch.object(setup, "logged", lambda cmd, log, env=None, t=text: log.open("a").write(t) and 1), \
                    mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                Path(tmp, "log").write_text("ERROR: an earlier command's failure\n")
                self.assertFalse(setup.ensure_section_packages(False, ["10_flex"]))
            said[name] = [l for l in out.getvalue().splitlines() if "could not install" in l]
        self.assertEqual(len(said["cpu-index"]), 1)
        self.assertRegex(said["cpu-index"][0], r"^lab: pip could not install torch \(download\.pytorch\.org could not "
                                              r"be reached\); .*--index-url https://download\.pytorch\.org/whl/cpu; or "
                                              r"PyPI's build.*4\.7 GB.*: \S+ -m pip install 'torch==2\.11\.\*'\)$")
        self.assertEqual(len(said["pypi"]), 1)
        self.assertIn("could not install triton (No matching distribution found for triton==3.6.*);", said["pypi"][0])
        self.assertNotIn("PyPI's build", said["pypi"][0])

    def test_a_system_python_that_refuses_pip_gets_the_labs_own_venv(self):
        """Debian 12 and Ubuntu 23.04+ mark their Python as externally managed (PEP 668) and its pip
        refuses to install: the packages go into .venv/, and the command starts again under it."""
        import contextlib, io
        from labcli import setup
        fake = Path("/nowhere/.venv/bin/python3")
        for made, expect_ok in ((fake, True), (None, False)):
            pip_cmds, restarts = [], []
            with tempfile.TemporaryDirectory() as tmp, \
                    mock.patch.object(setup, "externally_managed", lambda: True), \
                    mock.patch.object(setup, "make_lab_venv", lambda: made), \
                    mock.patch.object(setup, "enter_lab_venv", lambda argv: restarts.append(argv)), \
                    mock.patch.object(setup.importlib.util, "find_spec", lambda name: None), \
                    mock.patch.object(setup, "logged", lambda cmd, log, env=None: pip_cmds.append(cmd) or 0), \
                    mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                    contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(setup.ensure_python_deps(), expect_ok)
            if made:
                self.assertEqual(pip_cmds[0][:4], [str(fake), "-m", "pip", "install"])
                self.assertNotIn("--user", pip_cmds[0])
                self.assertEqual(len(restarts), 1)
                self.assertIn("into the lab's virtual environment", out.getvalue())
            else:  # no venv could be made (make_lab_venv said why): nothing installed, nothing restarted
                self.assertEqual((pip_cmds, restarts), ([], []))
                self.assertIn("the tests that need them are skipped", out.getvalue())

    def test_a_venv_that_cannot_be_made_names_the_package(self):
        import contextlib, io
        from labcli import setup
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(setup, "VENV", Path(tmp) / ".venv"), \
                mock.patch.object(setup, "_made", []), \
                mock.patch.object(setup, "can_install", lambda: None), \
                mock.patch.object(setup, "logged", lambda cmd, log, env=None: 1), \
                mock.patch.object(setup, "build_log", lambda: Path(tmp) / "log"), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertIsNone(setup.make_lab_venv())
        self.assertIn("sudo apt-get install python3-venv", out.getvalue())

    def test_the_driver_runs_under_the_labs_venv_once_made(self):
        """enter_lab_venv replaces the driver by .venv's Python with the same arguments, once: not
        when it already runs there (the marker a broken venv would not clear)."""
        with tempfile.TemporaryDirectory() as tmp:
            venv, said = Path(tmp) / ".venv", Path(tmp) / "argv"
            (venv / "bin").mkdir(parents=True)
            fake = venv / "bin" / "python3"
            fake.write_text(f'#!/bin/sh\necho "$@ [$LAB_VENV_ENTERED]" > {said}\n')
            fake.chmod(0o755)
            child = ("import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; from labcli import setup; "
                     "setup.VENV = Path(sys.argv[2]); setup.enter_lab_venv(['run', '01']); print('stayed')")
            env = {k: v for k, v in os.environ.items() if k != "LAB_VENV_ENTERED"}
            base = [sys.executable, "-c", child, str(ROOT / "scripts"), str(venv)]
            if sys.prefix == getattr(sys, "base_prefix", sys.prefix):  # (under a venv of its own it stays)
                r = subprocess.run(base, env=env, capture_output=True, text=True, timeout=60)
                self.assertNotIn("stayed", r.stdout)
                self.assertEqual(said.read_text().strip(), f"{ROOT / 'scripts' / 'lab'} run 01 [1]")
            r = subprocess.run(base, env=dict(env, LAB_VENV_ENTERED="1"), capture_output=True, text=True, timeout=60)
            self.assertIn("stayed", r.stdout)

    def test_a_build_configured_under_another_python_is_told_this_one(self):
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(common, "BUILD", Path(tmp)):
            self.assertIsNone(common.cached_python())
            Path(tmp, "CMakeCache.txt").write_text("X:BOOL=ON\nPython3_EXECUTABLE:UNINITIALIZED=/usr/bin/python3\n"
                                                   "_Python3_EXECUTABLE:INTERNAL=/usr/bin/python3\n")
            self.assertEqual(common.cached_python(), "/usr/bin/python3")
            calls = []
            with mock.patch.object(common, "logged", lambda cmd, log, *a, **k: calls.append(cmd) or 0), \
                    mock.patch.object(common, "build_log", lambda: Path(tmp) / "log"):
                common.configure()
            self.assertEqual(calls, [] if sys.executable == "/usr/bin/python3" else
                             [["cmake", "-S", common.ROOT, "-B", Path(tmp), f"-DPython3_EXECUTABLE={sys.executable}"]])

    def test_a_compile_error_keeps_the_compilers_why(self):
        """The excerpt of a failed build: each error line with the indented lines under it (nvcc's
        operand types, the source line, its caret), the log's earlier commands and notes left out."""
        log_text = ("$ cmake --build build\n[1/2] Building CUDA object old\n"
                    "$ cmake --build build --target lab_04_fp16\n[1/2] Building CUDA object lab_04_fp16.cu.o\n"
                    "FAILED: lab_04_fp16.cu.o\n"
                    "labs/04_fp16.cu(212): error: no operator \"=\" matches these operands\n"
                    "            operand types are: Acc16<__half> = float\n"
                    "        acc[2 * u] = acc[2 * u] + p * vf.x;\n"
                    "                   ^\n"
                    "\n"
                    "  detected during instantiation of \"void pv_add<T>\"\n"
                    "1 error detected in the compilation of \"labs/04_fp16.cu\".\n"
                    "ninja: build stopped: subcommand failed.\n")
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "build.log"
            log.write_text(log_text)
            shown = common.build_errors(log).splitlines()
        self.assertEqual(shown, ["FAILED: lab_04_fp16.cu.o",
                                 "labs/04_fp16.cu(212): error: no operator \"=\" matches these operands",
                                 "            operand types are: Acc16<__half> = float",
                                 "        acc[2 * u] = acc[2 * u] + p * vf.x;",
                                 "                   ^",
                                 "1 error detected in the compilation of \"labs/04_fp16.cu\"."])

    def test_a_lab_saved_during_the_build_is_built_again(self):
        # the editor saves while the compiler has the file open: the object would be newer than the
        # save by the clock, and a build tool could keep it; the driver sees the change and builds again
        for saves, builds in ((0, 1), (1, 2), (9, 3)):  # (9: an editor saving all the time: at most 2 more)
            with tempfile.TemporaryDirectory() as tmp:
                lab = Path(tmp, "labs", "04_fp16.cu")
                lab.parent.mkdir()
                lab.write_text("v0")
                os.utime(lab, ns=(1, 1))
                calls = []

                def fake_build(cmd, log, *a, **k):
                    calls.append(cmd)
                    if len(calls) <= saves:
                        lab.write_text(f"v{len(calls)}")
                        os.utime(lab, ns=(len(calls) + 1, len(calls) + 1))
                    return 0
                with mock.patch.object(common, "ROOT", Path(tmp)), mock.patch.object(common, "configure"), \
                        mock.patch.object(common, "check_architectures"), mock.patch.object(common, "logged", fake_build), \
                        mock.patch.dict(os.environ, {"LAB_NO_BUILD": ""}), \
                        contextlib.redirect_stdout(io.StringIO()) as out:
                    common.build(["lab_04_fp16"])
                now = lab.stat().st_mtime_ns  # moved to now where it changed: every build tool sees it newer
            self.assertEqual(len(calls), builds, out.getvalue())
            self.assertEqual(out.getvalue().count("lab: labs/04_fp16.cu changed during the build: building again"),
                             min(saves, 2))
            if saves == 1:
                self.assertGreater(now, 10**18)

    def test_missing_packages_are_named_when_they_cannot_be_installed(self):
        import contextlib, io
        from unittest import mock
        from labcli import setup
        with mock.patch.object(setup, "vendored_dir", lambda root=None: None), \
                mock.patch.object(setup, "missing_packages", lambda prefixes=None: ["catch2"]), \
                mock.patch.object(setup, "can_install", lambda: None), \
                contextlib.redirect_stdout(io.StringIO()) as out:
            setup.ensure_cpp_deps()
        self.assertIn("CMake will fetch their sources", out.getvalue())
        self.assertIn("sudo apt-get install nlohmann-json3-dev libcli11-dev catch2", out.getvalue())


class Vendor(unittest.TestCase):
    """deps --vendor: a copy of the C++ dependencies that a build of the tree finds by itself."""

    def test_vendor_copies_the_headers_and_the_build_uses_them(self):
        import contextlib, io
        from labcli import setup
        with tempfile.TemporaryDirectory() as tmp:
            prefix, tree = Path(tmp) / "usr", Path(tmp) / "tree"
            tree.mkdir()
            for rel in setup.VENDORED:  # a fake installed prefix
                f = prefix / rel / "x.h" if not rel.endswith(".a") else prefix / rel
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text("x")
            with self.assertRaises(common.LabError):  # a prefix without the packages: said, nothing copied
                setup.vendor(tree, prefix=Path(tmp) / "empty")
            for pkg, rel in setup.DEBIAN_PACKAGES.items():
                (prefix / rel).write_text("x")
            with contextlib.redirect_stdout(io.StringIO()):
                deps = setup.vendor(tree, prefix=prefix)
            self.assertTrue((deps / "include" / "nlohmann" / "json.hpp").exists())
            self.assertTrue((deps / "lib" / "libCatch2WithMain.a").exists())
            self.assertEqual(common.prefix_args(tree), [f"-DCMAKE_PREFIX_PATH={deps}"])
            self.assertEqual(common.prefix_args(Path(tmp) / "usr"), [])


if __name__ == "__main__":
    unittest.main()
