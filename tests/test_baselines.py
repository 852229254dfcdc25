"""scripts/baselines.py's FLOP convention is the harness's: exact visible pairs with a window,
halved for plain causal, bottom-right aligned (checked against brute force); its timing queues
every iteration; its libraries are a registry the tables know; bad input exits 2 (no GPU needed)."""
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


class FakeTorch:
    """Just enough of torch.cuda for time_ms, logging the order of what it is asked to do."""
    def __init__(self):
        self.log = []
        outer = self

        class Event:
            count = 0

            def __init__(self, enable_timing):
                Event.count += 1
                self.id = Event.count

            def record(self):
                outer.log.append("record")

            def elapsed_time(self, stop):
                return float(stop.id - self.id)

        class Ctx:  # a context manager that logs entering and leaving
            def __init__(self, name, fail=False):
                self.name, self.fail = name, fail

            def __enter__(self):
                outer.log.append(self.name + "{")

            def __exit__(self, *exc):
                outer.log.append("}")
                if self.fail:
                    raise RuntimeError("operation not permitted when stream is capturing")

        class Stream:
            def wait_stream(self, other):
                pass

        class CUDAGraph:
            def replay(self):
                outer.log.append("replay")

        class Cuda:
            def synchronize(self):
                outer.log.append("sync")

            def empty_cache(self):
                outer.log.append("empty_cache")

            def current_stream(self):
                return Stream()

            def stream(self, s):
                return Ctx("side")

            def graph(self, g):
                return Ctx("capture", fail=outer.capture_fails)
        self.capture_fails = False
        self.cuda = Cuda()
        self.cuda.Event = Event
        self.cuda.Stream = Stream
        self.cuda.CUDAGraph = CUDAGraph


class Timing(unittest.TestCase):
    def test_every_run_is_queued_before_the_first_wait(self):
        torch = FakeTorch()
        med, lo, hi = baselines.time_ms(torch, lambda: torch.log.append("run"), warmup=2, iters=5)
        # Warm-up, one wait, then 5 x (start, run, stop) with no wait between runs, then one wait.
        self.assertEqual(torch.log, ["run", "run", "sync"] + ["record", "run", "record"] * 5 + ["sync"])
        self.assertEqual((med, lo, hi), (1.0, 1.0, 1.0))  # each interval is its own start-stop pair

    def test_sdpa_is_timed_from_a_cuda_graph_and_keeps_its_eager_time(self):
        torch = FakeTorch()
        med, lo, hi, how = baselines.timed(torch, "sdpa-cudnn", lambda: torch.log.append("run"), warmup=1, iters=2)
        self.assertEqual(how, {"method": "cuda-graph", "eager_median_ms": 1.0, "graph_median_ms": 1.0})  # a tie: the graph
        eager = ["run", "sync"] + ["record", "run", "record"] * 2 + ["sync"]
        graph = ["side{", "run", "}", "capture{", "run", "}", "sync", "replay", "sync"] + ["record", "replay", "record"] * 2 + ["sync"]
        self.assertEqual(torch.log, eager + graph)  # the timed intervals hold replays, not Python calls

    def test_the_faster_of_eager_and_graph_is_kept(self):
        med, lo, hi, how = baselines.faster_of((0.09, 0.08, 0.12), (0.02, 0.019, 0.03))  # a host-bound decode step
        self.assertEqual((med, lo, hi, how["method"]), (0.02, 0.019, 0.03, "cuda-graph"))
        med, lo, hi, how = baselines.faster_of((1.69, 1.68, 1.70), (1.87, 1.86, 1.88))  # a plan slower under capture
        self.assertEqual((med, lo, hi, how["method"]), (1.69, 1.68, 1.70, "queued"))
        self.assertEqual((how["eager_median_ms"], how["graph_median_ms"]), (1.69, 1.87))

    def test_flashinfer_is_timed_from_a_cuda_graph_too(self):  # a serving engine replays its decode
        torch = FakeTorch()
        *_, how = baselines.timed(torch, "flashinfer", lambda: torch.log.append("run"), warmup=1, iters=2)
        self.assertEqual(how["method"], "cuda-graph")
        self.assertIn("capture{", torch.log)

    def test_other_baselines_and_failed_captures_stay_eager(self):
        torch = FakeTorch()
        *_, how = baselines.timed(torch, "flex", lambda: torch.log.append("run"), warmup=1, iters=2)
        self.assertEqual(how, {"method": "queued"})
        self.assertNotIn("capture{", torch.log)
        torch = FakeTorch()
        torch.capture_fails = True
        *_, how = baselines.timed(torch, "sdpa-flash", lambda: torch.log.append("run"), warmup=1, iters=2)
        self.assertEqual(how["method"], "queued")
        self.assertIn("not permitted", how["graph_unavailable"])


