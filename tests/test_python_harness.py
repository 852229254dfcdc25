"""CPU tests of common/python/labharness and the Python sections' tooling (no GPU):

- the seeded inputs are the C++ generator's, bit for bit (against --dump of 03 and 04's CPU models,
  and, where Triton is installed, against 09_triton's own --dump);
- the fp64 reference agrees with a brute-force loop (bottom-right causal, rows with no key, GQA),
  and the check fails a zero output and an unwritten one;
- --json refuses a file that is not a record list (exit 2, file untouched) and appends to a list;
- --json and --dump paths are refused up front as the C++ programs refuse them, empty ones too;
- without a GPU, one line: the reason, then "; " and the advice;
- a missing triton is one line and exit 77;
- make_labs turns a `#`-marked Python solution into its stub.

  python3 tests/test_python_harness.py BUILD_BIN_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "common" / "python"))
sys.path.insert(0, str(ROOT / "scripts"))
from labharness import inputs, reference  # noqa: E402
from labharness.options import Problem  # noqa: E402
import make_labs  # noqa: E402

BIN = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else ROOT / "build" / "bin"
SOL = ROOT / "solutions" / "09_triton.py"
SOL10 = ROOT / "solutions" / "10_flex.py"


def have_triton():
    try:
        import triton  # noqa: F401
        return True
    except Exception:
        return False


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except Exception:
        return False


def run(cmd, timeout=600, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)


class SameInputsAsCuda(unittest.TestCase):
    def cuda_dump(self, prog, args):
        exe = BIN / prog
        if not exe.exists():
            self.skipTest(f"{exe} is not built")
        d = tempfile.mkdtemp()
        r = run([exe, "--cpu", "--quiet", "--dump", d] + args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return d

    def compare(self, d, p, seed, magnitude):
        q, k, v = inputs.make_inputs(p, seed, magnitude)
        for name, ours in (("q", q), ("k", k), ("v", v)):
            theirs = np.load(Path(d) / f"{name}.npy")
            self.assertEqual(theirs.shape, ours.shape)
            self.assertTrue(np.array_equal(theirs.view(np.uint32), ours.view(np.uint32)), f"{name} differs")

    def test_fp32_like_03(self):
        d = self.cuda_dump("03_v2_loop_order", ["--t", "37", "--t-kv", "53", "--h", "4", "--h-kv", "2", "--d", "128",
                                                "--causal", "--seed", "7", "--magnitude", "2"])
        self.compare(d, Problem(1, 4, 2, 37, 53, 128, "fp32", True), 7, 2.0)

    def test_fp16_bf16_like_04(self):
        for dt in ("fp16", "bf16"):
            d = self.cuda_dump("04_fp16", ["--t", "40", "--b", "2", "--h", "2", "--dtype", dt, "--seed", "99",
                                           "--variant", "scalar"])
            self.compare(d, Problem(2, 2, 2, 40, 40, 64, dt, False), 99, 1.0)

    def test_triton_dump_holds_the_cuda_bits(self):
        if not have_triton():
            self.skipTest("triton is not installed")
        for dt in ("fp16", "bf16"):
            args = ["--t", "40", "--b", "2", "--h", "2", "--dtype", dt, "--seed", "99"]
            d = self.cuda_dump("04_fp16", args + ["--variant", "scalar"])
            ours = tempfile.mkdtemp()
            r = run([sys.executable, SOL, "--cpu", "--quiet", "--dump", ours] + args)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for name in ("q", "k", "v"):
                a, b = np.load(Path(d) / f"{name}.npy"), np.load(Path(ours) / f"{name}.npy")
                self.assertTrue(np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"{dt} {name} differs")
            meta = json.loads((Path(ours) / "meta.json").read_text())
            self.assertEqual(meta["problem"]["dtype"], dt)
            o = np.load(Path(ours) / "o.npy")
            self.assertFalse(inputs.is_poison(o).any())


class Reference(unittest.TestCase):
    def brute(self, p, q, k, v):
        o = np.zeros((p.b, p.t_q, p.h, p.d))
        lse = np.full((p.b, p.h, p.t_q), -np.inf)
        for b in range(p.b):
            for h in range(p.h):
                hk = h // (p.h // p.h_kv)
                for i in range(p.t_q):
                    keys = [j for j in range(p.t_kv) if not p.causal or j <= i + p.t_kv - p.t_q]
                    if not keys:
                        continue
                    s = np.array([q[b, i, h].astype(np.float64) @ k[b, j, hk] / np.sqrt(p.d) for j in keys])
                    m = s.max()
                    e = np.exp(s - m)
                    o[b, i, h] = sum(e[n] * v[b, j, hk] for n, j in enumerate(keys)) / e.sum()
                    lse[b, h, i] = m + np.log(e.sum())
        return o, lse

    def test_against_brute_force(self):
        for p in (Problem(1, 4, 2, 9, 5, 64, "fp16", True), Problem(2, 2, 1, 5, 11, 64, "bf16", True),
                  Problem(1, 2, 2, 7, 7, 128, "fp16", False)):
            q, k, v = inputs.make_inputs(p, 3, 1.0)
            o, lse = self.brute(p, q, k, v)
            got = reference.reference_rows(p, q, k, v, reference.all_rows(p))
            for (b, h), (ro, rl) in got.items():
                np.testing.assert_allclose(ro, o[b, :, h], atol=1e-12)
                np.testing.assert_array_equal(np.isinf(rl), np.isinf(lse[b, h]))
                np.testing.assert_allclose(rl[np.isfinite(rl)], lse[b, h][np.isfinite(lse[b, h])], atol=1e-12)
            # the check passes the reference rounded to the dtype, fails zeros and the poison
            out = inputs.round_to(p.dtype, o.astype(np.float32))
            rows = reference.all_rows(p)
            self.assertTrue(reference.check(p, q, k, v, rows, out, lse.astype(np.float32))["passed"])
            c = reference.check(p, q, k, v, rows, np.zeros_like(out), lse.astype(np.float32))
            self.assertFalse(c["passed"])
            self.assertIn(f"every one of the {out.size} elements checked is 0", c["verdict"])
            c = reference.check(p, q, k, v, rows, np.full_like(out, np.nan), lse.astype(np.float32))
            self.assertFalse(c["passed"])
            self.assertIn(f"all {out.size} elements of O are NaN or inf", c["verdict"])
            nan_one = out.copy()
            nan_one[0, -1, 0, 3] = np.nan
            c = reference.check(p, q, k, v, rows, nan_one, lse.astype(np.float32))
            self.assertTrue(c["verdict"].startswith("1 elements of O are NaN or inf"), c["verdict"])
            c = reference.check(p, q, k, v, rows, inputs.from_storage(inputs.poisoned(out.shape, p.dtype), p.dtype),
                                lse.astype(np.float32))
            self.assertFalse(c["passed"])
            self.assertIn("output not written", c["verdict"])
            c = reference.check(p, q, k, v, rows, out, (lse + 0.5).astype(np.float32))  # O right, the LSE not
            self.assertFalse(c["passed"])
            self.assertIn("LSE too far from fp64", c["verdict"])
            self.assertIn("O within its bound", c["verdict"])

    def exact(self, p, seed=3):
        q, k, v = inputs.make_inputs(p, seed, 1.0)
        o, lse = self.brute(p, q, k, v)
        return q, k, v, inputs.round_to(p.dtype, o.astype(np.float32)), lse.astype(np.float32)

    def test_details_end_with_the_worst_element_unless_listed(self):
        """compare.cpp's detail lines: the first few over the bound, then the one the max error is from."""
        p = Problem(1, 2, 2, 16, 16, 64, "fp16", True)
        q, k, v, out, lse = self.exact(p)
        rows = reference.all_rows(p)
        bad = out.copy()
        bad[0, 0, 0, :10] += np.float32(0.01)  # small errors first
        bad[0, 12, 1, 7] += np.float32(0.5)    # the max error, far behind
        c = reference.check(p, q, k, v, rows, bad, lse)
        self.assertFalse(c["passed"])
        self.assertEqual(len(c["details"]), 6, c["details"])  # five of the first, then the worst
        self.assertTrue(c["details"][4].startswith("O[b=0, i=0, h=0, d=4] = "), c["details"])
        self.assertTrue(c["details"][5].startswith("worst: O[b=0, i=12, h=1, d=7] = "), c["details"])
        self.assertIn("(error 0.5", c["details"][5])
        one = out.copy()  # the worst is the first bad element: listed once
        one[0, 3, 0, 2] += np.float32(0.5)
        one[0, 9, 0, 2] += np.float32(0.01)
        c = reference.check(p, q, k, v, rows, one, lse)
        self.assertEqual([d.split(" = ")[0] for d in c["details"]], ["O[b=0, i=3, h=0, d=2]", "O[b=0, i=9, h=0, d=2]"])

    def test_a_short_report_keeps_the_worst_line(self):
        d = ["O[a]", "O[b]", "O[c]", "O[d]", "worst: O[z]", "LSE[x]"]
        self.assertEqual(reference.shown_details(d, 3), ["O[a]", "O[b]", "worst: O[z]"])
        self.assertEqual(reference.shown_details(d[:4], 3), ["O[a]", "O[b]", "O[c]"])
        self.assertEqual(reference.shown_details(d[:1], 3), ["O[a]"])

    def test_all_nan_with_a_right_lse_points_at_how_o_is_made(self):
        p = Problem(1, 2, 2, 16, 16, 64, "fp16", True)
        q, k, v, out, lse = self.exact(p)
        rows = reference.all_rows(p)
        c = reference.check(p, q, k, v, rows, np.full_like(out, np.nan), lse)
        self.assertTrue(c["verdict"].startswith(
            f"all {out.size} elements of O are NaN or inf on the rows checked: every row's max and sum are right "
            "(LSE within its bound), so look at how O is made from P and V: a key outside the row's mask must give "
            "P = 0"), c["verdict"])
        self.assertNotIn("stub", c["verdict"])
        c = reference.check(p, q, k, v, rows, np.full_like(out, np.nan), lse + np.float32(1))  # LSE wrong too
        self.assertIn("nothing finite came out", c["verdict"])
        self.assertIn("LSE too far as well", c["verdict"])

    def test_nan_rows_that_see_no_key_are_named(self):
        """compare.cpp's: NaN only on rows that see no key (O = acc / l, l = 0) says so; one more NaN
        on a row with keys gives the plain count."""
        p = Problem(1, 2, 2, 20, 16, 64, "fp16", True)  # causal, T_q > T_kv: rows 0..3 see no key
        q, k, v, out, lse = self.exact(p)
        rows = reference.all_rows(p)
        bad = out.copy()
        bad[0, :4] = np.nan
        c = reference.check(p, q, k, v, rows, bad, lse)
        self.assertTrue(c["verdict"].startswith("512 elements of O are NaN or inf, all on rows that see no key"), c["verdict"])
        bad[0, 10, 1, 3] = np.nan
        c = reference.check(p, q, k, v, rows, bad, lse)
        self.assertTrue(c["verdict"].startswith("513 elements of O are NaN or inf on the rows checked"), c["verdict"])

    def test_a_computed_nan_lse_is_named_with_its_rows(self):
        """compare.cpp's: an LSE that is a NaN other than the poison, O right, names its rows and -inf - -inf
        (on rows that see no key: such a row's LSE must be -inf); the poison there is "LSE not written"."""
        p = Problem(1, 2, 2, 20, 16, 64, "fp16", True)  # causal, T_q > T_kv: rows 0..3 see no key
        q, k, v, out, lse = self.exact(p)
        rows = reference.all_rows(p)
        bad = lse.copy()
        bad[0, 1, 5] = bad[0, 1, 9] = np.nan
        c = reference.check(p, q, k, v, rows, out, bad)
        self.assertTrue(c["verdict"].startswith(
            "LSE is NaN on 2 of 40 rows checked (first: LSE[b=0, h=1, i=5]), with O within its bound: a NaN computed, "
            "not the poison left in place; look for -inf - -inf"), c["verdict"])
        self.assertIn("LSE[b=0, h=1, i=5] = NaN, expected ", c["details"][0])
        self.assertIn("(a NaN computed, not the poison)", c["details"][0])
        keyless = lse.copy()
        keyless[0, :, :4] = np.nan
        c = reference.check(p, q, k, v, rows, out, keyless)
        self.assertTrue(c["verdict"].startswith(
            "LSE is NaN on 8 rows, all rows that see no key (first: LSE[b=0, h=0, i=0]), with O within its bound"),
            c["verdict"])
        poisoned = lse.copy()
        poisoned.view(np.uint32)[0, 1, 5] = np.uint32(0xFFFFFFFF)  # the poison's bits: never written
        c = reference.check(p, q, k, v, rows, out, poisoned)
        self.assertTrue(c["verdict"].startswith("LSE not written: 1 of 40 elements"), c["verdict"])

    def test_an_lse_in_base_2_is_named(self):
        """compare.cpp's: an LSE without its ln 2 (m + log2 l) is said to be in base 2; another wrong
        LSE points at the row's keys and the LSE's formula."""
        p = Problem(1, 2, 2, 16, 16, 64, "fp16", True)
        q, k, v, out, lse = self.exact(p)
        rows = reference.all_rows(p)
        c = reference.check(p, q, k, v, rows, out, (lse * reference.LOG2_E).astype(np.float32))
        self.assertIn("every LSE is log2(e) = 1.4427 times the expected one", c["verdict"])
        # off on every other row (one constant on every row is lse_offset's: LseOffset below)
        c = reference.check(p, q, k, v, rows, out, lse + np.float32(0.5) * (np.arange(p.t_q) % 2).astype(np.float32))
        self.assertIn("look at the row's keys, one too many or too few", c["verdict"])


