#!/usr/bin/env python3
"""test_release.py: `scripts/lab release DIR` writes a student tree with no answer in it.

Writes a release into a temporary folder and checks that it has no solutions/ and no instructor key
(ch12/key/), and that no exercise region of solutions/ appears in any of its files: the text
between a `BEGIN EXERCISE` and its `END EXERCISE` (`//` or `#` comments), minus the comment lines
that open it (the hint, which the stub keeps) and the STUB lines, whitespace-normalised. Regions of
fewer than 2 lines or 40 characters are too short to tell an answer from ordinary code and are left
out. The prose (Markdown: handouts, hints) is held to more: no single answer line of 25 characters
or more, so that a hint gives the formula and the code's shape, never the code. The driver's
scripts (scripts/, which handle the solutions: the grading example plants bugs in them) are held
to more still: no answer line of 12 characters or more, as no answer line has a place in them.
Each answer found is named by file and region.
Then configures the release with CMake (no build), which fails when a target of the tests names
a file of solutions/ (test_release_suite.py runs the release's own tests). Prints "ok: ..." and
exits 0, else one FAIL line per finding and exits 1; exits 77 (skipped) in a tree whose labs/
hold someone's edits, where there is no release to make.
"""
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^\s*(//|#) BEGIN EXERCISE ([\w-]+):")
END = re.compile(r"^\s*(//|#) END EXERCISE\s*$")
STUB = re.compile(r"^\s*(//|#) STUB: ")
COMMENT = re.compile(r"^\s*(//|#)")
MIN_LINES, MIN_CHARS = 2, 40
MIN_LINE_CHARS = 25  # one answer line this long, in a Markdown file, is a copy of the answer
MIN_SCRIPT_CHARS = 12  # in scripts/ (e.g. `m = team.max(m);` as a planted bug's anchor)


def normalise(text):
    return " ".join(text.split())


def exercise_regions(path):
    """(ident, first line number, parts) of each exercise region of a solution file; a part is a
    run of (line number, answer line) between its STUB lines, the opening hint comments left out."""
    out, parts, start, ident, leading = [], None, 0, "", False
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = BEGIN.match(line)
        if m:
            parts, start, ident, leading = [[]], n, m.group(2), True
        elif parts is not None and END.match(line):
            out.append((ident, start, parts))
            parts = None
        elif parts is not None and leading and COMMENT.match(line):
            continue  # the comment lines that open a region are its hint, kept in the stub
        elif parts is not None:
            leading = False
            if STUB.match(line):
                parts.append([])
            else:
                parts[-1].append((n, line))
    return out


def answers(path):
    """(label, normalised answer text) of each exercise region of a solution file: the runs of
    answer lines between its STUB lines, each long enough to be told from ordinary code."""
    out = []
    for ident, start, parts in exercise_regions(path):
        for part, numbered in enumerate(parts):
            lines = [l for _, l in numbered if l.strip()]
            text = normalise("\n".join(lines))
            if len(lines) >= MIN_LINES and len(text.replace(" ", "")) >= MIN_CHARS:
                label = f"{path.relative_to(ROOT)}:{start} exercise {ident}" + (f" (part {part + 1})" if len(parts) > 1 else "")
                out.append((label, text))
    return out


def answer_lines(path, min_chars=MIN_LINE_CHARS):
    """(label, normalised line) of every answer line of a solution file's exercise regions that is
    long enough to be told from ordinary prose (min_chars, spaces not counted)."""
    return [(f"{path.relative_to(ROOT)}:{n} exercise {ident}", normalise(line))
            for ident, _, parts in exercise_regions(path) for numbered in parts for n, line in numbered
            if not COMMENT.match(line) and len(normalise(line).replace(" ", "")) >= min_chars]


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")


def broken_links(rel):
    """Relative Markdown links of the release that lead nowhere in it (a link to a file the
    release leaves out, such as ch12/INSTRUCTORS.md, is a dead end for a student)."""
    out = []
    for md in rel.rglob("*.md"):
        for target, _ in LINK.findall(md.read_text(errors="replace")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (md.parent / target).exists():
                out.append(f"{md.relative_to(rel)} links to {target}, which the release does not hold")
    return out


def configure_problems(rel):
    """The release must configure: a CMake target or test that names a file of solutions/ without
    `if(EXISTS ...)` breaks every student's first build. Configure only (seconds); a configure that
    cannot run here for other reasons (no CMake, no libraries) is not this test's finding."""
    cmake = shutil.which("cmake")
    if not cmake:
        return []
    prefix = [f"-DCMAKE_PREFIX_PATH={ROOT / '.deps'}"] if (ROOT / ".deps").is_dir() else []
    r = subprocess.run([cmake, "-S", str(rel), "-B", str(rel / "build"), "-DLAB_CUDA_ARCHITECTURES=90", *prefix],
                       capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    missing = sorted(set(re.findall(r"Cannot find source file:\s*(\S+)", out)))
    if missing:
        return [f"the release does not configure: CMake cannot find {', '.join(missing)}"]
    if r.returncode != 0 and "Generate step failed" in out:
        return ["the release does not configure: " + " ".join(out.split())[-300:]]
    return []


def main():
    sys.path.insert(0, str(ROOT / "scripts"))
    from labcli.common import BUILD
    from labcli.student import lab_states
    work = lab_states(ROOT, BUILD)[1]
    if work:  # a student's tree: the release is made from the generated stubs, not from their work
        print(f"SKIP: labs/ holds edits ({', '.join(work)}): a release is made from the generated stubs")
        return 77
    regions = [r for f in sorted((ROOT / "solutions").glob("[0-9][0-9]_*")) for r in answers(f)]
    lines = [r for f in sorted((ROOT / "solutions").glob("[0-9][0-9]_*")) for r in answer_lines(f)]
    script_lines = [r for f in sorted((ROOT / "solutions").glob("[0-9][0-9]_*"))
                    for r in answer_lines(f, MIN_SCRIPT_CHARS)]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        rel = Path(tmp) / "release"
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab"), "release", str(rel)],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(f"FAIL: scripts/lab release exited {r.returncode}: {(r.stdout + r.stderr).strip()[-500:]}")
            return 1
        said = r.stdout + r.stderr  # what it says it left out: paths and patterns, as typed
        if "tests/wrong_*, grading-example/)" not in said:
            problems.append(f"the release's summary does not name tests/wrong_* and grading-example/: {said.strip()[-300:]}")
        for banned in ("solutions", "ch12/key", "ch12/INSTRUCTORS.md", "scripts/figures"):
            if (rel / banned).exists():
                problems.append(f"the release holds {banned}")
        problems += [f"the release holds {f.relative_to(rel)}" for f in rel.rglob("grading-example")]
        problems += [f"the release holds {f.relative_to(rel)} (a planted wrong answer, beside the right line)"
                     for f in (rel / "tests").glob("wrong_*")]
        problems += broken_links(rel)
        files = [f for f in rel.rglob("*") if f.is_file()]
        for f in files:
            try:
                text = normalise(f.read_text())
            except (UnicodeDecodeError, OSError):
                continue  # (a binary file: a figure)
            for label, answer in regions:
                if answer in text:
                    problems.append(f"{f.relative_to(rel)} holds the answer of {label}: {answer[:100]}...")
            if f.suffix == ".md":
                for label, line in lines:
                    if line in text:
                        problems.append(f"{f.relative_to(rel)} holds an answer line of {label}: {line[:100]}")
            if f.relative_to(rel).parts[0] == "scripts":
                for label, line in script_lines:
                    if line in text:
                        problems.append(f"{f.relative_to(rel)} holds an answer line of {label}: {line[:100]}")
        problems += configure_problems(rel)
    for p in problems:
        print("FAIL:", p)
    if not regions:
        print("FAIL: no exercise region found in solutions/ (nothing was checked)")
        return 1
    print(f"ok: {len(regions)} exercise regions, none in the {len(files)} files of the release"
          if not problems else f"{len(problems)} problem(s) in the release")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
