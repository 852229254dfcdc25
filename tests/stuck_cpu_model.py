#!/usr/bin/env python3
"""stuck_cpu_model.py PROGRAM ARGS...: the driver's early stop of a CPU model that never ends, end to
end. PROGRAM is an exercise stuck in an endless loop, run on a small shape with --cpu; run_limited
judges it as `scripts/lab run` does (stuck_on_a_small_shape), at JUDGE_S seconds, just after the
harness's first "still running" line. It must be stopped there, as a timeout, by that line alone
(the problem line comes only after the model, so the notice itself must name the shape)."""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from labcli import common, student  # noqa: E402

JUDGE_S = 8     # the harness's first notice comes at 5 s (common/harness/parallel.h, SlowRunNotice)
LIMIT_S = 60    # the run's own limit: a driver that does not stop it early waits this long

cmd = [*sys.argv[1:], "--cpu"]
start = time.time()
code, out, _ = common.run_limited(cmd, LIMIT_S, stuck=(JUDGE_S, student.stuck_on_a_small_shape))
took = time.time() - start
print(out[-2000:])
problems = []
if code != common.EXIT_TIMEOUT:
    problems.append(f"exit {code}, expected {common.EXIT_TIMEOUT} (stopped as a timeout)")
if took > JUDGE_S + 10:
    problems.append(f"stopped after {took:.0f} s, not at the judge's {JUDGE_S} s")
if not student.SHAPE_LINE.search("\n".join(l for l in out.splitlines() if student.STILL_RUNNING.match(l))):
    problems.append("no \"still running\" line names the shape")
if student.still_working(out):
    problems.append("the output reads as a large shape at work, not an endless loop")
if problems:
    print("FAIL: " + "; ".join(problems))
    sys.exit(1)
print(f"ok: stopped after {took:.1f} s as a timeout; the notice named the shape")