class Options(unittest.TestCase):
    def test_a_mistyped_option_names_the_one_it_likely_meant(self):
        """As the C++ programs (tests/test_options.cpp): two edits at most, fewer for a short name."""
        from labharness import options
        shown = ["--variant", "--causal", "--t", "--t-kv", "--window"]
        said = lambda word: options._as_cpp(f"unrecognized arguments: {word}", shown)
        self.assertEqual(said("--varaint"), "unknown option --varaint (did you mean --variant? see --help)")
        self.assertEqual(said("--tt=4"), "unknown option --tt (did you mean --t? see --help)")
        self.assertEqual(said("--frobnicate"), "unknown option --frobnicate (see --help)")


class Program(unittest.TestCase):
    def test_json_refuses_a_non_list(self):
        d = Path(tempfile.mkdtemp())
        f = d / "r.json"
        f.write_text('{"not": "a list"}\n')
        r = run([sys.executable, SOL, "--cpu", "--t", "8", "--h", "1", "--json", f])
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertEqual(f.read_text(), '{"not": "a list"}\n')
        r = run([sys.executable, SOL, "--cpu", "--t", "8", "--h", "1", "--json", d / "no" / "r.json"])
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_json_appends_a_valid_record(self):
        if not have_triton():
            self.skipTest("triton is not installed")
        from labharness import record
        f = Path(tempfile.mkdtemp()) / "r.json"
        f.write_text("[]\n")
        for _ in range(2):
            r = run([sys.executable, SOL, "--cpu", "--t", "20", "--h", "1", "--causal", "--json", f], cwd="/")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        recs = json.loads(f.read_text())
        self.assertEqual(len(recs), 2)
        self.assertEqual(record.validate(recs[0]), "")
        self.assertEqual(recs[0]["section"], "09_triton")
        self.assertTrue(recs[0]["check"]["passed"])

    def test_dump_and_json_paths_are_refused_before_anything_runs(self):
        """--dump and --json are checked with the other options, in the C++ harness's words: exit 2,
        one line, nothing run, nothing created; an empty path is bad input, not the option left out."""
        d = Path(tempfile.mkdtemp())
        f = d / "afile"
        f.write_text("a user's file\n")
        missing = d / "no" / "a" / "b"
        numbers = d / "numbers.json"  # a JSON list, but not of records
        numbers.write_text("[1, 2]\n")
        cases = [(["--dump", f], "is a file, not a folder"), (["--dump", missing], "does not exist"),
                 (["--json", numbers], "holds something other than a JSON list of records"),
                 (["--dump", ""], "bad input: --dump: an empty path"),
                 (["--json", ""], "bad input: --json: an empty path"), (["--json", d], "is a folder, not a file"),
                 (["--dump", "/proc/nope"], "kernel file system")]
        for prog in (SOL, SOL10):
            for args, message in cases:
                r = run([sys.executable, prog, "--cpu", "--t", "16", "--h", "1", *args])
                what = f"{prog.name} {args}: {r.stdout + r.stderr}"
                self.assertEqual(r.returncode, 2, what)
                self.assertEqual(r.stdout, "", what)  # nothing ran
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, what)
                self.assertTrue(r.stderr.startswith("bad input: "), what)
                self.assertIn(message, r.stderr, what)
        self.assertFalse((d / "no").exists())
        self.assertEqual(f.read_text(), "a user's file\n")
        self.assertEqual(numbers.read_text(), "[1, 2]\n")
        c = BIN / "01_naive"
        if c.exists():  # the same line as a C++ program's
            for args, _ in cases:
                ours = run([sys.executable, SOL, "--cpu", "--t", "16", *args]).stderr
                theirs = run([c, "--cpu", "--t", "16", *args]).stderr
                self.assertEqual(ours, theirs)

    def test_rows_checked_are_query_rows_as_in_the_cpp_harness(self):
        """A row is one (b, i, h) query row (compare.cpp's RowId), B*H*T_q of them: --check full says
        every row was checked, a sample says how many of B*H*T_q, and the record's rows_checked agrees;
        never the count of (b, h) pairs. A C++ program says the same of the same shape."""
        p = Problem(2, 3, 3, 100, 100, 64, "fp16", False)
        n = sum(len(i) for i in reference.rows_to_check(p, "sample", 24, 1234).values())
        self.assertTrue(6 < n < 600, n)  # neither the (b, h) pairs nor every row
        shape = ["--cpu", "--b", "2", "--h", "3", "--t", "100", "--sample-rows", "24"]
        said = {"full": "checked every row", "sample": f"checked {n} of 600 rows, a sample; --check full checks every row"}
        progs = [prog for prog, ok in ((SOL, have_triton()), (SOL10, have_torch())) if ok]
        if not progs:
            self.skipTest("neither triton nor torch is installed")
        for prog in progs:
            for mode, scope in said.items():
                f = Path(tempfile.mkdtemp()) / "r.json"
                r = run([sys.executable, prog, *shape, "--check", mode, "--json", f])
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(f"({scope})", r.stdout, f"{prog.name} --check {mode}")
                self.assertEqual(json.loads(f.read_text())[0]["check"]["rows_checked"], 600 if mode == "full" else n)
        c = BIN / "01_naive"
        if c.exists():
            for mode, scope in said.items():
                self.assertIn(f"({scope})", run([c, *shape, "--check", mode]).stdout, f"01_naive --check {mode}")

    def test_cpu_alone_runs_a_small_shape_and_says_so(self):
        """09 under --cpu without --t runs T=100 (several 32 x 16 tiles, the last ones ragged: seconds,
        not the GPU default's minute under the interpreter) and its banner says the shape; a --t given
        is kept, and a --h given keeps T=100. 10's eager path keeps its default (seconds already)."""
        if not have_triton():
            self.skipTest("triton is not installed")
        for args, (h, t), said in (([], (8, 100), "B=1 H=8 T=100 D=64 fp16 (T=100 is --cpu's default; a GPU run's T=1024)"),
                                   (["--h", "2"], (2, 100), "B=1 H=2 T=100 D=64 fp16 (T=100 is --cpu's default"),
                                   (["--t", "40"], (8, 40), None)):
            f = Path(tempfile.mkdtemp()) / "r.json"
            r = run([sys.executable, SOL, "--cpu", "--json", f, *args], timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            banner = r.stdout.splitlines()[0]
            self.assertTrue(banner.startswith("== 09_triton on the CPU"), banner)
            if said:
                self.assertIn(said, banner)
            else:
                self.assertNotIn("--cpu's default", banner)
            prob = json.loads(f.read_text())[0]["problem"]
            self.assertEqual((prob["h"], prob["t_q"], prob["t_kv"]), (h, t, t))
        self.assertRegex(run([sys.executable, SOL, "--help"]).stdout, r"default 1024; 100 under\s+--cpu")

    def test_help_lists_only_the_options_a_section_takes(self):
        """--window and --page-size are refused by 09 (by name, with the section that has them) and so
        are not in its --help; 10 has windows and lists --window."""
        help09 = run([sys.executable, SOL, "--help"]).stdout
        self.assertNotIn("--window", help09)
        self.assertNotIn("--page-size", help09)
        r = run([sys.executable, SOL, "--cpu", "--causal", "--window", "8"])
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertRegex(r.stderr + r.stdout, r"--window is not supported by 09_triton \(sliding windows are section 07\)")
        help10 = run([sys.executable, SOL10, "--help"]).stdout
        self.assertIn("--window", help10)
        self.assertNotIn("--page-size", help10)

    def test_a_slow_cpu_run_says_so_before_it_starts(self):
        """A shape that takes long under --cpu is announced on the first line, with a rough time, before
        the silent minutes (read here as it comes, then the run is stopped)."""
        import signal
        progs = [(SOL, ["--t", "2048"], have_triton()), (SOL10, ["--t", "8192"], have_torch())]

        def first_line(prog, args, limit=None):
            env = {k: v for k, v in os.environ.items() if k != "LAB_TIME_LIMIT_S"}
            env.update({"LAB_TIME_LIMIT_S": limit} if limit else {})
            proc = subprocess.Popen([sys.executable, str(prog), "--cpu", "--check", "none", *args], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                return proc.stdout.readline()
            finally:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for prog, args, ok in progs:
            if not ok:
                continue
            self.assertRegex(first_line(prog, args), rf"^note: B=1 H=8 T={args[1]} D=64 \w+ under --cpu takes roughly "
                                                     r"\d+ (s|min) on one laptop core, in silence until the verdict; "
                                                     r".* in seconds$", prog.name)
            # started by scripts/lab with a shorter time limit: the note says the run will be stopped first
            self.assertRegex(first_line(prog, args, "10"), r"on one laptop core, longer than the 10 s scripts/lab gives "
                                                           r"a run \(--timeout\): it will be stopped first, in silence",
                             prog.name)
        if have_triton():  # and a small one is not announced
            r = run([sys.executable, SOL, "--cpu", "--t", "64", "--h", "2"])
            self.assertTrue(r.stdout.startswith("== 09_triton on the CPU"), r.stdout)

    def test_option_mistakes_read_as_in_the_cpp_programs(self):
        """A mistyped command line gets the C++ programs' one line, word for word (and a value option
        given twice is refused, not silently the last)."""
        mistakes = [["--t", "abc"], ["-t", "64"], ["--t", "5", "--t", "6"], ["foo"], ["--bogus", "3"], ["--seed", "-1"],
                    ["--t", "--quiet"], ["--variant", "--causal"], ["--json"]]
        c = BIN / "01_naive"
        for args in mistakes:
            r = run([sys.executable, SOL10, "--cpu", *args])
            self.assertEqual((r.returncode, r.stdout), (2, ""), args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, args)
            if c.exists():
                self.assertEqual(r.stderr, run([c, "--cpu", *args]).stderr, args)
        self.assertIn("is given more than once", run([sys.executable, SOL10, "--cpu", "--t", "5", "--t", "6"]).stderr)

    def test_no_gpu_says_the_reason_then_the_advice_after_a_semicolon(self):
        """scripts/lab shows what comes before the first ";" of "cannot run here:" as the reason."""
        try:
            import torch  # noqa: F401
        except Exception:
            self.skipTest("torch is not installed")
        from labcli.common import no_gpu_reason
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, even on a machine with one
        for prog in (SOL, SOL10) if have_triton() else (SOL10,):
            r = run([sys.executable, prog, "--t", "16", "--iters", "0"], env=env)
            self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertRegex(r.stderr, rf"^cannot run here: no CUDA GPU visible to PyTorch; add --cpu to run {prog.stem} ")
            self.assertEqual(no_gpu_reason(r.stderr), "no CUDA GPU visible to PyTorch")

    def test_too_little_shared_memory_is_cannot_run_not_a_wrong_answer(self):
        """Triton's OutOfResources, raised directly (09) or inside Inductor's error (10), is exit 77
        with the C++ programs' sentence; any other error is not mistaken for it."""
        from labharness.run import shared_memory_shortfall
        triton_says = ("out of resource: shared memory, Required: 147456, Hardware limit: 101376. "
                       "Reducing block sizes or `num_stages` may help.")
        for error in (RuntimeError(triton_says), RuntimeError("No valid triton configs. OutOfResources: " + triton_says)):
            self.assertEqual(shared_memory_shortfall(error).split(";")[0],
                             "this kernel needs 144 KB of shared memory per block and this GPU allows 99 KB")
        self.assertIsNone(shared_memory_shortfall(ValueError("out of resource: registers, Required: 300, Hardware limit: 255")))

    def test_an_error_names_the_line_of_the_lab_it_passed_through(self):
        """A typo in the student's kernel under Triton's interpreter arrives wrapped
        (InterpreterError(repr(e)) from e): the line shows the lab's own line and the original error."""
        from labharness.run import where_in_lab
        with tempfile.TemporaryDirectory() as tmp:
            lab = Path(tmp, "09_triton.py")
            lab.write_text("def kv_sweep():\n    return tl_maximun(1)\n")
            scope = {}
            exec(compile(lab.read_text(), str(lab), "exec"), scope)
            try:
                try:
                    scope["kv_sweep"]()
                except NameError as e:
                    raise RuntimeError(repr(e)) from e
            except RuntimeError as wrapped:
                said = where_in_lab(wrapped, program=str(lab))
        self.assertTrue(said.endswith("09_triton.py:2 in kv_sweep: NameError: name 'tl_maximun' is not defined"), said)
        self.assertEqual(where_in_lab(ValueError("bad"), program=str(lab)), "ValueError: bad")  # not through the lab

    def test_a_compile_error_names_the_traced_line_and_what_went_wrong(self):
        """torch.compile (Dynamo) raises from its own frames: the lab's line is in the message (a
        "Caused by:" whose path is cut at the front, "from user code:") or in real_stack, and the
        message's first line says what went wrong, its last one only where to read more. A message
        that ends with what is wrong (Triton's CompilationError, after the source) keeps its last line."""
        from traceback import FrameSummary
        from labharness.run import where_in_lab
        with tempfile.TemporaryDirectory() as tmp:
            lab = Path(tmp, "labs", "10_flex.py")
            cut = str(lab)[3:]  # Dynamo's "Caused by:" keeps the path's tail only

            class UserError(Exception):
                pass
            said = where_in_lab(UserError(
                "Could not guard on data-dependent expression zuf0 (unhinted: zuf0).  (Size-like symbols: none)\n\n"
                f"Caused by: return cap * math.tanh(score / cap)  # {cut}:64 in soft_cap (_dynamo/x.py:158 in f)\n"
                "For more information, run with TORCH_LOGS=\"dynamic\"\n\n"
                "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're "
                "reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS=\"+dynamo\"\n"),
                program=str(lab))
            self.assertTrue(said.endswith("10_flex.py:64 in soft_cap: UserError: Could not guard on data-dependent "
                                          "expression zuf0 (unhinted: zuf0). (Size-like symbols: none) (a score_mod "
                                          "or mask_mod gets its score and indices as tensors: compute with torch ops "
                                          "such as torch.tanh and torch.where, not math.*, float(), int() or .item())"),
                            said)
            unsupported = UserError("Data-dependent branching\n  Explanation: Detected data-dependent branching.\n"
                                    "  Hint: Use `torch.cond`.\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace")
            unsupported.real_stack = [FrameSummary("/elsewhere/flex_attention.py", 1721, "wrapper"),
                                      FrameSummary(str(lab), 75, "sliding_window")]
            said = where_in_lab(unsupported, program=str(lab))
            self.assertIn("10_flex.py:75 in sliding_window: UserError: Data-dependent branching: Detected "
                          "data-dependent branching. (a score_mod or mask_mod sees its indices as tensors: write "
                          "the condition with &, |, torch.where, not a Python if)", said)
            triton = where_in_lab(RuntimeError("at 3:4:\ndef f():\n    x = tl.foo\n    ^\nfoo is not defined"),
                                  program=str(lab))
            self.assertEqual(triton, "RuntimeError: foo is not defined")

    def test_missing_triton_is_exit_77(self):
        fake = Path(tempfile.mkdtemp()) / "triton"
        fake.mkdir()
        (fake / "__init__.py").write_text("raise ImportError('not installed (test)')\n")
        env = dict(os.environ, PYTHONPATH=str(fake.parent))
        r = run([sys.executable, SOL, "--cpu", "--t", "8"], env=env)
        self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"^cannot run here: needs triton .*requirements")
        self.assertNotIn("Traceback", r.stderr)
        r = run([sys.executable, SOL, "--cpu", "--t", "0"], env=env)  # bad input is still bad input
        self.assertEqual(r.returncode, 2)


class TrainTiny(unittest.TestCase):
    """scripts/train_tiny.py (the 11 handout's training run) refuses bad arguments and output paths
    as the section programs do, before anything runs: exit 2, one line, nothing created, no file
    lost, no traceback; with no GPU (or no torch), good arguments are exit 77."""
    PROG = ROOT / "scripts" / "train_tiny.py"

    def test_bad_arguments_and_paths_are_one_line_and_nothing_made(self):
        d = Path(tempfile.mkdtemp())
        afile = d / "afile"
        afile.write_text("a user's file\n")
        cases = [(["--out", afile / "x.png"], f"--out: {afile} is a file, not a folder"),
                 (["--out", "/etc/passwd/x.png"], "--out: /etc/passwd is a file, not a folder"),
                 (["--out", d / "no" / "x.png"], f"--out: folder {d / 'no'} does not exist"),
                 (["--json", d / "none" / "r.json"], f"--json: folder {d / 'none'} does not exist"),
                 (["--out", d / "nojson" / "x.png", "--json", d / "r.json"], "does not exist"),
                 (["--json", d], "is a folder, not a file"), (["--out", ""], "an empty path"),
                 (["--out", "/proc/x.png"], "kernel file system"),
                 (["--replot", afile, "--out", d / "no" / "x.png"], "does not exist"),
                 (["--replot", afile], "is not a training record"),
                 (["--steps", "0"], "--steps must be >= 1"), (["--steps", "abc"], "--steps: 'abc' is not a value"),
                 (["--lr", "nan"], "--lr must be a positive number"), (["--lr", "inf"], "--lr must be a positive"),
                 (["--clip", "nan"], "--clip must be a number >= 0"), (["--digits", "1"], "--digits must be >= 2"),
                 (["--seed", "-1"], "--seed must be >= 0"), (["--bogus"], "unknown option --bogus")]
        if os.geteuid() != 0:  # (root may write anywhere)
            ro = d / "ro"
            ro.mkdir()
            ro.chmod(0o500)
            cases.append((["--out", ro / "x.png"], "is not writable"))
        for args, message in cases:
            r = run([sys.executable, self.PROG, *args], timeout=120)
            what = f"{args}: {r.stdout + r.stderr}"
            self.assertEqual((r.returncode, r.stdout), (2, ""), what)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, what)
            self.assertTrue(r.stderr.startswith("bad input: "), what)
            self.assertIn(message, r.stderr, what)
        self.assertEqual(sorted(p.name for p in d.iterdir()), sorted(["afile"] + (["ro"] if os.geteuid() else [])))
        self.assertEqual(afile.read_text(), "a user's file\n")

    def test_a_record_is_replotted_to_a_good_path(self):
        f = Path(tempfile.mkdtemp()) / "rec.json"
        f.write_text(json.dumps({"task": "t", "gpu": "g", "loss_sdpa": [2.0, 1.0], "loss_lab": [2.0, 1.01]}))
        r = run([sys.executable, self.PROG, "--replot", f, "--out", f.with_suffix(".png")], timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("lab vs SDPA max", r.stdout)


@unittest.skipUnless(have_triton(), "needs triton")
class OptionalBugBranches(unittest.TestCase):
    """09's optional --bug branches count as planted however the student spells the test (the
    constant's name or its value), and never in a comment."""

    def test_planted_by_name_or_value_not_in_a_comment(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("triton_09", SOL)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self.assertTrue(mod.planted("no-rescale"))  # the solution's own branch
        for code in ("if BUG == NO_RESCALE:", "    if BUG==1:", "if 1 == BUG:", "x = 1 if BUG == 1 else 0"):
            self.assertTrue(mod.planted("no-rescale", code), code)
        for code in ("# if BUG == NO_RESCALE:", "if BUG == 2:", "if BUG == 12:", "if MYBUG == 1:", "pass"):
            self.assertFalse(mod.planted("no-rescale", code), code)
        self.assertTrue(mod.planted("local-causal", "        if BUG == 2:"))


@unittest.skipUnless(have_triton(), "needs triton")
class MemoryPastTheEnd(unittest.TestCase):
    """Q, K, V, O and the LSE have guard regions after them (NaN after the inputs, the poison after the
    outputs): a store without its row mask is a FAIL that names it, not a PASS and then a crash; an
    unmasked read of keys past T_kv gives the same verdict on every run, and that verdict names it."""

    def planted(self, wrong, args):
        """09's solution with `wrong` in place of its right line, run on the CPU: (exit code, stdout)."""
        source = SOL.read_text()
        right, mistake = wrong
        self.assertIn(right, source)
        with tempfile.TemporaryDirectory() as tmp:
            prog = Path(tmp, "09_triton.py")
            prog.write_text(source.replace(right, mistake))
            r = run([sys.executable, prog, "--cpu", *args], timeout=120,
                    env=dict(os.environ, PYTHONPATH=str(ROOT / "common" / "python")))
        return r.returncode, r.stdout + r.stderr

    def test_a_store_without_the_row_mask_fails_by_name(self):
        o_store = "out.to(O.dtype.element_ty), mask=row_ok[:, None])"
        lse_store = "offs_m, lse, mask=row_ok)"
        for (right, mistake), what in (((o_store, "out.to(O.dtype.element_ty))"), "O"),
                                       ((lse_store, "offs_m, lse)"), "the LSE")):
            code, out = self.planted((right, mistake), ["--t", "100", "--causal", "--h", "2"])
            self.assertEqual(code, 1, out)  # a verdict, not a crash (-11) after a PASS
            self.assertIn(f"check    {what} written past the last row (T_q = 100): ", out)
            self.assertIn(f"elements of the guard region after {what} were overwritten: a store without the row "
                          "mask (row_ok)?", out)
            self.assertNotIn("PASS", out)
            self.assertTrue(out.rstrip().endswith("FAIL: 09_triton triton (CPU)"), out)

    def test_keys_read_past_the_end_give_one_verdict_that_names_them(self):
        """full_end not rounded down to a tile: the unmasked sweep reads keys past T_kv."""
        wrong = ("full_end = tl.maximum(tl.minimum(T_KV, q_begin + shift + 1), 0) // BLOCK_N * BLOCK_N",
                 "full_end = tl.maximum(tl.minimum(T_KV, q_begin + shift + 1), 0)")
        args = ["--t", "1", "--causal", "--d", "128", "--dtype", "bf16", "--quiet"]
        runs = [self.planted(wrong, args) for _ in range(2)]
        self.assertEqual(runs[0], runs[1])
        code, out = runs[0]
        self.assertEqual(code, 1, out)
        self.assertIn("check    1024 elements of O are NaN because K and V past T_kv (= 1) hold NaN in this check: an "
                      "unmasked load read keys past the end (full_end not rounded down to BLOCK_N?)", out)
        self.assertNotIn("not written", out)
        # the rows of the last Q tile only (96..99), the others wrong but finite: the cause still leads
        code, out = self.planted(wrong, ["--t", "100", "--causal", "--h", "2", "--quiet"])
        self.assertEqual(code, 1, out)
        self.assertIn("check    512 elements of O are NaN because K and V past T_kv (= 100) hold NaN", out)


class Flex(unittest.TestCase):

    def test_against_07_without_a_build_of_07_says_how_to_build_one(self):
        if not have_torch():
            self.skipTest("torch is not installed")
        with tempfile.TemporaryDirectory() as empty:
            r = run([sys.executable, SOL10, "--cpu", "--variant", "window", "--causal", "--window", "4", "--t", "16",
                     "--h", "1", "--against-07"], env=dict(os.environ, LAB_BUILD_DIR=empty))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"no build of section 07 in {empty}/bin: no comparison (scripts/lab run 07 builds yours)", r.stdout)

    def test_document_without_the_clamp_fails_a_cpu_case(self):
        """Pitfall 3 of the handout: a `document` mask that indexes doc_ids at a position below 0 (the
        top rows when T_q > T_kv) without clamping it fails a CPU case of scripts/lab check 10."""
        if not have_torch():
            self.skipTest("torch is not installed")
        clamped = "doc_ids[torch.clamp(pos, 0, p.t_kv - 1)]"
        source = SOL10.read_text()
        self.assertIn(clamped, source)
        cases = json.loads((ROOT / "tests" / "cases" / "10_flex.json").read_text())["cases"]
        document = [c for c in cases if "document" in c.get("variants", []) and c.get("cpu", True)]
        with tempfile.TemporaryDirectory() as tmp:
            unclamped = Path(tmp, "10_flex.py")
            unclamped.write_text(source.replace(clamped, "doc_ids[pos]"))
            env = dict(os.environ, PYTHONPATH=str(ROOT / "common" / "python"))
            codes = {c["name"]: run([sys.executable, unclamped, "--cpu", "--variant", "document", "--iters", "0",
                                     "--quiet", *c["args"]], env=env).returncode for c in document}
        self.assertIn(1, codes.values(), codes)
        self.assertTrue(set(codes.values()) <= {0, 1}, codes)


    def test_a_softcap_reading_cap_as_a_number_fails(self):
        """Pitfall 2 of the handout: float(cap) or cap.item() gives the right O but compiles once per
        cap value on a GPU; the check fails it by name, however the number is taken."""
        if not have_torch():
            self.skipTest("torch is not installed")
        tensor = "return cap * torch.tanh(score / cap)"
        source = SOL10.read_text()
        self.assertIn(tensor, source)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "common" / "python"))
        args = ["--cpu", "--variant", "softcap", "--t", "32", "--h", "2", "--iters", "0"]
        for wrong in ("return float(cap) * torch.tanh(score / float(cap))",
                      "return cap.item() * torch.tanh(score / cap.item())",
                      "return CAP * torch.tanh(score / CAP)\n        CAP = float(cap)"):  # a closure's float
            with tempfile.TemporaryDirectory() as tmp:
                planted = Path(tmp, "10_flex.py")
                planted.write_text(source.replace(tensor, wrong))
                r = run([sys.executable, planted, *args], env=env)
            self.assertEqual(r.returncode, 1, wrong + r.stdout + r.stderr)
            self.assertIn("EXERCISE softcap reads cap as a Python number", r.stdout, wrong)
            self.assertNotIn("Warning", r.stdout + r.stderr, wrong)  # the check's probe warns nobody
        r = run([sys.executable, SOL10, *args], env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_an_exception_prints_the_line_check_tells_from_a_failed_check(self):
        """The harness's one line for an exception and the pattern scripts/lab check reads it by
        (a --bug run that raises is not caught) are written in two places: this keeps them one."""
        if not have_torch():
            self.skipTest("torch is not installed")
        from labcli import student
        tensor = "return cap * torch.tanh(score / cap)"
        with tempfile.TemporaryDirectory() as tmp:
            planted = Path(tmp, "10_flex.py")
            planted.write_text(SOL10.read_text().replace(tensor, "return cap * torch.tanh(score / capp)"))
            r = run([sys.executable, planted, "--cpu", "--variant", "softcap", "--t", "16", "--h", "1", "--iters", "0"],
                    env=dict(os.environ, PYTHONPATH=str(ROOT / "common" / "python")))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertTrue(r.stderr.startswith("error: ") and "10_flex.py:" in r.stderr, r.stderr)  # the lab's line
        self.assertTrue(student.raised_an_error(r.stdout + r.stderr), r.stderr)

    def test_a_score_mod_torch_compile_cannot_trace_names_its_line(self):
        """FlexAttention traces a score_mod with torch.compile even on the CPU: an error there names
        the student's line and what went wrong, not the given line that called flex_attention and
        Dynamo's advice to set TORCHDYNAMO_VERBOSE; a number made of a tensor gets the hint to use
        torch ops. No torch warning comes before the line."""
        if not have_torch():
            self.skipTest("torch is not installed")
        from labcli import student
        tensor = "return cap * torch.tanh(score / cap)"
        source = SOL10.read_text()
        self.assertIn(tensor, source)
        line = source[:source.index(tensor)].count("\n") + 1
        plants = {"return cap * math.tanh(score / cap)": ("UserError: Could not guard on data-dependent expression",
                                                           "compute with torch ops such as torch.tanh"),
                  "return cap * torch.tanh(score / cap) if score > 0 else score": (
                      "Unsupported: Data-dependent branching", "not a Python if"),
                  "return cap * torch.tanh(score / capp)": ("Failed to find name `capp`",),
                  # run eagerly as a traced graph under vmap: no frame of soft_cap on the stack
                  "return cap * torch.tanh(score / cap) + 0 * int(q_idx)": (
                      "calling .item() on a Tensor", "compute with torch ops such as torch.tanh")}
        for wrong, words in plants.items():
            with tempfile.TemporaryDirectory() as tmp:
                planted = Path(tmp, "10_flex.py")
                planted.write_text(source.replace(tensor, wrong))
                r = run([sys.executable, planted, "--cpu", "--variant", "softcap", "--t", "16", "--h", "1",
                         "--iters", "0"], env=dict(os.environ, PYTHONPATH=str(ROOT / "common" / "python")))
            self.assertEqual((r.returncode, r.stdout.count("\n"), r.stderr.count("\n")), (1, 1, 1),
                             wrong + r.stdout + r.stderr)  # the banner, then the one line
            self.assertTrue(r.stderr.startswith("error: "), r.stderr)
            self.assertIn(f"10_flex.py:{line} in soft_cap: ", r.stderr)  # the student's line, not launch's
            self.assertNotIn("TORCHDYNAMO", r.stderr)
            self.assertNotIn("file a bug report", r.stderr)  # torch's advice to its own developers
            for word in words:
                self.assertIn(word, r.stderr, wrong)
            self.assertTrue(student.raised_an_error(r.stdout + r.stderr), r.stderr)

    def test_values_says_what_it_compiles_before_the_compiles(self):
        """--values N compiles N + 1 times (N floats, one tensor), seconds each on a CPU: a note says so
        before the silence, with the count the run then reports; --quiet prints its verdict line alone
        (the counts are in the record)."""
        if not have_torch():
            self.skipTest("torch is not installed")
        f = Path(tempfile.mkdtemp()) / "r.json"
        args = [sys.executable, SOL10, "--cpu", "--variant", "softcap", "--t", "16", "--h", "1", "--values", "2"]
        r = run(args + ["--json", f])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        note = [i for i, l in enumerate(lines) if l.startswith("note: --values 2 compiles FlexAttention 3 times ")]
        self.assertEqual(len(note), 1, r.stdout)
        self.assertLess(note[0], next(i for i, l in enumerate(lines) if "pitfall 10 (" in l), r.stdout)
        self.assertIn("seconds on a CPU", lines[note[0]])
        m = json.loads(f.read_text())[0]["metrics"]["pitfall_10"]
        self.assertEqual(m["float"]["compiles"] + m["tensor"]["compiles"], 3)
        r = run(args + ["--quiet"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(r.stdout.strip().splitlines()), 1, r.stdout)
        self.assertIn("PASS", r.stdout)


class CompilesForTheGpu(unittest.TestCase):
    """09's kernel compiled for sm_90 and sm_80 here, without a GPU (Triton ships its ptxas): the
    GPU path cannot fail on a compile error, and the Tensor Core instruction is the expected one."""

    def test_sm90_wgmma_and_sm80_mma(self):
        if not have_triton():
            self.skipTest("triton is not installed")
        code = r"""
import importlib.util, sys
sys.argv = ["x"]
spec = importlib.util.spec_from_file_location("s09", sys.argv_path)
""".replace("sys.argv_path", repr(str(SOL)))
        code += r"""
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
for cc, want in ((90, "wgmma.mma_async"), (80, "mma.sync")):
    for dt, d, causal, cfg in (("fp16", 64, True, (128, 64, 4, 3)), ("bf16", 128, False, (128, 128, 8, 2))):
        sig = {"Q": "*" + dt, "K": "*" + dt, "V": "*" + dt, "O": "*" + dt, "LSE": "*fp32", "H": "i32", "H_KV": "i32",
               "T_Q": "i32", "T_KV": "i32", "qk_scale": "fp32", "D": "constexpr", "BLOCK_M": "constexpr",
               "BLOCK_N": "constexpr", "CAUSAL": "constexpr", "BUG": "constexpr", "TMA": "constexpr"}
        const = {"D": d, "BLOCK_M": cfg[0], "BLOCK_N": cfg[1], "CAUSAL": causal, "BUG": 0, "TMA": False}
        k = triton.compile(ASTSource(m._attn_fwd, sig, const), target=GPUTarget("cuda", cc, 32),
                           options={"num_warps": cfg[2], "num_stages": cfg[3]})
        print(cc, dt, d, want in k.asm["ptx"])
        if cc == 90:  # triton-tma: the K/V tiles arrive by TMA
            const["TMA"] = True
            k = triton.compile(ASTSource(m._attn_fwd, sig, const), target=GPUTarget("cuda", cc, 32),
                               options={"num_warps": cfg[2], "num_stages": cfg[3]})
            print("tma", dt, d, "cp.async.bulk.tensor" in k.asm["ptx"] and want in k.asm["ptx"])
"""
        r = run([sys.executable, "-c", code])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        lines = r.stdout.split("\n")
        self.assertEqual(sum(l.endswith("True") for l in lines), 6, r.stdout)


class MakeLabsPython(unittest.TestCase):
    SOLUTION = ("#!/usr/bin/env python3\n# header\ndef f(x):\n    y = 0\n"
                "    # BEGIN EXERCISE twice: y = 2x\n    #   (the hint's second line)\n    y = 2 * x\n"
                "    # STUB: pass\n    # END EXERCISE\n    return y\n\nS = Section(\n    build=\"solution\",\n)\n")

    def test_stub(self):
        stub = make_labs.make_stub(self.SOLUTION, "99_x.py")
        self.assertTrue(stub.startswith("#!/usr/bin/env python3\n# STUDENT STUB"))
        self.assertIn("    # EXERCISE twice: y = 2x\n    #   (the hint's second line)\n", stub)
        self.assertIn("    # TODO(twice)", stub)
        self.assertIn("\n    pass\n    return y", stub)
        self.assertNotIn("2 * x", stub)
        self.assertIn('build="lab"', stub)
        self.assertNotIn("//", stub)
        compile(stub, "stub", "exec")

    def test_errors(self):
        with self.assertRaisesRegex(make_labs.ExerciseError, "no END EXERCISE"):
            make_labs.make_stub(self.SOLUTION.replace("    # END EXERCISE\n", ""), "99_x.py")
        with self.assertRaisesRegex(make_labs.ExerciseError, "no BEGIN EXERCISE"):
            make_labs.make_stub("x = 1\n", "99_x.py")
        with self.assertRaisesRegex(make_labs.ExerciseError, "outside a region"):
            make_labs.make_stub("# END EXERCISE\n", "99_x.py")

    def test_committed_python_labs_match(self):
        from labcli.common import BUILD
        from labcli.student import lab_states
        stale = lab_states(ROOT, BUILD)[0]  # a student's work is no stale stub
        self.assertEqual([c for c in stale if c.endswith(".py")], [])


class LseOffset(unittest.TestCase):
    """compare.cpp's: with O right, an LSE off by one constant per head on every row of it (each row's
    scores moved by one amount, which softmax cancels) is said with its constants and what makes such
    an offset; one that is not (two values, two signs, some rows, one row per head) points at the row's
    keys as before."""

    def exact(self, p):
        q, k, v = inputs.make_inputs(p, 3, 1.0)
        rows = reference.all_rows(p)
        out = np.zeros((p.b, p.t_q, p.h, p.d), dtype=np.float32)
        lse = np.zeros((p.b, p.h, p.t_q), dtype=np.float32)
        for (b, h), (o, l) in reference.reference_rows(p, q, k, v, rows).items():
            out[b, :, h] = inputs.round_to(p.dtype, o.astype(np.float32))
            lse[b, h] = l
        self.assertTrue(reference.check(p, q, k, v, rows, out, lse)["passed"])
        return q, k, v, rows, out, lse

    def test_one_constant_per_head_is_named_with_its_constants(self):
        p = Problem(1, 2, 2, 30, 90, 64, "bf16", True)
        q, k, v, rows, out, lse = self.exact(p)
        c = reference.check(p, q, k, v, rows, out, lse + np.float32([[3.75], [0.25]]))
        self.assertFalse(c["passed"])
        self.assertTrue(c["verdict"].startswith("LSE too far from fp64: max error 3.75 > bound "), c["verdict"])
        self.assertIn(
            "; O within its bound, and the LSE is off by one constant per head, the same on every row of it "
            "(h=0: +3.75, h=1: +0.25): every score of such a row moved by one amount, or its sum l scaled by one "
            "factor, which softmax cancels and the LSE keeps: look for a term constant along the row added to the "
            "scores (a position bias such as ALiBi's slope·(kv_idx - pos) written with q_idx for pos, the query's "
            "key position q_idx + T_kv - T_q", c["verdict"])
        self.assertNotIn("one too many or too few", c["verdict"])
        one = lse.copy()
        one[0, 1] -= np.float32(0.5)
        c = reference.check(p, q, k, v, rows, out, one)
        self.assertIn("the LSE is off by one constant per head, the same on every row of it (h=1: -0.5)", c["verdict"])

    def test_one_constant_everywhere_is_said_once(self):
        p = Problem(1, 2, 2, 16, 16, 64, "fp16", True)
        q, k, v, rows, out, lse = self.exact(p)
        c = reference.check(p, q, k, v, rows, out, lse + np.float32(8 * np.log(2)))  # fp8's P·2^8 kept in l
        self.assertIn("; O within its bound, and the LSE is off by the same amount, +5.55 = 8·ln 2, on every row "
                      "checked: every score of such a row moved by one amount", c["verdict"])

    def test_heads_of_several_sequences_name_b(self):
        p = Problem(2, 2, 1, 12, 20, 64, "fp16", True)
        q, k, v, rows, out, lse = self.exact(p)
        c = reference.check(p, q, k, v, rows, out, lse + np.float32([[[1.0], [0.5]], [[1.0], [0.5]]]))
        self.assertIn("(b=0 h=0: +1, b=0 h=1: +0.5, b=1 h=0: +1, …)", c["verdict"])

    def test_anything_else_points_at_the_rows_keys(self):
        p = Problem(1, 2, 2, 16, 16, 64, "fp16", True)
        q, k, v, rows, out, lse = self.exact(p)
        i = np.arange(p.t_q)
        for name, add in (("two values", np.where(i % 2, 0.75, 0.5)), ("two signs", np.where(i % 2, 0.75, -0.75)),
                          ("some rows", np.where(i % 3 == 0, 0.75, 0.0))):
            bad = lse.copy()
            bad[0, 0] += add.astype(np.float32)
            c = reference.check(p, q, k, v, rows, out, bad)
            self.assertFalse(c["passed"], name)
            self.assertIn("look at the row's keys, one too many or too few", c["verdict"], name)
            self.assertNotIn("constant", c["verdict"], name)
        p = Problem(1, 2, 2, 1, 64, 64, "fp16", False)  # one row per head: constant by itself, says nothing
        q, k, v, rows, out, lse = self.exact(p)
        c = reference.check(p, q, k, v, rows, out, lse + np.float32(0.75))
        self.assertIn("look at the row's keys, one too many or too few", c["verdict"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
