#!/usr/bin/env python3
"""test_release_suite.py: a student release passes its own test command.

Writes the release (`scripts/lab release`) into a temporary folder and runs the README's test
command there (`scripts/lab test`: it builds the labs and the harness, then runs every test a
release registers), as a student would on a fresh copy. A test that reads solutions/ or wants a
lab to be the untouched stub must stand down there, not fail.

Exit 0 when the release's suite passes; 1 with the end of its output when it does not; 77 where
there is no release to make (labs/ holds someone's edits).
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from labcli.common import BUILD  # noqa: E402
from labcli.student import lab_states  # noqa: E402


def main():
    work = lab_states(ROOT, BUILD)[1]
    if work:
        print(f"SKIP: labs/ holds edits ({', '.join(work)}): a release is made from the generated stubs")
        return 77
    # The release builds in its own build/: nothing of this tree's test environment may leak in.
    env = {k: v for k, v in os.environ.items() if k not in ("LAB_NO_BUILD", "LAB_BUILD_DIR")}
    with tempfile.TemporaryDirectory() as tmp:
        rel = Path(tmp) / "release"
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "release", str(rel)],
                           capture_output=True, text=True, timeout=300, env=env)
        if r.returncode != 0:
            print(f"FAIL: scripts/lab release exited {r.returncode}: {(r.stdout + r.stderr).strip()[-500:]}")
            return 1
        # the instructor's commands say in one line that they need the full tree, before any build
        for cmd in (["grading-example", "--out", str(Path(tmp) / "example")], ["bench", "01"],
                    ["compare", "02", "03", "--solution-too"]):
            r = subprocess.run([sys.executable, str(rel / "scripts" / "lab"), *cmd], cwd=rel, env=env,
                               capture_output=True, text=True, timeout=120)
            said = (r.stdout + r.stderr).strip()
            if r.returncode == 0 or len(said.splitlines()) != 1 or "release" not in said:
                print(f"FAIL: scripts/lab {cmd[0]} in a release: exit {r.returncode}: {said[-500:]}")
                return 1
        r = subprocess.run([sys.executable, str(rel / "scripts" / "lab"), "test"], cwd=rel, env=env,
                           capture_output=True, text=True, timeout=2400)
        out = (r.stdout + r.stderr).strip()
        summary = [line for line in out.splitlines() if "tests passed" in line]
        if r.returncode != 0:
            print(out[-3000:])
            print(f"FAIL: the release's scripts/lab test exited {r.returncode}")
            return 1
    print(f"ok: the release's scripts/lab test passed ({summary[-1].strip() if summary else 'no summary line'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
