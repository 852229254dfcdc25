"""scripts/loc.py counts device code only, the same way in C++ and Triton, and the table in
ch12/09_triton.md is the current one."""
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import loc  # noqa: E402

CU = """// header
#include "lab.cuh"
int host_only(int x) { return x; }
template <int D>
__device__ __forceinline__ float twice(float x) {
  // a comment line
  /* a block
     comment */
  return 2 * x;  // trailing comments still count the line

}
__global__ void __launch_bounds__(128, 2)
kern(float* o) {
  o[0] = twice<64>(1.0f);
}
"""
PY = '''import triton
def host(x):
    return x
@triton.jit
def k(x, BLOCK: tl.constexpr):
    """a docstring
    of two lines"""
    # a comment
    y = x

    return y
'''


class Loc(unittest.TestCase):
    def test_cuda(self):
        f = loc.cuda_functions(CU)
        self.assertEqual(sorted(f), ["kern", "twice"])
        self.assertEqual(len(f["twice"]), 3)  # signature, return, closing brace
        self.assertEqual(len(f["kern"]), 4)

    def test_triton(self):
        f = loc.triton_functions(PY)
        self.assertEqual(list(f), ["k"])
        self.assertEqual(len(f["k"]), 3)  # def, y = x, return (not the decorator, not the docstring)

    def test_rows_count_something(self):
        for row, _, parts in loc.ROWS:
            for path, inc, exc in parts:
                n, names = loc.count(path, inc, exc)
                self.assertGreater(n, 0, f"{row}: {path}")

    def test_handout_table_is_current(self):
        doc = (ROOT / "ch12" / "09_triton.md").read_text()
        self.assertEqual(loc.replace(doc, loc.table()), doc, "python3 scripts/loc.py --write ch12/09_triton.md")


if __name__ == "__main__":
    unittest.main(verbosity=2)
