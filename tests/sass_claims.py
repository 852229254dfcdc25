#!/usr/bin/env python3
"""sass_claims.py HANDOUT BINARY [--tools DIR]: a handout's table "what the SASS shows" holds for the
built program. Each backticked pattern in the table's first column (`…` stands for any text, and
`A` / `B` are two patterns) must appear in an instruction of the program's sm_90a SASS; a row
"stack, local memory, spills | none" means no kernel of the program has a stack frame or local
memory, and none loads or stores local memory (LDL, STL). Exit 0 when every claim holds, 1 when
one does not (each named), 77 when this machine cannot look: no cuobjdump (the CUDA toolkit's, in
DIR or on PATH, or PyPI's nvidia-cuda-cuobjdump with nvidia-cuda-nvdisasm) or no sm_90a code in the
build."""
import argparse
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TABLE_HEAD = "what the SASS shows"
NO_LOCAL_ROW = "stack, local memory, spills"


def find_cuobjdump(tools_dir):
    """The toolkit's cuobjdump beside nvcc, else one on PATH, else the one PyPI's package installs."""
    if tools_dir and (Path(tools_dir) / "cuobjdump").is_file():
        return str(Path(tools_dir) / "cuobjdump")
    if shutil.which("cuobjdump"):
        return shutil.which("cuobjdump")
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(root, "*", "bin", "cuobjdump")))
        if found:
            return found[-1]
    return None


def table_rows(handout):
    """The (first cell, second cell) rows of the handout's SASS table."""
    rows, inside = [], False
    for line in Path(handout).read_text().splitlines():
        if line.startswith("|") and TABLE_HEAD in line:
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not set(line) <= set("|-: "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append((cells[0], cells[1] if len(cells) > 1 else ""))
    return rows


def pattern_regex(pattern):
    """A handout pattern as a regex over one SASS instruction: `…` (and the spaces around it) is any text."""
    return re.compile(".*?".join(re.escape(part) for part in re.split(r"\s*…\s*", pattern)))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("handout")
    parser.add_argument("binary")
    parser.add_argument("--tools", help="the CUDA toolkit's bin/ folder")
    a = parser.parse_args()
    handout, binary = a.handout, a.binary
    rows = table_rows(handout)
    if not rows:
        print(f"FAIL: {handout} has no table headed '{TABLE_HEAD}'")
        return 1
    cuobjdump = find_cuobjdump(a.tools)
    if not cuobjdump:
        print("skipped: no cuobjdump here (the CUDA toolkit's, or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
        return 77
    # cuobjdump -sass runs nvdisasm, which PyPI's packages put beside it
    env = dict(os.environ, PATH=os.path.dirname(cuobjdump) + os.pathsep + os.environ.get("PATH", ""))
    sass = subprocess.run([cuobjdump, "-arch", "sm_90a", "-sass", binary], capture_output=True, text=True, env=env)
    usage = subprocess.run([cuobjdump, "-arch", "sm_90a", "-res-usage", binary], capture_output=True, text=True, env=env)
    if sass.returncode != 0 or usage.returncode != 0:
        error = (sass.stderr.strip() or usage.stderr.strip() or "no message").splitlines()[0]
        print(f"skipped: {cuobjdump} could not read {binary}: {error}")
        return 77
    instructions = [line.split("*/", 1)[1].split(";")[0].strip() for line in sass.stdout.splitlines()
                    if re.match(r"\s*/\*[0-9a-f]+\*/", line)]
    if not instructions:
        print(f"skipped: no sm_90a code in {binary} (built for other GPUs)")
        return 77

    failures, checked = [], 0
    for first, second in rows:
        if first.startswith(NO_LOCAL_ROW):
            if not second.startswith("none"):
                continue
            checked += 1
            frames = re.findall(r"Function ([^\s:]+):\s+REG:\d+ STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", usage.stdout)
            if not frames:
                failures.append("cuobjdump -res-usage listed no kernel")
            for name, stack, local in frames:
                if stack != "0" or local != "0":
                    failures.append(f"{name}: STACK {stack}, LOCAL {local} bytes (the handout says none)")
            spills = [i for i in instructions if re.match(r"(@!?U?P\w+ )?(LDL|STL)\b", i)]
            if spills:
                failures.append(f"{len(spills)} local-memory instructions, e.g. `{spills[0]}` (the handout says none)")
            continue
        for pattern in re.findall(r"`([^`]+)`", first):
            checked += 1
            regex = pattern_regex(pattern)
            if not any(regex.search(i) for i in instructions):
                failures.append(f"`{pattern}` is in no instruction of the sm_90a SASS")
    for f in failures:
        print(f"FAIL: {Path(handout).name}: {f}")
    if failures:
        return 1
    print(f"all {checked} SASS claims of {Path(handout).name} hold in {Path(binary).name} "
          f"({len(instructions)} sm_90a instructions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
