#!/usr/bin/env python3
"""test_examples.py: every example command runs, so that none can go stale.

The examples are every line of a ```bash block of README.md and ch12/*.md (a trailing `\\`
joins lines; `# comments` are dropped), and every line of the "Examples:" block of `scripts/lab
--help` and of each program's --help. Each runs on this machine (no GPU needed), from a scratch
copy of the tree (so an example that writes files leaves the tree as it is), with the build in
$LAB_BUILD_DIR (default build/) and nothing rebuilt.

The rule, simple enough to fail:
  - never exit 2 (a stale option or argument), never a Python traceback, never a crash (signal);
  - `build/bin/...` lines get --cpu (the CPU model; a GPU is not assumed; not with --simulate,
    which runs on the host anyway) and must exit 0, or 1 where they run a student's stub
    (build/bin/lab_*, python3 labs/...) or a --bug (a pitfall the check catches); a Python
    section's program (python3 solutions/NN_name.py, labs/NN_name.py) is held to the same rule;
  - a program (or a check) may exit 77 only by saying its run is "not checked here" because it
    "needs a GPU" (a GPU-only exercise), or, for a --bug, because the student's code "has no branch
    for it" (09's optional pitfall branches, absent from the stub);
  - `scripts/lab run|check` of a student's lab (no --solution) may exit 1: an unwritten stub fails;
  - GPU-only driver commands (bench, gpu-check, ab, compare, grading-example) may exit 77;
  - everything else must exit 0.
Not run: `scripts/lab test` (the command that runs this test) and machine setup (cmake, ctest,
git, cd, pip, apt-get, sudo), which the README's two commands do themselves; in a student release,
the examples that run a solution.

A student release has no solutions, so a handout (ch12/*.md but INSTRUCTORS.md, and
ch12/hints/*.md) must not tell a student to run one. The marker rule (solution_lines_unmarked):
  - a line of a fenced code block (any language) that names a solution program -- a word
    build/bin/NN_name (not lab_), a word solutions/..., or `scripts/lab ... --solution` -- must
    say "instructor's tree" on that line (a `# instructor's tree` comment);
  - an inline `code` span in prose that is such a command (a solution program and at least one
    more word, e.g. `build/bin/06_paged --simulate`) must have "instructor's tree" in its
    paragraph (the text between blank lines). A bare name (`solutions/11_backward.cu`) is a file,
    not a command, and is not checked.
The student's own build (build/bin/lab_NN_name, labs/NN_name.py) needs no marker.

Prints "ok: N examples" and exits 0, else one FAIL line per example and exits 1; an unmarked
solution line is one FAIL line too. `python3 -m unittest test_examples` runs the marker rule alone.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("LAB_BUILD_DIR", ROOT / "build")).resolve()
GPU_ONLY = {"bench", "gpu-check", "ab", "compare", "grading-example"}
NOT_RUN = ("cmake", "ctest", "git", "cd", "pip", "pip3", "apt-get", "sudo", "export")
TIMEOUT = float(os.environ.get("LAB_EXAMPLE_TIMEOUT", 600))


def bash_blocks(path):
    """(where, command) of each line of each ```bash block."""
    out, inside, pending = [], False, ""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith("```"):
            inside = line.strip() in ("```bash", "```sh", "```shell")
            continue
        if not inside:
            continue
        line = pending + line.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        line = re.sub(r"(^|\s)#.*$", "", line).strip()  # a comment (a # inside quotes is not one here)
        if line.startswith("$ "):
            line = line[2:]
        if line:
            out.append((f"{path.relative_to(ROOT)}:{n}", line))
    return out


