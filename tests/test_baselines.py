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


if __name__ == "__main__":
    unittest.main()
