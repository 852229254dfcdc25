#!/usr/bin/env python3
"""Lines of kernel code, counted the same way for every section (exercise 4 of ch12/09_triton.md).

A line counts when it belongs to device code and holds code: in a .cu/.cuh file, the body and
signature of a __global__ or __device__ function (brace-matched); in a .py file, a function
decorated with @triton.jit (docstrings aside). Blank lines and comment-only lines never count.
Each row of the table names the functions it takes from each file, so what is compared is the
kernel of one variant and the device toolbox it calls, nothing of the host harness.

  python3 scripts/loc.py                 print the table
  python3 scripts/loc.py --write FILE    put it between <!-- loc:begin --> and <!-- loc:end --> in FILE
  python3 scripts/loc.py --check FILE    exit 1 if FILE's table is not the current one
"""
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALL = None  # every device function of the file

# (row, what it is, [(file, function-name regex or ALL, regex of names to leave out or None)])
ROWS = [
    ("09 `triton`, `triton-tma`", "Triton: fp16/bf16, Tensor Cores, pipelined, autotuned; TMA loads as a variant",
     [("solutions/09_triton.py", ALL, None)]),
    ("03 `v2`", "CUDA C++, fp32, register-tiled, cp.async",
     [("solutions/03_v2_loop_order.cu", ALL, None)]),
    ("04 `mma`", "CUDA C++, mma.sync + ldmatrix + cp.async, swizzled smem",
     [("solutions/04_fp16.cu", r"^(mma_\w+|gather_x4|load_rows)$", None),
      ("common/toolbox/mma_sm80.cuh", ALL, None)]),
    ("08 `ws`", "CUDA C++, Hopper TMA + mbarrier ring + wgmma, warp-specialised",
     [("solutions/08_tma_skeleton.cu", ALL, r"page|edit_page_maps|physical_block"),
      ("common/hopper/ws_forward.cuh", ALL, None), ("common/toolbox/sm90.cuh", ALL, r"_e4m3")]),
]

COMMENT_ONLY = re.compile(r"^\s*(//.*)?$")
DEVICE = re.compile(r"\b__(global|device)__\b")


def _code_line(line, in_block):
    """(counts, still inside a /* */ comment) for one C++ line."""
    s = line
    if in_block:
        end = s.find("*/")
        if end < 0:
            return False, True
        s = s[end + 2:]
    s = re.sub(r"/\*.*?\*/", "", s)
    opened = "/*" in s
    if opened:
        s = s[:s.index("/*")]
    return not COMMENT_ONLY.match(s), opened


def cuda_functions(text):
    """{name: [code line numbers]} of the __global__/__device__ functions of a C++ source."""
    lines = text.splitlines()
    out, i = {}, 0
    while i < len(lines):
        if not DEVICE.search(lines[i]) or lines[i].lstrip().startswith("//"):
            i += 1
            continue
        start = i
        head = ""
        j = i
        while j < len(lines) and "(" not in head:
            head += " " + re.sub(r"//.*", "", lines[j])
            j += 1
        before = head[:head.index("(")] if "(" in head else head
        names = re.findall(r"[A-Za-z_]\w*", before)
        name = names[-1] if names else "?"
        if name in ("__launch_bounds__",):  # the name follows the launch bounds' parentheses
            rest = " ".join(re.sub(r"//.*", "", x) for x in lines[i:i + 4])
            m = re.search(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*([A-Za-z_]\w*)\s*\(", rest)
            name = m.group(1) if m else "?"
        depth, seen, k = 0, False, i
        while k < len(lines):
            code = re.sub(r"//.*", "", lines[k])
            if not seen and ";" in code and "{" not in code and depth == 0 and k > i + 6:
                break
            depth += code.count("{") - code.count("}")
            seen = seen or "{" in code
            if seen and depth <= 0:
                break
            if not seen and code.rstrip().endswith(";") and "(" in head and ")" in code:
                break  # a declaration, not a definition
            k += 1
        counted, in_block = [], False
        for n in range(start, min(k, len(lines) - 1) + 1):
            ok, in_block = _code_line(lines[n], in_block)
            if ok:
                counted.append(n + 1)
        out.setdefault(name, []).extend(counted)
        i = k + 1
    return out


def triton_functions(text):
    """{name: [code line numbers]} of the @triton.jit functions of a Python source."""
    tree = ast.parse(text)
    lines = text.splitlines()
    out = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any("jit" in ast.unparse(d) for d in node.decorator_list):
            continue
        skip = set()
        body0 = node.body[0] if node.body else None
        if isinstance(body0, ast.Expr) and isinstance(getattr(body0, "value", None), ast.Constant) \
                and isinstance(body0.value.value, str):
            skip = set(range(body0.lineno, body0.end_lineno + 1))
        out[node.name] = [n for n in range(node.lineno, node.end_lineno + 1)
                          if n not in skip and lines[n - 1].strip() and not lines[n - 1].strip().startswith("#")]
    return out


def count(path, include=ALL, exclude=None):
    text = (ROOT / path).read_text()
    funcs = triton_functions(text) if path.endswith(".py") else cuda_functions(text)
    picked = {n: ls for n, ls in funcs.items()
              if (include is ALL or re.search(include, n)) and not (exclude and re.search(exclude, n))}
    return len({n for ls in picked.values() for n in ls}), sorted(picked)


def table():
    rows = ["| section `variant` | what it is | lines of kernel code | from |", "|---|---|---:|---|"]
    for row, what, parts in ROWS:
        total, where = 0, []
        for path, inc, exc in parts:
            n, _ = count(path, inc, exc)
            total += n
            where.append(f"`{path}` ({n})")
        rows.append(f"| {row} | {what} | {total} | {', '.join(where)} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- loc:begin -->", "<!-- loc:end -->"


def replace(doc, tbl):
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"no {BEGIN} ... {END} markers")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{tbl}{END}{tail}"


def main(argv):
    if len(argv) == 2 and argv[0] in ("--write", "--check"):
        f = Path(argv[1])
        doc = f.read_text()
        new = replace(doc, table())
        if argv[0] == "--check":
            if new != doc:
                print(f"{f}: the line-count table is stale (python3 scripts/loc.py --write {f})")
                return 1
            print(f"{f}: the line-count table is current")
            return 0
        f.write_text(new)
        return 0
    if argv:
        print(__doc__.strip().splitlines()[-3:], file=sys.stderr)
        return 2
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