class Serve(unittest.TestCase):
    """--serve: each request's records appended to its file, bad requests answered with exit 2 (an
    unknown variant too), a library's error with 1, and the server goes on to the next request."""

    def test_requests_are_answered_in_order_and_a_failure_does_not_end_the_server(self):
        import io
        import json
        import tempfile
        from contextlib import redirect_stdout
        calls = []

        def run_spec(torch, spec, section, warmup, iters):
            calls.append((spec["t"], section))
            if spec["t"] == 3:
                raise RuntimeError("no kernel for this shape")
            if spec["t"] == 5:
                raise SystemExit("baselines: unknown variant 'nope'")
            return [{"t": spec["t"]}]
        spec = lambda t: {"variants": ["sdpa-flash"], "b": 1, "h": 1, "t": t, "d": 64}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "r.json"
            lines = [json.dumps({"section": "08_x", "spec": spec(t), "json": str(path)}) for t in (1, 3, 5)]
            lines += ["{not json", json.dumps({"spec": dict(spec(7), d=0), "json": str(path)}),
                      json.dumps({"spec": spec(9), "json": str(path)})]
            saved, sys.stdin = sys.stdin, io.StringIO("\n".join(lines) + "\n")
            real, baselines.run_spec = baselines.run_spec, run_spec
            out = io.StringIO()
            try:
                with redirect_stdout(out):
                    baselines.serve(FakeTorch(), 1, 2)
            finally:
                sys.stdin, baselines.run_spec = saved, real
            done = [l for l in out.getvalue().splitlines() if l.startswith("SERVE_DONE")]
            self.assertEqual(done, ["SERVE_DONE 0", "SERVE_DONE 1", "SERVE_DONE 2", "SERVE_DONE 2", "SERVE_DONE 2",
                                    "SERVE_DONE 0"])
            self.assertEqual(calls, [(1, "08_x"), (3, "08_x"), (5, "08_x"), (9, "baseline")])  # d=0: refused first
            self.assertEqual(json.loads(path.read_text()), [{"t": 1}, {"t": 9}])


