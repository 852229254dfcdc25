"""Shared by paged_matches_decode.py (06 = 05) and paged_tma_matches_ws.py (08 paged = ws): run a
reference program with --dump, then candidates on the same inputs, and compare O and LSE byte for
byte. A reference that exits 77 (cannot run here) skips the whole test with exit 77."""
import subprocess
import sys


class SameOutputs:
    def __init__(self):
        self.failed = 0

    def _run(self, cmd, dest):
        return subprocess.run([*map(str, cmd), "--dump", str(dest)], capture_output=True, text=True)

    def reference(self, cmd, dest):
        """Runs the reference; False (counted as a failure) if it did not pass."""
        r = self._run(cmd, dest)
        if r.returncode == 77:
            print("SKIP: " + (r.stdout + r.stderr).strip().splitlines()[-1])
            sys.exit(77)
        if r.returncode != 0:
            print(f"FAIL: {' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout}{r.stderr}")
            self.failed += 1
        return r.returncode == 0

    def candidate(self, label, cmd, dest, ref, ref_name):
        r = self._run(cmd, dest)
        if r.returncode != 0:
            print(f"FAIL: {label}: exited {r.returncode}\n{r.stdout}{r.stderr}")
            self.failed += 1
            return
        same = all((ref / f).read_bytes() == (dest / f).read_bytes() for f in ("o.npy", "lse.npy"))
        print(f"{'ok  ' if same else 'FAIL'} {label}: O and LSE {'identical' if same else 'differ'} to {ref_name}")
        self.failed += not same

    def finish(self):
        print("all identical" if not self.failed else f"{self.failed} mismatches")
        sys.exit(1 if self.failed else 0)