def help_examples(cmd, where):
    """The lines of the "Examples:" block of a --help text (indented lines after it)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    lines, out, inside = (r.stdout + r.stderr).splitlines(), [], False
    for line in lines:
        if line.strip().lower().startswith("examples:"):
            inside = True
            continue
        if inside:
            if not line.startswith(" ") or not line.strip():
                inside = bool(line.strip() == "" and out == [])
                if not line.strip():
                    continue
                break
            out.append((where, re.split(r"\s{2,}#", line.strip())[0].strip()))
    return out


def examples():
    found = bash_blocks(ROOT / "README.md") if (ROOT / "README.md").exists() else []
    for md in sorted((ROOT / "ch12").glob("*.md")):
        found += bash_blocks(md)
    found += help_examples([sys.executable, "scripts/lab", "--help"], "scripts/lab --help")
    for exe in sorted((BUILD / "bin").glob("[0-9][0-9]_*")):
        found += help_examples([exe, "--help"], f"{exe.name} --help")
    return found


MARKER = "instructor's tree"
SOLUTION_WORD = re.compile(r"^(\S*/)?(build/bin/\d\d_\w+|solutions/\S+)$")


def handouts():
    """The handouts a student follows (ch12/INSTRUCTORS.md is the instructor's alone)."""
    return [p for p in sorted((ROOT / "ch12").glob("*.md")) + sorted((ROOT / "ch12" / "hints").glob("*.md"))
            if p.name != "INSTRUCTORS.md"]


def runs_solution(text):
    """Does this command text run a solution program (not a student's build)?"""
    w = [x.strip("`'\"(),;:") for x in words_of(text)]
    return any(SOLUTION_WORD.match(x) for x in w) or (
        any(x.endswith("scripts/lab") for x in w) and bool({"--solution", "--solution-too"} & set(w)))


def solution_lines_unmarked(text, name="handout"):
    """The marker rule (see the top of this file): [(where, line)] for each unmarked solution line."""
    out, fence, para, para_start = [], None, [], 0
    lines = text.splitlines()

    def end_paragraph():
        joined = " ".join(x.strip() for _, x in para)
        if MARKER not in joined:
            for span in re.findall(r"`([^`]+)`", joined):
                if len(span.split()) > 1 and runs_solution(span):
                    out.append((f"{name}:{para_start}", span))
        para.clear()

    for n, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            end_paragraph()
            fence = None if fence else line.strip()
            continue
        if fence:
            if runs_solution(line) and MARKER not in line:
                out.append((f"{name}:{n}", line.strip()))
            continue
        if not line.strip():
            end_paragraph()
            continue
        if not para:
            para_start = n
        para.append((n, line))
    end_paragraph()
    return out


def unmarked_in_handouts():
    found = []
    for md in handouts():
        found += solution_lines_unmarked(md.read_text(), str(md.relative_to(ROOT)))
    return found


class SolutionLinesAreMarked(unittest.TestCase):
    """A handout line that runs a solution says it is the instructor's (the rule at the top)."""

    def test_rule_catches_an_unmarked_line(self):
        text = "Run it:\n\n```bash\nbuild/bin/02_v1_tile --cpu --t 65\n```\n"
        self.assertEqual(len(solution_lines_unmarked(text)), 1)
        self.assertEqual(solution_lines_unmarked(text.replace("65", "65   # instructor's tree")), [])
        self.assertEqual(solution_lines_unmarked(text.replace("02_v1", "lab_02_v1")), [])
        prose = "Try `python3 solutions/10_flex.py --cpu` too.\n"
        self.assertEqual(len(solution_lines_unmarked(prose)), 1)
        self.assertEqual(solution_lines_unmarked("In the instructor's tree, " + prose), [])
        self.assertEqual(solution_lines_unmarked("Details in `solutions/11_backward.cu`.\n"), [])
        self.assertEqual(len(solution_lines_unmarked("```text\nscripts/lab check 11 --solution\n```\n")), 1)

    def test_handouts(self):
        bad = unmarked_in_handouts()
        self.assertEqual(bad, [], "a handout runs a solution without saying it is the instructor's tree: "
                         + "; ".join(f"{w}: {line}" for w, line in bad))


def words_of(line):
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def expected_codes(line):
    """The exit codes the rule allows this example."""
    w = words_of(line)
    allowed = {0}
    prog = next((x for x in w if x.startswith("build/bin/") or x.endswith("scripts/lab")
                 or re.match(r"(solutions|labs)/\d\d_\w+\.py$", x)), "")
    if prog.startswith("build/bin/"):
        if Path(prog).name.startswith("lab_") or "--bug" in w:
            allowed.add(1)
    elif prog.endswith(".py"):
        if prog.startswith("labs/") or "--bug" in w:
            allowed.add(1)
    elif prog.endswith("scripts/lab"):
        cmd = w[w.index(prog) + 1] if w.index(prog) + 1 < len(w) else ""
        if cmd in GPU_ONLY:
            allowed.add(77)
        if cmd in ("run", "check") and "--solution" not in w:
            allowed.add(1)
        if "--bug" in w:
            allowed.add(1)
    return allowed


def prepare(line):
    """The line as run here: --cpu for a program (before any `|`, `>` or `&&`)."""
    w = words_of(line)
    if any(x.startswith("build/bin/") for x in w) and not {"--cpu", "--help", "--simulate"} & set(w):
        m = re.search(r"\s(\||&&|;|>)", line)
        return line[:m.start()] + " --cpu" + line[m.start():] if m else line + " --cpu"
    return line


def skipped(line):
    w = words_of(line)
    if not (ROOT / "solutions").is_dir():  # a student release: there is no solution to run
        if {"--solution", "--solution-too"} & set(w) or any(re.match(r"(build/bin/\d\d_|solutions/)", x) for x in w) or \
                re.search(r"scripts/lab (bench|gpu-check|grade|grading-example)\b", line):
            return True
    return not w or w[0] in NOT_RUN or "scripts/lab test" in line


def main():
    todo = [(where, line) for where, line in examples() if not skipped(line)]
    problems = [f"{where}: `{line}`: runs a solution but does not say \"{MARKER}\" (a student release has "
                f"none: run build/bin/lab_NN_name or labs/NN_name.py)" for where, line in unmarked_in_handouts()]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True).stdout
        names = [f for f in files.split("\0") if f] or [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                                                       if p.is_file() and "build" not in p.parts]
        for f in names:
            if (ROOT / f).is_file():
                (tree / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / f, tree / f)
        (tree / "build").symlink_to(BUILD)
        env = dict(os.environ, LAB_NO_BUILD="1", LAB_BUILD_DIR=str(BUILD), PYTHONDONTWRITEBYTECODE="1")
        for where, line in todo:
            run_line = prepare(line)
            try:
                r = subprocess.run(["bash", "-c", run_line], cwd=tree, capture_output=True, text=True,
                                   timeout=TIMEOUT, env=env)
                code, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                code, out = "timeout", ""
            allowed = expected_codes(line)
            if "not checked here" in out and ("needs a GPU" in out or  # a program's line or check's summary
                                              ("--bug" in line and "has no branch for it" in out)):
                allowed = allowed | {77}
            bad = []
            if code not in allowed:
                bad.append(f"exit {code} (allowed {sorted(allowed)})")
            if "Traceback (most recent call last)" in out:
                bad.append("a Python traceback")
            if isinstance(code, int) and code >= 128:
                bad.append("a crash")
            status = "FAIL" if bad else "ok  "
            print(f"{status} [{code}] {where}: {run_line}")
            if bad:
                problems.append(f"{where}: `{run_line}`: {', '.join(bad)}: " + " | ".join(out.strip().splitlines()[-4:]))
    for p in problems:
        print("FAIL:", p)
    print(f"ok: {len(todo)} examples" if not problems else f"{len(problems)} of {len(todo)} examples failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
