"""Runs a Python section's case file (tests/cases/NN_name.json) against its programs:
the solution passes every case (exit 0), refuses every bad input (exit 2, one line on stderr, no
traceback), fails every --bug case (exit 1); the generated stub fails cleanly ("output not
written", exit 1). With --cpu, on the CPU path (cases marked cpu: false are skipped); without it,
on a GPU, and exit 77 when the program says it cannot run here.

  python3 tests/python_section_cases.py 09_triton --cpu [--stub-only] [--quick N]

--bench [--tag TAG] --json FILE runs the case file's `bench` entries instead (GPU) and appends their
records to FILE, then its `baselines` through scripts/baselines.py into the same FILE: the
section and its library baselines in one run.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import make_labs  # noqa: E402


def run(prog, args, timeout):
    t0 = time.time()
    p = subprocess.run([sys.executable, str(prog)] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("section")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--stub-only", action="store_true")
    ap.add_argument("--quick", type=int, default=0, help="only the first N cases")
    ap.add_argument("--bench", action="store_true", help="run the bench entries and the baselines (GPU)")
    ap.add_argument("--tag", default="", help="with --bench: only the entries with this tag (default: untagged)")
    ap.add_argument("--json", default="", help="with --bench: the record list to append to")
    a = ap.parse_args()
    if a.bench:
        sys.exit(bench(a))
    data = json.loads((ROOT / "tests" / "cases" / f"{a.section}.json").read_text())
    sol, lab = ROOT / "solutions" / f"{a.section}.py", ROOT / "labs" / f"{a.section}.py"
    extra = ["--cpu"] if a.cpu else []
    timeout = data.get("timeout_s", 300)
    failed, passed = [], 0

    def expect(what, prog, args, code, must=None):
        nonlocal passed
        got, out, err, secs = run(prog, args + extra, timeout)
        if got == 77 and code != 2:
            print(f"cannot run here: {err.strip()}")
            sys.exit(77)
        ok = got == code and "Traceback" not in out + err and (must is None or must in out + err)
        if code == 2:
            ok = ok and len(err.strip().splitlines()) == 1 and not out.strip()
        print(f"{'ok  ' if ok else 'FAIL'} {secs:6.1f}s  {what}: exit {got} (want {code})")
        if not ok:
            failed.append(what)
            print("      " + (out + err).strip().replace("\n", "\n      ")[-1500:])
        else:
            passed += 1

    # A case that names its variants runs once on each (as scripts/lab check runs it); one that
    # names none, once on the program's default.
    cases = [dict(c, args=c["args"] + ["--variant", v], name=f"{c['name']} [{v}]") if v else c
             for c in data["cases"] if not a.cpu or c.get("cpu", True) for v in c.get("variants", [None])]
    if a.quick:
        cases = cases[:a.quick]
    if not a.stub_only:
        for c in cases:
            expect(f"solution {c['name']}", sol, c["args"], 0, "PASS")
        for c in data.get("bad_inputs", []):
            expect(f"bad input {c['name']}", sol, c["args"], 2, "bad input:")
        for c in data.get("bugs", []):
            if not a.cpu or c.get("cpu", True):
                for v in c.get("variants", [None]):
                    expect(f"--bug {c['bug']} {c['name']}", sol, c["args"] + ["--bug", c["bug"]] +
                           (["--variant", v] if v else []), 1, "FAIL")
    if make_labs.is_untouched_stub(lab):  # once the lab holds a student's work there is no stub to test
        for c in cases[:3]:
            expect(f"stub {c['name']}", lab, c["args"], 1, "output not written")
    else:
        print(f"skip  the stub cases: {lab.relative_to(ROOT)} is not the generated stub")
    print(f"{passed} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


def bench(a):
    data = json.loads((ROOT / "tests" / "cases" / f"{a.section}.json").read_text())
    if not a.json:
        print("--bench needs --json FILE")
        return 2
    sol = ROOT / "solutions" / f"{a.section}.py"
    for var, folder in (("TRITON_CACHE_DIR", "triton-cache"), ("TORCHINDUCTOR_CACHE_DIR", "inductor-cache")):
        os.environ.setdefault(var, str(ROOT / "build" / folder))  # one compile per kernel across the runs
    bad = 0
    for e in data.get("bench", []):
        if e.get("tag", "") != a.tag:
            continue
        for variant in e.get("variants", data.get("variants", [])):
            args = e["args"] + ["--variant", variant, "--json", a.json, "--quiet"]
            code, out, err, secs = run(sol, args, data.get("timeout_s", 900))
            line = (out + err).strip().splitlines()
            print(f"{secs:6.1f}s  exit {code}  {variant} {' '.join(e['args'])}  {line[-1] if line else ''}", flush=True)
            if code == 77:
                return 77
            bad += code != 0
    if not a.tag or a.tag in data.get("baseline_tags", []):  # as scripts/lab bench (labcli/maintainer.py)
        for spec in data.get("baselines", []):
            p = subprocess.run([sys.executable, str(ROOT / "scripts" / "baselines.py"), "--section", a.section,
                                "--spec", json.dumps(spec), "--json", a.json], capture_output=True, text=True)
            print((p.stdout + p.stderr).strip(), flush=True)
    print(f"bench {a.section}: {bad} run(s) did not pass their check")
    return 1 if bad else 0


if __name__ == "__main__":
    main()