class Registry(unittest.TestCase):
    def test_every_library_is_one_the_tables_know(self):
        import tables
        self.assertTrue({"sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "eager", "flex"}
                        <= set(baselines.LIBRARIES))
        self.assertLessEqual(set(baselines.LIBRARIES), set(tables.LIBRARIES))

    def test_bad_specs_exit_2_before_anything_runs(self):
        import subprocess
        script = Path(__file__).resolve().parent.parent / "scripts" / "baselines.py"
        for spec in ('{"variants": ["sdpa-nope"], "b": 1, "h": 1, "t": 16, "d": 64}', "{not json"):
            r = subprocess.run([sys.executable, str(script), "--spec", spec, "--json", "/nonexistent/x.json"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertEqual(len(r.stdout.strip().splitlines()), 1)
            self.assertNotIn("Traceback", r.stderr)


class Backward(unittest.TestCase):
    """The backward mode: its FLOP factors, its passes, its spec checks, section 11's specs and the
    float64 gradients its check compares against."""
    def test_pass_flop_factors(self):
        fwd = 4.0 * 2 * 4 * 128 * 256 * 64
        self.assertEqual(baselines.pass_flops("forward", 2, 4, 128, 256, 64, False), fwd)
        self.assertEqual(baselines.pass_flops("backward", 2, 4, 128, 256, 64, False), 2.5 * fwd)
        self.assertEqual(baselines.pass_flops("forward+backward", 2, 4, 128, 256, 64, False), 3.5 * fwd)
        self.assertEqual(baselines.pass_flops("backward", 2, 4, 128, 256, 64, True), 2.5 * fwd / 2)
        self.assertEqual(baselines.pass_flops("forward+backward", 2, 4, 128, 256, 64, True), 3.5 * fwd / 2)
        with self.assertRaises(KeyError):
            baselines.pass_flops("sideways", 1, 1, 1, 1, 64, False)

    def test_a_backward_spec_records_both_passes(self):
        self.assertEqual(baselines.spec_passes({"backward": True}), ["backward", "forward+backward"])
        self.assertEqual(baselines.spec_passes({}), ["forward"])
        self.assertEqual(baselines.spec_passes({"backward": False}), ["forward"])

    def test_spec_problems(self):
        ok = {"variants": ["sdpa-flash", "fa4"], "b": 1, "h": 2, "t": 64, "d": 64, "dtype": "bf16", "backward": True}
        self.assertIsNone(baselines.spec_problem(ok))
        self.assertIsNone(baselines.spec_problem({**ok, "backward": False, "window": 8, "variants": ["flex"]}))
        for bad, says in (({**ok, "window": 8}, "window"), ({**ok, "dtype": "fp32"}, "16"),
                          ({**ok, "backward": "yes"}, "true or false"), ({**ok, "variants": ["fa5"]}, "fa5"),
                          ({**ok, "variants": []}, "none given"), ({**ok, "t": 0}, "t"),
                          ({**ok, "dtype": "fp8"}, "fp8"), ([1, 2], "object")):
            problem = baselines.spec_problem(bad)
            self.assertIsNotNone(problem, bad)
            self.assertIn(says, problem)

    def test_section_11_has_the_three_libraries_on_every_bench_problem(self):
        import json
        data = json.loads((Path(__file__).resolve().parent / "cases" / "11_backward.json").read_text())

        def problem(args):
            flags = [x for x in args if x.startswith("--")]
            plain = [x for x in args if x != "--causal"]  # the flags with a value, in pairs
            a = dict(zip(plain[::2], plain[1::2]))
            return (int(a["--b"]), int(a["--h"]), int(a["--t"]), int(a["--d"]), a["--dtype"], "--causal" in flags)
        benched = {problem(e["args"]) for e in data["bench"]}
        specs = {(s["b"], s["h"], s["t"], s["d"], s["dtype"], s["causal"]): s for s in data["baselines"]}
        self.assertEqual(len(benched), 12)
        self.assertEqual(set(specs), benched)
        for s in specs.values():
            self.assertIsNone(baselines.spec_problem(s), s)
            self.assertTrue(s["backward"])
            self.assertEqual(set(s["variants"]), {"sdpa-flash", "sdpa-cudnn", "fa4"})

    def test_a_bad_backward_spec_exits_2_before_anything_runs(self):
        import subprocess
        script = Path(__file__).resolve().parent.parent / "scripts" / "baselines.py"
        spec = '{"variants": ["sdpa-flash"], "b": 1, "h": 1, "t": 16, "d": 64, "backward": true, "window": 4}'
        r = subprocess.run([sys.executable, str(script), "--spec", spec, "--json", "/nonexistent/x.json"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(len(r.stdout.strip().splitlines()), 1)

    def test_float64_gradients_match_autograd_and_catch_wrong_ones(self):
        try:
            import torch
        except ImportError:
            self.skipTest("PyTorch is not importable")
        import math
        torch.manual_seed(0)
        for b, tq, tkv, h, h_kv, d, causal in ((1, 37, 37, 4, 2, 16, True), (2, 20, 45, 2, 2, 8, False),
                                               (1, 45, 20, 2, 1, 8, True)):
            mk = lambda *shape, off: (torch.rand(*shape, dtype=torch.float64) * 2 - 1 + off)
            q, k, v = mk(b, tq, h, d, off=0.25), mk(b, tkv, h_kv, d, off=0.25), mk(b, tkv, h_kv, d, off=0.5)
            do = mk(b, tq, h, d, off=0.0)
            ref = baselines.reference_grads(torch, q, k, v, do, causal, rows=16)
            leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
            qt, kt, vt = (x.transpose(1, 2) for x in leaves)
            kt, vt = kt.repeat_interleave(h // h_kv, 1), vt.repeat_interleave(h // h_kv, 1)
            s = (qt @ kt.transpose(-1, -2) / math.sqrt(d)).masked_fill(
                baselines.visibility_mask(torch, tq, tkv, causal, None, "cpu"), float("-inf"))
            o = torch.nan_to_num(torch.softmax(s, -1), nan=0.0) @ vt
            dq, dk, dv = torch.autograd.grad(o, leaves, do.transpose(1, 2))
            errors = baselines.grad_errors(ref, dq, dk, dv)
            self.assertTrue(all(e["max_abs_err"] < 1e-12 for e in errors.values()), errors)
            self.assertTrue(baselines.grads_pass(errors, "fp16"))
            for wrong in ((dq * 0, dk, dv), (dq, dk, dv * 1.1), (dq, -dk, dv)):
                self.assertFalse(baselines.grads_pass(baselines.grad_errors(ref, *wrong), "bf16"))

    def test_the_reference_takes_D_from_the_16_bit_O_the_forward_stores(self):
        """A FlashAttention backward computes D = rowsum(dO * O) from the O it wrote in 16 bits; the
        reference must too, or that rounding alone fails every library at long non-causal rows."""
        try:
            import torch
        except ImportError:
            self.skipTest("PyTorch is not importable")
        import math
        torch.manual_seed(0)
        b, t, h, d = 1, 300, 2, 32
        mk = lambda off: (torch.rand(b, t, h, d, dtype=torch.float64) * 2 - 1 + off).to(torch.bfloat16)
        q, k, v, do = mk(0.25), mk(0.25), mk(0.5), mk(0.0)
        ref = baselines.reference_grads(torch, q, k, v, do, False, rows=16)

        def grads(o_of):  # dQ, dK, dV in float64 with D from o_of(O)
            qd, kd, vd, dod = (x.double().transpose(1, 2) for x in (q, k, v, do))  # [B, H, T, D]
            p = torch.softmax(qd @ kd.transpose(-1, -2) / math.sqrt(d), -1)
            delta = (dod * o_of(p @ vd)).sum(-1, keepdim=True)
            ds = p * (dod @ vd.transpose(-1, -2) - delta)
            return tuple(x.transpose(1, 2) for x in (ds @ kd / math.sqrt(d), ds.transpose(-1, -2) @ qd / math.sqrt(d),
                                                     p.transpose(-1, -2) @ dod))

        stored = grads(lambda o: o.to(torch.bfloat16).double())
        self.assertTrue(all(e["max_abs_err"] < 1e-12 for e in baselines.grad_errors(ref, *stored).values()))
        exact_d = baselines.grad_errors(ref, *grads(lambda o: o))["dq"]
        self.assertGreater(exact_d["max_abs_err"], 1e-3 * exact_d["max_abs_ref"])  # the rounding shows in dQ


if __name__ == "__main__":
    unittest.main()
