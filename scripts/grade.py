"""The instructor's grader: `scripts/lab grade SUBMISSION_DIR...`.

A submission is a folder holding a student's versions of labs/NN_<name>.cu (or .py for a Python
section; any subset; directly in the folder or in a labs/ folder inside it, or in the one folder
it wraps: submission_root). A path that does not exist, or a folder without any lab file, is
refused by `scripts/lab grade` (exit 2, nothing written) unless --allow-empty; a file a learning
platform renamed is graded as its lab (renamed_section), one that only looks like a lab is named
in the report. For each submission the grader copies those files into its own tree under --out
(the student's code never touches the repository), builds them against the repository's harness,
and for each section:

  compile      a file that does not compile (a Python file: does not parse) scores 0, with the
               compiler's first errors quoted; so does one the compiler read a file for from
               outside its grade folder and the lab's headers (its depfile; a failed build's
               messages quote no line of such a file); a build step is stopped after BUILD_TIMEOUT
               seconds, and runs sandboxed where the cases do
  stub check   a file identical to a stub (today's, or one committed to labs/ before) is flagged
               "unmodified stub" (no GPU needed)
  correctness  the section's case list (tests/cases/NN_name.json, plus --cases hidden cases), each
               run with a time limit (and sandboxed where bubblewrap runs: see sandbox_command);
               a case scores its weight when the run exits 0 AND leaves a result record saying
               the check passed (so exiting early earns nothing)
  unit tests   where the case file names unit_tests (05, 06, 12): the exercises' unit-test program,
               built from the student's file and run on the CPU (GPU or not), is one more case
               weighing UNIT_TESTS_SHARE of the section
  performance  only when correctness is 100%: the student's median time against the reference
               solution's on the section's grade_perf shape, measured in the same run:
               ratio = solution time / student time;  >= 0.9: +10 points;  >= 0.5: +5;  else +0

Section score = correctness (0-100) + bonus; the submission's total is the mean over the graded
sections (--sections, default: every section handed in by the class, a missing one counting 0,
one handed in only as untouched stubs not counting; where --out holds grades this run does not
replace, as when a late submission is graded alone, the sections those grades were graded over:
class_sections).
Without a GPU (triage) no case but the unit tests runs: every compiled section reads "not run (no
GPU)", never a number (an untouched stub: 0). With --cpu (a provisional grade on the CPU model) the
cases the CPU model can run run with --cpu, as `scripts/lab check` runs them without a GPU: the
student's exercise code inside the section's C++ model (a Python section: their code on the CPU),
not their kernel; scored on correctness alone, the report labelled as such (CPU_MODEL).
Outputs per submission grade.json and grade.md under --out/<name>/, and class_summary.csv, rebuilt
from every grade under --out. The harness (common/) is built once, in --out/.harness/, and every
submission's build links it. With --resume, a grade whose grading finished (COMPLETE) under
the same conditions (the grader's files among them: grading_files), of lab files unchanged since
(their sha256 in grade.json), is kept (resume_reason).
"""
import collections
import csv
import concurrent.futures
import difflib
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from labcli.common import HangWatch, included_labs, start_stoppable, stopped_on_interrupt
from make_labs import STUB_COPIES, STUB_DIGESTS

BONUS_TIERS = [(0.9, 10), (0.5, 5)]  # (minimum speed ratio vs the solution, bonus points)
LAB_SUFFIXES = (".cu", ".py")
NOT_RUN = "not run (no GPU)"
MARKER = ".lab-grade"          # in every folder the grader writes: only such a folder is ever replaced
HARNESS = ".harness"           # --out/.harness: the harness, built once for every submission
# --out/.builds/<slug>: where a submission is compiled when its grade folder's path holds a character
# the build tools mishandle (Ninja reads "o'brien" in a depfile as two paths: no list of the files
# the compiler read); its programs are moved into the grade folder once built.
BUILDS = ".builds"
# A grade folder's mark that its grade.json is a finished grading's, holding that file's sha256:
# written last by run() and removed first by build(), whose kept reports (REPORTS) are the last
# grade's while the new one is made. Only a grade so marked is ever kept by --resume.
COMPLETE = ".lab-grade-complete"
# The class summary's word for a grade whose last grading was cut short (Ctrl-C): the row is the
# grading before it, whatever the files are now.
UNFINISHED = "unfinished: its last grading was cut short, this row is the one before (--resume grades it again)"
SUMMARY = "class_summary.csv"
SUMMARY_HEADER = "submission,total,gpu,"  # how its first line begins: a file of that name without it is not the grader's
NESTED_DEPTH, NESTED_FILES = 3, 2000  # how deep, and through how many files, to look for nested labs
# A case this GPU cannot run for the solution either (a Hopper-only variant on an A100, more shared
# memory per block than it grants): out of the section's total, for every student alike. A case
# only the student's program refuses ("cannot run here", exit 77) is a failed case.
NOT_ON_THIS_GPU = "not on this GPU"
# The exercises' unit tests of a section that has them (its case file's unit_tests: 05, 06, 12)
# count as one case weighing this share of the section's correctness: they test what its kernels
# may never run (06's allocator), and a case of weight 1 among 92 would be worth nothing.
UNIT_TESTS, UNIT_TESTS_SHARE = "the exercises' unit tests", 0.25
BUILD_TIMEOUT = 600             # seconds one build step may take (an #include "/dev/zero" never ends)
# --cpu: a provisional grade on the CPU model, for a machine without a GPU (or to keep one free).
# Each case that `scripts/lab check` runs without a GPU runs with --cpu: the student's exercise code
# inside the section's C++ model of the algorithm (a Python section: their code on the CPU), never
# their kernel, so a race or any bug only a GPU shows is not seen; nothing is timed (no bonus).
CPU_MODEL = "none (CPU model)"      # the report's gpu field and the class summary's gpu column
CPU_GRADED = "graded on the CPU model"  # a section's status: its score is provisional
CPU_NOT_CHECKED = "not checkable on the CPU"  # a section of which the CPU model checks nothing (why: cpu_note)
# A run whose exercise part only a GPU runs (its program says "not checked here: ...", exit 77;
# `scripts/lab check` counts it "not checked here"), having checked nothing of the student's output
# (04's mma, 08's protocol past ring_slot()): neither a pass nor a failure.
GPU_ONLY_PART = "GPU-only part not checked"
UNCOUNTED = (NOT_ON_THIS_GPU, GPU_ONLY_PART)  # case outcomes left out of a section's total
# A run whose CPU model checked O against fp64 with the student's host-side exercises and passed
# ("CPU part passed: ...", then "not checked here: ...", exit 77: 07's and 12's student builds):
# counted as passed, as the same run failing counts as failed.
CPU_PART_PASSED = "passed as far as the CPU model goes"
PASSED = ("pass", CPU_PART_PASSED)
# A section whose runs of HUNG_CASES cases in a row all time out hangs everywhere (a loop that never
# ends): its other runs are not started, and fail. Each would cost the whole --timeout, the class
# waiting behind it (a hang in every run of 02: 22 runs x 120 s).
HUNG_CASES = 3
AFTER_HANGS = "not run (hung before)"
HIDDEN = "hidden: "  # how a --cases case's name begins (cases.merge_hidden)
# A section whose file compiled but whose build the grader could not check (the compiler's list of the
# files it read is missing): the grading machine's problem, not the student's; no score until regraded.
GRADER_PROBLEM = "not graded (grader problem)"
EMPTY_FILE = "empty file"  # a handed-in lab file of whitespace alone: a section's status, scored 0


# What `scripts/lab release` puts in labs/ beside the stubs: a whole release handed in holds them,
# and they are the course's, not the student's.
RELEASE_FILES = (STUB_COPIES, STUB_DIGESTS)


def scan_submission(folder, known_sections, is_stub=None):
    """{section: path} of the lab files in a submission, and the names of the files it ignores. A
    file a learning platform or a browser renamed (renamed_section) stands for its section where the
    submission has no properly named file for it and no other such file. Where a section has several
    files and all but one are untouched stubs (is_stub(path, section)), the one that is not is
    graded: a student who hands in the stub beside their work did the work. A macOS `._*` file (the
    metadata a Mac's archiver adds beside each file) is no file of the student's: not listed; nor
    is what a release keeps beside the labs (RELEASE_FILES)."""
    folder = Path(folder)
    roots = [folder / "labs", folder] if (folder / "labs").is_dir() else [folder]
    found, ignored, renamed = {}, [], collections.defaultdict(list)
    shown = lambda f, root: f.name if root == folder else f"{root.name}/{f.name}"
    for root in roots:
        for f in sorted(root.iterdir()):
            if f.name.startswith("._") or f.name in RELEASE_FILES:
                continue
            if f.is_dir():
                if not (f.name == "labs" and root == folder):
                    ignored.append(f.name + "/" if root == folder else f"{root.name}/{f.name}/")
                continue
            stem = f.stem if f.suffix == lab_suffix(f.stem) else None
            if stem in known_sections and stem not in found and f.is_file():  # not a broken link
                found[stem] = f
            else:
                ignored.append(shown(f, root))
                s = renamed_section(f.name, known_sections) if f.is_file() else None
                if s:
                    renamed[s].append((f, ignored[-1]))
    for s, files in renamed.items():
        if s not in found and len(files) == 1:  # two candidates: which one is the student's is theirs to say
            found[s] = files[0][0]
            ignored.remove(files[0][1])
    if is_stub:
        for s, files in renamed.items():
            candidates = ([(found[s], shown(found[s], found[s].parent))] if s in found else []) + files
            work = [(f, name) for f, name in candidates if not is_stub(f, s)]
            if len(candidates) > 1 and len(work) == 1 and found.get(s) != work[0][0]:
                if s in found:
                    ignored.append(candidates[0][1])
                found[s] = work[0][0]
                ignored.remove(work[0][1])
    return found, ignored


def renamed_section(name, known_sections):
    """The section of a lab file as a learning platform or a browser renames it, else None: a name
    holding exactly one section's full stem, after nothing or a separator (Canvas and Moodle prefix
    the student: "larry_123456_01_naive.cu"), followed by its lab suffix, with at most a copy's
    number between them ("01_naive (1).cu", "01_naive-1.cu") and other suffixes after it
    ("01_naive.cu.txt"). Looser names ("naive2.cu", "Lab01.cu") are not guessed at."""
    low = name.lower()
    inside = [s for s in known_sections if s.lower() in low]
    if len(inside) != 1:
        return None
    s = inside[0]
    pattern = rf"(?:.*[ _.-])?{re.escape(s.lower())}(?: ?\(\d+\)|-\d+)?{re.escape(lab_suffix(s))}(?:\.[^.]+)*"
    return s if re.fullmatch(pattern, low) else None


def lab_suffix(section):
    """.py for a Python section (its solution is solutions/NN_name.py, its stub labs/NN_name.py), else .cu."""
    root = Path(__file__).resolve().parent.parent
    return ".py" if any((root / d / f"{section}.py").exists() for d in ("solutions", "labs")) else ".cu"


def lab_stem(name):
    """The stem of a file name that has a lab suffix somewhere, in any case ("01_naive.CU",
    "01_naive.cu.txt" -> "01_naive"), else None."""
    low = name.lower()
    for i, suffix in enumerate(Path(low).suffixes):
        if suffix in LAB_SUFFIXES:
            return name[:len(name) - len("".join(Path(low).suffixes[i:]))]
    return None


def name_tokens(stem, words=()):
    """(words, numbers, glued numbers) of a name, lower case, split as a section's name is: at '_',
    '-', '.', spaces and a change to upper case ("flashV1" -> flash, v1). A word that is none of
    `words` (the sections' own: v1, fp16) splits where letters meet digits too ("Lab01" -> lab, and
    01 among the glued numbers)."""
    tokens, numbers, glued = [], set(), set()
    for part in re.split(r"[\s_.-]+|(?<=[a-z])(?=[A-Z])", stem):
        part = part.lower()
        if part.isdigit():
            numbers.add(int(part))
        elif part in words:
            tokens.append(part)
        else:
            for t in re.findall(r"[a-z]+|\d+", part):
                if t.isdigit():
                    glued.add(int(t))
                else:
                    tokens.append(t)
    return tokens, numbers, glued


def guess_section(stem, known_sections):
    """The section a misnamed file most likely is: its leading number, else the section sharing the
    most words with it. A section's number counts as a word where it stands alone ("lab_02"), half
    where it is glued to letters ("Lab01", "hw2"); a digit of one of the sections' words is no number
    ("v1_tile" is 02's). None on a tie."""
    lead = re.match(r"\d+", stem)
    for s in known_sections:
        if lead and int(lead.group()) == int(s[:2]):
            return s
    words = {w for s in known_sections for w in s.lower().split("_")[1:]}
    tokens, numbers, glued = name_tokens(stem, words)
    scores = collections.Counter()
    for s in known_sections:
        parts = s.lower().split("_")
        n = int(parts[0])
        scores[s] = len(set(tokens) & set(parts[1:])) + (1 if n in numbers else 0.5 if n in glued else 0)
    best = scores.most_common(2)
    if not best or best[0][1] == 0 or (len(best) > 1 and best[1][1] == best[0][1]):
        return None
    return best[0][0]


def nested_labs(folder, known_sections, top):
    """Lab files (by their exact name) in the nested folders `top` of a submission, as paths
    relative to it: a submission handed in one folder too deep."""
    names = {f"{s}{lab_suffix(s)}" for s in known_sections}
    found, seen = [], 0
    for start in top:
        stack = [(Path(folder) / start, 1)]
        while stack and seen < NESTED_FILES:
            d, depth = stack.pop()
            try:
                entries = sorted(d.iterdir())
            except OSError:
                continue
            for f in entries:
                seen += 1
                if f.is_dir() and not f.is_symlink() and depth < NESTED_DEPTH and not f.name.startswith("."):
                    stack.append((f, depth + 1))
                elif f.is_file() and f.name in names:
                    found.append(f.relative_to(folder).as_posix())
    return sorted(found)


def misnamed(ignored, known_sections, found=None, folder=None, stubs=()):
    """One line for each ignored file that looks like a section's lab, e.g. "naive.cu: not a lab
    file; expected labs/01_naive.cu". found ({section: graded file, relative}): a second copy of a
    graded section is named as ignored (one of `stubs`, the ignored names that are untouched stubs,
    as such); two copies of a section, neither graded, are named as such; folder (the submission):
    lab files in a nested folder are pointed at."""
    found = found or {}
    copies = collections.defaultdict(list)  # the files named as a section's lab, none of them graded
    for name in ignored:
        s = renamed_section(Path(name).name, known_sections)
        if s and s not in found:
            copies[s].append(name)
    out = []
    for name in ignored:
        stem = lab_stem(Path(name).name)
        s = guess_section(stem, known_sections) if stem else None
        if s is None:
            continue
        if s in found:
            out.append(f"{name}: ignored{' (an untouched stub)' if name in stubs else ''}; {found[s]} is the {s} file graded")
        elif Path(name).name == f"{s}{lab_suffix(s)}":
            out.append(f"{name}: a folder, not a file" if name.endswith("/") else
                       f"{name}: not a regular file (a broken link?)")
        elif len(copies.get(s, [])) > 1 and name in copies[s]:
            out.append(f"{name}: not graded: {len(copies[s])} files could be labs/{s}{lab_suffix(s)} "
                       f"({', '.join(copies[s])}); hand in one")
        else:
            out.append(f"{name}: not a lab file; expected labs/{s}{lab_suffix(s)}")
    if folder is not None:
        for path in nested_labs(folder, known_sections, [n.rstrip("/") for n in ignored if n.endswith("/")]):
            s = Path(path).stem
            out.append(f"{path}: in a nested folder, not graded" +
                       (f"; {found[s]} is the {s} file graded" if s in found else f"; expected labs/{Path(path).name}"))
    return out


# What an archiver or a desktop adds beside a submission's folder: not the student's.
JUNK = ("__MACOSX", "Thumbs.db", "desktop.ini")


def submission_root(folder, known_sections):
    """The folder a submission is graded from: itself, or the folder it wraps, where its only entry
    (dotfiles and an archiver's or a desktop's files aside) is one folder, which holds labs/ or lab
    files, or wraps such a folder in turn. A zip of the folder zack/ unpacked into zack/ (as
    `unzip -d`) is zack/zack/labs/...: the student handed in the right files."""
    root = Path(folder)
    for _ in range(NESTED_DEPTH):
        try:
            entries = [f for f in root.iterdir() if not f.name.startswith(".") and f.name not in JUNK]
        except OSError:
            break
        if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink() or entries[0].name == "labs":
            break
        root = entries[0]
        if (root / "labs").is_dir() or scan_submission(root, known_sections)[0]:
            return root
    return Path(folder)


def submission_notes(folder, known_sections, is_stub=None):
    """(found, ignored, misnamed, notes) of a submission: its lab files, the files it ignores, the
    lines that name the misnamed or misplaced ones, and the lines that say how the others were
    found (a wrapper folder). is_stub(path, section): a section's untouched stub gives way to the
    student's own copy beside it (scan_submission)."""
    folder = Path(folder)
    root = submission_root(folder, known_sections)
    notes = [f"graded from the folder {root.relative_to(folder).as_posix()}/ inside it"] if root != folder else []
    found, ignored = scan_submission(root, known_sections, is_stub)
    shown = {s: f.relative_to(root).as_posix() for s, f in found.items()}
    notes += [f"graded {shown[s]} as labs/{s}{lab_suffix(s)}" for s, f in found.items() if f.name != f"{s}{lab_suffix(s)}"]
    stubs = set()
    if is_stub:
        for name in ignored:
            s = renamed_section(Path(name).name, known_sections)
            if s in found and (root / name).is_file() and is_stub(root / name, s):
                stubs.add(name)
    return found, ignored, misnamed(ignored, known_sections, shown, root, stubs), notes


def submission_folders(folder, known_sections):
    """The folders inside a folder that each look like a submission (hold lab files): a class's
    folder given as one submission (`submissions` for `submissions/*`)."""
    try:
        entries = sorted(f for f in Path(folder).iterdir() if f.is_dir() and not f.is_symlink()
                         and not f.name.startswith(".") and f.name not in JUNK + ("labs",) and not is_grade_folder(f))
    except OSError:
        return []
    return [f for f in entries if submission_notes(f, known_sections)[0]]


def section_takers(handed, graded, is_stub=lambda path, section: False):
    """One line per graded section saying how many of this run's submissions ({given path: its
    {section: file}}) handed it in (an untouched stub is not handed in), with their names where
    fewer than half did, e.g. "06_paged: handed in by 1 of 8 (frank); fewer than half the class".
    Where the grades already under --out fixed the sections (class_sections: a late submission
    graded alone), this run is no class to count: one line says whose sections they are instead."""
    if isinstance(graded, ClassSections) and graded.kept:
        return [graded.kept_line()]
    lines = []
    for s in graded:
        takers = [Path(given).name for given, found in handed.items() if s in found and not is_stub(found[s], s)]
        line = f"{s}: handed in by {len(takers)} of {len(handed)}"
        if 2 * len(takers) < len(handed):
            line += f" ({', '.join(takers)}); fewer than half the class" if takers else "; fewer than half the class"
        lines.append(line)
    return lines


def is_cpu_grade(report):
    """Whether a grade was made on the CPU model (--cpu): provisional, never a GPU's grade."""
    return report.get("gpu") == CPU_MODEL


def total_text(report):
    """The total as the console shows it."""
    if report["total"] is None:
        failed = [s[:2] for s in report["graded_sections"]
                  if (report["sections"].get(s) or {}).get("status") == GRADER_PROBLEM]
        if failed:
            return f"no total ({', '.join(failed)} {GRADER_PROBLEM}: regrade)"
        if is_cpu_grade(report):
            unchecked = [s[:2] for s in report["graded_sections"]
                         if (report["sections"].get(s) or {}).get("status") == CPU_NOT_CHECKED]
            return f"no total ({', '.join(unchecked)} {CPU_NOT_CHECKED})"
        return NOT_RUN
    return f"{report['total']:.1f}" + (" on the CPU model (provisional)" if is_cpu_grade(report) else "")


def is_triage(report):
    """Whether a grade ran no case (no GPU): its total says nothing of what to send back."""
    return report.get("gpu") is None and not any(sec.get("status") == "graded"
                                                 for sec in report.get("sections", {}).values())


def section_states(report):
    """Each graded section's state, short, as the class summary's NN_status names it, a compiled
    one "compiled", with its unit tests' verdict where they ran on the CPU: "01 compiled, 02 compile
    error, 06 compiled (unit tests: failed its checks), 09 unmodified stub"."""
    states = []
    for s in report.get("graded_sections", []):
        sec = report["sections"].get(s)
        state = section_state(sec)
        unit = [c["status"] for c in (sec or {}).get("cases", []) if c["case"] == UNIT_TESTS]
        states.append(f"{s[:2]} {'compiled' if state == NOT_RUN else state}" +
                      (f" (unit tests: {unit[0]})" if unit and sec["status"] == NOT_RUN else ""))
    return ", ".join(states) or "no lab file"


def outcome_text(report):
    """A grade as the console's class summary shows it: its total, or in triage (where every student
    who compiled reads "not run") each section's state; and the sections to review."""
    review = [s[:2] for s, _ in to_review(report)]
    return ((section_states(report) if is_triage(report) else total_text(report)) +
            (f"; FOR REVIEW: {', '.join(review)}" if review else ""))


def to_review(report):
    """[(section, why)] of a grade's graded sections whose file is for the instructor to read
    (review_reasons)."""
    return [(s, sec["review"]) for s in report.get("graded_sections", [])
            if (sec := report.get("sections", {}).get(s)) and sec.get("review")]


def review_line(reports):
    """One line naming the submissions whose files are to be read before their scores stand, else None."""
    names = [f"{r['submission']} ({', '.join(s[:2] for s, _ in to_review(r))})" for r in reports if to_review(r)]
    return (f"{len(names)} submission(s) to review (code that could forge its self-check; the review column of the "
            f"class summary says why): {', '.join(names)}") if names else None


def python_syntax(path):
    """(ok, log) of a Python lab: a file that does not parse is that section's compile error. The
    message quotes the student's own line: traceback's formatter would read labs/NN_name.py from
    the grader's working folder, the repository's stub, and quote its line instead."""
    source = Path(path).read_bytes()
    name = f"labs/{Path(path).name}"
    try:
        compile(source, name, "exec")
    except SyntaxError as e:
        lines = source.decode(errors="replace").splitlines()
        where = f'File "{name}", line {e.lineno}' if e.lineno else f'File "{name}"'
        text = lines[e.lineno - 1] if e.lineno and 0 < e.lineno <= len(lines) else ""
        shown = text.strip()[:240]
        out = [where]
        if shown:
            out.append("    " + shown)
            if e.offset and 0 < e.offset <= len(text) + 1:  # the caret under the column, past the indent
                column = e.offset - 1 - (len(text) - len(text.lstrip()))
                if 0 <= column <= len(shown):
                    out.append("    " + " " * column + "^")
        out.append(f"{type(e).__name__}: {e.msg}")
        return False, "\n".join(out) + "\n"
    except ValueError as e:  # a null byte (before Python 3.12)
        return False, f"{name}: {e}\n"
    return True, ""


def refused_file(path, folder):
    """Why a submission's lab file is not compiled (or parsed) at all, in a few words; None where it
    is. A link is never followed: one to the instructor's solutions/ would be copied and graded as
    the student's file. Nor is a file reached through a linked folder (labs/ -> elsewhere)."""
    path, folder = Path(path), Path(folder).resolve()
    if path.is_symlink():
        return "a symbolic link, not a file: not followed (hand in the file itself)"
    if folder not in path.resolve().parents:
        return "outside the submission (its folder is a link): not followed (hand in the file itself)"
    if not normalised(path.read_bytes()).strip():
        return EMPTY_FILE
    return None


def outside_include(path, root):
    """The first file a lab file #includes from outside `root` (its grade folder): another student's
    graded copy, a file of the grading machine; None if it includes none."""
    for name in re.findall(r'^\s*#\s*include\s*["<]([^">]+)[">]', Path(path).read_text(errors="replace"), re.M):
        p = (Path(path).parent / name).resolve()
        if p.exists() and Path(root).resolve() not in p.parents:
            return name
    return None


def missing_lab(path, known_sections):
    """The section whose lab file a lab file #includes by name ("05_decode.cu", as 06 does) where that
    file is not beside it (not handed in), else None."""
    for stem in included_labs(Path(path).read_text(errors="replace")):
        if stem in known_sections and not (Path(path).parent / f"{stem}.cu").is_file():
            return stem
    return None


def section_named(path, known_sections):
    """The section a lab file's own name line names (C++: `s.name = "01_naive"`, Python:
    `name="09_triton"`; the last one: the section's main), where it is a known section; else None."""
    names = re.findall(r"""\bname\s*=\s*["'](\d\d_\w+)["']""", normalised(Path(path).read_bytes()).decode(errors="replace"))
    return names[-1] if names and names[-1] in known_sections else None


def holds_text(file_name, other):
    """Why a lab file that holds another section's code is not built."""
    return f"{file_name} holds section {other}'s code, by its name line: hand in the {Path(file_name).stem} file"


def needs_text(section, lab):
    """Why a section that includes another section's lab file is not built without it."""
    return f"{section} includes labs/{lab}.cu, which is not in the submission: hand it in with {section[:2]}"


def build_safe(path):
    """Whether the build tools (CMake, Ninja, nvcc's depfiles) handle a path as it is: letters,
    digits, spaces, non-ASCII letters and /._+,@=~-; a quote, '$', '#', ':' and the like are not."""
    return re.fullmatch(r"[\w /.+,@=~\udc80-\udcff-]*", str(path)) is not None  # (a name's bytes that are not UTF-8 too)


def build_slug(name):
    """A grade folder's name as a build-safe folder name, distinct for distinct names ("o'brien" ->
    "o_brien-1a2b3c4d")."""
    digest = hashlib.sha256(name.encode(errors="surrogateescape")).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:40] + "-" + digest


def read_dependencies(build_dir, section):
    """The files the compiler read to build a section's lab, from the depfile it wrote beside the
    object (nvcc -MD, device passes included): Ninja keeps it in its log (`ninja -t deps`), CMake's
    Makefiles next to the object (.o.d). Paths as the compiler wrote them (relative ones to
    build_dir); None where no list was found."""
    build_dir = Path(build_dir)
    target = f"CMakeFiles/lab_{section}.dir/"
    if (build_dir / "build.ninja").is_file() and shutil.which("ninja"):
        r = subprocess.run(["ninja", "-C", str(build_dir), "-t", "deps"], capture_output=True, text=True,
                           errors="replace")
        deps, mine = [], False
        for line in r.stdout.splitlines():
            if line and not line[0].isspace():  # "CMakeFiles/lab_01_naive.dir/...o: #deps 436, ..."
                mine = line.startswith(target) or line.startswith("tests/" + target)  # (a unit-test program's)
            elif mine and line.strip():
                deps.append(line.strip())
        return deps or None
    deps = []
    for depfile in sorted(f for d in (build_dir, build_dir / "tests") for f in (d / target).rglob("*.o.d")):
        rule = depfile.read_text(errors="replace").replace("\\\n", " ")
        _, _, files = rule.partition(": ")
        deps += [f.replace("\\ ", " ") for f in re.split(r"(?<!\\)\s+", files) if f]
    return deps or None


def include_dirs(command):
    """The include folders a compile command names (-I, -isystem, -iquote, -idirafter; joined, after
    "=", or as the next word)."""
    words, dirs = shlex.split(command), []
    for i, w in enumerate(words):
        for flag in ("-isystem", "-iquote", "-idirafter", "-I"):
            if w == flag and i + 1 < len(words):
                dirs.append(words[i + 1])
            elif w.startswith(flag) and w != flag:
                dirs.append(w[len(flag):].removeprefix("="))
    return dirs


def outside_of(paths, allowed, base):
    """The first of `paths` (relative ones to base) that lies in none of the `allowed` folders, as a
    resolved path (a "common/../solutions/x.cu" is where it leads); None if all do."""
    for p in paths:
        try:
            real = Path(os.path.realpath(Path(base) / p))
        except (OSError, ValueError):
            continue
        if not any(real == a or a in real.parents for a in allowed):
            return str(real)
    return None


# A diagnostic's place in a compiler's output: nvcc's "path(12): error", gcc's "path:12:5: error" and
# "In file included from path:12".
DIAGNOSTIC_PLACE = re.compile(r"""(?:^|[\s"'`])([^\s:()"'`]+)(?:\((\d+)\)|:(\d+))""", re.M)


def diagnostic_outside(log, allowed, base):
    """The first existing file that a build log places a diagnostic in outside the `allowed`
    folders (its quoted lines would show that file's text), else None."""
    for m in DIAGNOSTIC_PLACE.finditer(log):
        name = m.group(1)
        try:
            if not (Path(base) / name).is_file():
                continue
        except (OSError, ValueError):  # a name too long for a path
            continue
        found = outside_of([name], allowed, base)
        if found:
            return found
    return None


def compiler_excerpt(log, lines=8, paths=()):
    """The first error lines of a build log (what a student needs to see); each (long, short) pair
    of `paths` shortened, so that the student reads labs/01_naive.cu, not the grader's folder."""
    # a linker's "error" line says only that it failed; the lines that name the symbol say why
    errs = [l for l in log.splitlines()
            if re.search(r"\berror\b|undefined reference|multiple definition", l, re.IGNORECASE)]
    pick = errs[:lines] if errs else log.strip().splitlines()[-lines:]
    text = "\n".join(l[:240] for l in pick)
    for long, short in paths:
        text = text.replace(long, short)
    return text


def run_excerpt(out, lines=6):
    return "\n".join(l[:240] for l in out.strip().splitlines()[-lines:])


def student_command(section, suffix, variant, args, cpu_model=False):
    """A case's run as the student types it in their own checkout (as `scripts/lab check` prints it)."""
    prog = ["python3", f"labs/{section}.py"] if suffix == ".py" else [f"build/bin/lab_{section}"]
    return " ".join(shlex.quote(str(x)) for x in prog + ["--variant", variant, "--iters", "0", *args] +
                    (["--cpu"] if cpu_model else []))


def unit_tests_weight(cases_weight):
    """The unit-test case's weight beside cases of total weight cases_weight: UNIT_TESTS_SHARE of the sum."""
    return round(cases_weight * UNIT_TESTS_SHARE / (1 - UNIT_TESTS_SHARE), 2)


def bonus_for(ratio):
    if ratio is None:
        return 0
    for threshold, points in BONUS_TIERS:
        if ratio >= threshold:
            return points
    return 0


# The builds whose record is of the submission's own code. A C++ lab is compiled here as "lab"; a
# Python lab declares its build in its SECTION, "solution" where a copy of the solution kept it
# (the given-code check flags such a copy). "cpu-model" and "baseline" ran other code.
OWN_CODE_BUILDS = ("lab", "solution")


def record_passed(r, cpu_model=False):
    """Whether a run's result record shows a passing check, on some rows, of the submission's code
    (under --cpu: its CPU model, which runs the submission's exercise code)."""
    builds = OWN_CODE_BUILDS + ("cpu-model",) if cpu_model else OWN_CODE_BUILDS
    return bool(r["check"]["passed"]) and r["check"]["rows_checked"] > 0 and r["build"] in builds


def killed_by(code, sandboxed=False):
    """The signal that ended a run, else None: a negative exit code, or (sandboxed) one above 128,
    as bubblewrap passes on its program's death by signal N (128 + N, a shell's way)."""
    if code is None:
        return None
    return -code if code < 0 else code - 128 if sandboxed and 128 < code < 128 + signal.NSIG else None


def signal_text(n):
    """"11, SIGSEGV" (the number alone where Python knows no name for it)."""
    try:
        return f"{n}, {signal.Signals(n).name}"
    except ValueError:
        return str(n)


def crash_excerpt(code, out, sandboxed=False, lines=6):
    """A run's last output lines, and where a signal ended it, a line that says which: a crash
    that printed nothing still says what happened."""
    text, n = run_excerpt(out, lines), killed_by(code, sandboxed)
    if n is None:
        return text
    name = signal_text(n).partition(", ")[2]
    return (text + "\n" if text else "") + f"killed by signal {n}" + (f" ({name})" if name else "")


def classify(code, out, record_ok, cpu_model=False, sandboxed=False):
    """What happened to one correctness run (under --cpu, a run of the CPU model; sandboxed: one under
    bubblewrap, whose exit code says a signal as 128 + N)."""
    n = killed_by(code, sandboxed)
    if code == 0 and record_ok:
        return "pass"
    if code == 77 and cpu_model and re.search(r"^not checked here:", out, re.M):
        return CPU_PART_PASSED if re.search(r"^CPU part passed:", out, re.M) else GPU_ONLY_PART
    if code == 0:
        return "exited early (no passing result record)"
    if n == signal.SIGXFSZ or (code == 1 and "[Errno 27] File too large" in out):  # (Python ignores the signal)
        return "wrote too large a file"
    if code == 1:
        return "wrong answer" if "not written" not in out else "output not written"
    if code == 124:
        return "timeout"
    if code == 77:
        return "cannot run here"
    if code == 2:
        return "refused the input (exit 2)"
    if code == 3:
        return "CUDA error"
    if n is not None:
        return f"crashed (signal {signal_text(n)})"
    return f"exit {code}"


def section_score(sec):
    """The section's points, or None where its cases were not run (triage: no GPU) or none could be
    checked on the CPU model (--cpu), on a file that is not an untouched stub (a stub scores 0, GPU
    or not)."""
    if sec["status"] in (NOT_RUN, CPU_NOT_CHECKED, GRADER_PROBLEM):
        return 0.0 if sec.get("unmodified_stub") and sec["status"] != GRADER_PROBLEM else None
    if sec["status"] not in ("graded", CPU_GRADED):
        return 0.0
    return sec["correctness"] + sec.get("bonus", 0)


def section_state(sec):
    """One word or two for a section's outcome (the class summary's NN_status column). A graded
    section whose runs timed out says how many: in a class of 200, the hangs are found by filtering
    this column, not by opening each grade.md."""
    if sec is None:
        return "not graded"  # a grade made over other sections than the summary's
    if sec["status"] in ("graded", NOT_RUN, CPU_GRADED, CPU_NOT_CHECKED) and sec.get("unmodified_stub"):
        return "unmodified stub"
    outcomes = [c.get("status") for c in sec.get("cases", [])]
    timed_out, skipped = outcomes.count("timeout"), outcomes.count(AFTER_HANGS)
    if sec["status"] in ("graded", CPU_GRADED) and timed_out:
        return (f"{sec['status']} ({timed_out} run{'s' if timed_out > 1 else ''} timed out"
                f"{f', {skipped} not run after them' if skipped else ''})")
    return sec["status"]


def millis(x):
    """A median time for the console: "1.362 ms", or "no time" where the run gave none."""
    return "no time" if x is None else f"{x:.4g} ms"


def number(x):
    """A score cell: a number, or empty (never text, so the column sorts and imports as numbers)."""
    return "" if x is None else f"{x:.1f}"


def total_line(report):
    if not report["graded_sections"]:
        return "**Total: 0** — no lab file found (expected labs/NN_<name>.cu files, e.g. 01_naive.cu)."
    if report["total"] is None and any((report["sections"].get(s) or {}).get("status") == GRADER_PROBLEM
                                       for s in report["graded_sections"]):
        return ("**Total: none yet** — a section below could not be checked after it compiled, a problem of "
                "the grading machine, not of your files; it will be regraded.")
    if report["total"] is None and is_cpu_grade(report):
        return ("**Total: none on the CPU model** — a section below has nothing the CPU model can check; "
                "grade it on a GPU.")
    if report["total"] is None:
        return (f"**Total: {NOT_RUN}** — triage only: compile errors and unmodified stubs below; "
                "grade on a GPU machine for correctness and performance.")
    return (f"**Total: {report['total']:.1f}{', provisional (CPU model)' if is_cpu_grade(report) else ''}** "
            f"(mean over {len(report['graded_sections'])} section(s): {', '.join(report['graded_sections'])})")


def render_markdown(report):
    """grade.md from a grade.json report."""
    cpu = is_cpu_grade(report)
    where = ("on the CPU model, not on a GPU: each case ran your exercise code inside the section's C++ model "
             "of the algorithm (`--cpu`; a Python section: your code on the CPU), not your kernel. A race, a "
             "missing synchronisation or any other bug only a GPU shows is not seen, and nothing was timed (no "
             "speed bonus). **This grade is provisional** until graded on a GPU") if cpu else \
        f"on {report['gpu']}" if report["gpu"] else "without a GPU (triage only: no case was run)"
    lines = [f"# Grade: {report['submission']}", "",
             f"Graded {report['time_utc']} at commit {report['git_sha']} {where}.", "",
             total_line(report), ""]
    lines += [f"- {line[0].upper()}{line[1:]}." for line in report.get("intake", [])]
    if report.get("intake"):
        lines.append("")
    named = set()
    for line in report.get("misnamed", []):
        name, rest = line.split(": ", 1)
        named.add(name)
        lines += [f"- `{name}`: {rest}"]
    if report.get("misnamed"):
        lines.append("")
    # a folder is explained by a line about a file inside it
    rest = [f for f in report["ignored_files"]
            if f not in named and not any(n.startswith(f) for n in named if f.endswith("/"))]
    if rest:
        lines += ["Ignored files (not a lab of this course): " + ", ".join(f"`{f}`" for f in rest), ""]
        tree = [f for f in rest if f.rstrip("/") in TREE_FOLDERS]
        if tree:  # a student who edited the harness to pass must learn that the grade did not use it
            lines += [f"Your {', '.join(f'`{f}`' for f in tree)} {'is' if len(tree) == 1 else 'are'} not used: "
                      "your labs are built against the course's own harness and scripts, unchanged.", ""]
    lines += ["| section | status | correctness | speed vs solution | bonus | score |", "|---|---|---:|---:|---:|---:|"]
    for name in report["graded_sections"]:
        s = report["sections"][name]
        ratio = s.get("speed_ratio")
        run = s["status"] not in (NOT_RUN, CPU_NOT_CHECKED, GRADER_PROBLEM)
        score = section_score(s)
        lines.append(f"| {name} | {s['status']}{', unmodified stub' if s.get('unmodified_stub') else ''}"
                     f"{'; for review: ' + s['review'] if s.get('review') else ''} | "
                     f"{format(s['correctness'], '.0f') + '%' if run else '–'} | "
                     f"{'–' if ratio is None else f'{ratio:.2f}×'} | {s.get('bonus', 0) if run and not cpu else '–'} | "
                     f"{'–' if score is None else f'{score:.1f}'} |")
    lines.append("")
    for name in report["graded_sections"]:
        s = report["sections"][name]
        lines += [f"## {name}", ""]
        if s["status"] == "missing":
            lines += ["Not in the submission: 0 points.", ""]
            continue
        if s.get("needs_lab"):  # it builds in the student's checkout, where the other lab is
            lines += [f"Not built: 0 points. {needs_text(name, s['needs_lab'])}.", ""]
            continue
        if s.get("holds_section"):
            lines += [f"Not built: 0 points. {holds_text(name + lab_suffix(name), s['holds_section'])}.", ""]
            continue
        if s["status"] == EMPTY_FILE:
            lines += ["The file is empty: 0 points.", ""]
            continue
        # (named for a file that does not compile too: an edit of the given code may be why)
        edits = ([f"Changed outside the exercise regions, at lines {line_ranges(s['edits_outside_exercises'])} "
                  "of the handed-in file: the given code (the harness call, `main`, the checks) is not the "
                  "exercise's; review those lines (the score does not change).", ""]
                 if s.get("edits_outside_exercises") else [])
        if s["status"] == GRADER_PROBLEM:
            lines += ["Compiled, but not graded: the grader could not check the build (a problem of the grading "
                      "machine, not of your file). It will be regraded; no points are taken.", ""] + edits
            continue
        if s["status"] == "compile error":
            lines += ["Does not compile: 0 points. The compiler said:", "", "```", s["log_excerpt"], "```", "",
                      f"To build it in your checkout: `scripts/lab check {name[:2]}`.", ""] + edits
            continue
        if s.get("unmodified_stub"):
            lines += ["The file is the unmodified stub: no exercise was attempted (0 points; its cases were not run).", ""]
            continue
        if "edits_outside_exercises" in s and s["edits_outside_exercises"] is None:
            lines += ["Not compared with its stub (none this tree regenerates is close to it): changes to the "
                      "given code are not named.", ""]
        lines += edits
        if s.get("review"):
            lines += [f"**For review**: {s['review']}. Your program runs its own self-check, so code that could "
                      "write its result or end the run is read by the instructor before the score stands.", ""]
        if s["status"] in (NOT_RUN, CPU_NOT_CHECKED):
            unit = [c for c in s["cases"] if c["case"] == UNIT_TESTS]
            lines += [f"Compiled; not checked on the CPU model: {s.get('cpu_note')}." if s["status"] == CPU_NOT_CHECKED
                      else "Compiled; " + ("the other " if unit else "") + "cases not run (no GPU on the grading machine)."]
            for c in unit:  # run on the CPU
                lines += ["", f"The exercises' unit tests (run on the CPU): {c['status']}."]
                if c["status"] != "pass":
                    lines += ["", "```", c["log_excerpt"], "```", "", f"To run them in your checkout (`scripts/lab check "
                              f"{name[:2]}` builds them): `{c['rerun']}`"]
            lines.append("")
            continue
        absent = [c for c in s["cases"] if c["status"] == NOT_ON_THIS_GPU]
        in_part = [c for c in s["cases"] if c["status"] == GPU_ONLY_PART]
        cpu_part = sum(c["status"] == CPU_PART_PASSED for c in s["cases"])
        failed = [c for c in s["cases"] if c["status"] not in (*PASSED, *UNCOUNTED)]
        counted = len(s["cases"]) - len(absent) - len(in_part)
        skipped = s.get("gpu_only_runs", 0)
        lines += [f"{counted - len(failed)} of {counted} cases passed{' on the CPU model' if cpu else ''} "
                  f"({s['weight_passed']:g} of {s['weight_total']:g} weight)."
                  + (f" {cpu_part} of them {'have' if cpu_part > 1 else 'has'} an exercise part only a GPU runs: "
                     f"{CPU_PART_PASSED} (O against fp64, with your code's host part)." if cpu_part else "")
                  + (f" {len(absent)} more could not run on this GPU, for the solution either "
                     f"({', '.join(sorted({c['variant'] for c in absent}))}): not counted." if absent else "")
                  + (f" {len(in_part)} more passed their CPU part; their exercise part needs a GPU ({GPU_ONLY_PART}): "
                     "not counted." if in_part else "")
                  + (f" {skipped} run{'s' if skipped > 1 else ''} of the case list {'are' if skipped > 1 else 'is'} "
                     "GPU-only (too large for the CPU model, or a variant it does not model): not run."
                     if skipped else ""),
                  ""]
        if failed:
            lines += ["| case | variant | result | seconds |", "|---|---|---|---:|"]
            lines += [f"| {c['case']} | {c['variant']} | {c['status']} | {c['seconds']:.1f} |" for c in failed]
            lines.append("")
            # a hidden case's output may name its arguments, or quote the program refusing them: its name alone
            first = next((c for c in failed if not c["case"].startswith(HIDDEN)), failed[0])
            if first["case"].startswith(HIDDEN):
                lines += [f"First failure, `{first['case']}` ({first['variant']}): a hidden case; its output is not "
                          "shown.", ""]
                continue
            lines += [f"First failure, `{first['case']}` ({first['variant']}):", "", "```", first["log_excerpt"], "```", ""]
            if first.get("rerun"):
                lines += [f"To run it alone in your checkout (`scripts/lab check {name[:2]}` builds it):", "",
                          "```", first["rerun"], "```", ""]
    return "\n".join(lines)


def write_reports(report, folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / REPORTS[0]).write_text(json.dumps(report, indent=1) + "\n")
    # a name that is not UTF-8 (a zip made on Windows) is shown with "?" for its odd bytes
    (folder / REPORTS[1]).write_text(render_markdown(report), errors="replace")


def write_class_summary(reports, path):
    """One row per submission: its total, the GPU it was graded on, each section's score (a number,
    or empty where none was run) and status, its misnamed files, and where it changed given code."""
    sections = sorted({s for r in reports for s in r["graded_sections"]})
    # utf-8-sig: a spreadsheet that opens the file by a double click reads "José" as José
    with open(path, "w", newline="", encoding="utf-8-sig", errors="replace") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["submission", "total", "gpu"] + [c for s in sections for c in (s, f"{s}_status")] +
                   ["lab_files_not_graded", "edited_outside_exercises", "review"])
        for r in reports:
            row = [r["submission"], number(r["total"]), r["gpu"] or "none (triage)"]
            for s in sections:
                sec = r["sections"].get(s) if s in r["graded_sections"] else None
                row += [number(section_score(sec)) if sec else "", section_state(sec)]
            outside = []
            for s in sections:
                sec = r["sections"].get(s) or {} if s in r["graded_sections"] else {}
                if sec.get("identical_to_solution"):  # its "edits" are the solution's header: named as what it is
                    outside.append(f"{s} (identical to the solution, {sec['identical_to_solution']})")
                elif sec.get("edits_outside_exercises"):
                    outside.append(f"{s} (lines {line_ranges(sec['edits_outside_exercises'])})")
            stale = [UNFINISHED] if r.get("unfinished") else []
            w.writerow(row + ["; ".join(line.split(": ", 1)[0] for line in r.get("misnamed", [])), "; ".join(outside),
                              "; ".join(stale + [f"{s}: {why}" for s, why in to_review(r)])])


def read_report(folder):
    """A folder's grade.json, or None where it holds none (or not one this grader wrote)."""
    try:
        r = json.loads((Path(folder) / "grade.json").read_text())
    except (OSError, ValueError):
        return None
    keys = ("submission", "graded_sections", "sections", "total", "gpu")
    return r if isinstance(r, dict) and all(k in r for k in keys) else None


def graded_before(out_root):
    """{folder name: report} of the grades already under out_root."""
    out_root = Path(out_root)
    if not out_root.is_dir():
        return {}
    found = {}
    for f in sorted(out_root.iterdir()):
        if f.is_dir() and not f.is_symlink():
            r = read_report(f)
            if r is not None:
                found[f.name] = r
    return found


def file_digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def lab_digests(found, folder):
    """{a lab file's path in the submission: its sha256} of the files scan_submission found. A link,
    or a file reached through a linked folder, is refused unread (refused_file): it stands for
    where it leads, never for what it holds."""
    digests = {}
    for f in found.values():
        shown = f.relative_to(folder).as_posix()
        if f.is_symlink() or Path(folder).resolve() not in f.resolve().parents:
            digests[shown] = "not read: " + hashlib.sha256(str(f.resolve()).encode()).hexdigest()
        else:
            digests[shown] = file_digest(f)
    return digests


def mark_complete(folder):
    """Marks a grade folder's grade.json as a finished grading's (COMPLETE): written whole, then renamed."""
    tmp = Path(folder) / (COMPLETE + ".tmp")
    tmp.write_text(file_digest(Path(folder) / REPORTS[0]) + "\n")
    tmp.replace(Path(folder) / COMPLETE)


def is_complete(folder):
    """Whether a grade folder's grade.json is the one its last finished grading wrote (COMPLETE)."""
    try:
        return (Path(folder) / COMPLETE).read_text().strip() == file_digest(Path(folder) / REPORTS[0])
    except OSError:
        return False


# What a grade depends on in the repository (the grader, the harness, the reference solutions, the
# case lists, the build and the exercises' unit-test programs); labs/, handouts and results do not.
GRADING_FOLDERS = ("scripts", "common", "solutions", "tests/cases")
GRADING_FILES = ("CMakeLists.txt", "CMakePresets.json", "tests/CMakeLists.txt", "tests/*.cmake", "tests/*.cu", "tests/*.h")


def grading_files(root):
    """{path: sha256} of the repository's files a grade depends on (GRADING_FOLDERS, GRADING_FILES):
    what --resume compares, so that a change elsewhere (labs/, a handout) keeps the grades."""
    root = Path(root)
    paths = [f for d in GRADING_FOLDERS for f in (root / d).rglob("*") if "__pycache__" not in f.parts]
    paths += [f for pattern in GRADING_FILES for f in root.glob(pattern)]
    return {f.relative_to(root).as_posix(): file_digest(f) for f in sorted(set(paths)) if f.is_file()}


def changed_files(before, now, shown=3):
    """The files that differ between two {path: sha256}, named (at most `shown`, then a count)."""
    changed = sorted(f for f in set(before) | set(now) if before.get(f) != now.get(f))
    return ", ".join(changed[:shown]) + (f" and {len(changed) - shown} more" if len(changed) > shown else "")


def resume_reason(folder, submission, expected, known_sections, is_stub=None):
    """(why, report): why a submission's grade in `folder` is not kept by --resume (a line), or None
    with that grade where it was finished under the conditions `expected` holds (path,
    grading_files, graded_sections, gpu, sandboxed, hidden_cases_sha256, timeout_s: what run()
    records) for the lab files the submission holds now (is_stub: as build() chose them). The
    grader is compared by its files' digests, not its commit: a change to labs/ or a handout,
    committed or not, keeps the grades."""
    report = read_report(folder)
    if report is None:  # a grade folder without its report: a grading cut short before it wrote one
        return ("its last grading did not finish" if (Path(folder) / MARKER).is_file() else "no grade before"), None
    if not is_complete(folder):
        return "its last grading did not finish", report
    if not isinstance(report.get("lab_files"), dict):
        return "graded before lab files were recorded", report
    said = lambda gpu: "the CPU model" if gpu == CPU_MODEL else gpu or "no GPU (triage)"  # (a CPU_MODEL grade: --cpu)
    if report.get("path") != expected["path"]:
        return f"graded from another folder before ({report.get('path')})", report
    if not isinstance(report.get("grading_files"), dict):
        return "graded before the grader's files were recorded", report
    if report["grading_files"] != expected["grading_files"]:
        return f"the grader changed ({changed_files(report['grading_files'], expected['grading_files'])})", report
    if report.get("graded_sections") != expected["graded_sections"]:
        return (f"the graded sections changed ({', '.join(report.get('graded_sections') or []) or 'none'}, now "
                f"{', '.join(expected['graded_sections']) or 'none'})"), report
    if report.get("hidden_cases_sha256") != expected["hidden_cases_sha256"]:
        return ("hidden cases " + ("changed" if report.get("hidden_cases_sha256") and expected["hidden_cases_sha256"]
                                   else "added" if expected["hidden_cases_sha256"] else "removed")), report
    if report.get("gpu") != expected["gpu"]:
        return f"graded on {said(report.get('gpu'))} before, now on {said(expected['gpu'])}", report
    if bool(report.get("sandboxed")) != expected["sandboxed"]:
        return ("graded sandboxed before, now not" if report.get("sandboxed") else
                "graded unsandboxed before, now sandboxed"), report
    if report.get("timeout_s") != expected["timeout_s"]:
        secs = lambda x: f"{x:g} s" if isinstance(x, (int, float)) else "none"  # --timeout 30 is 30.0
        return f"timeout {secs(report.get('timeout_s'))} before, now {secs(expected['timeout_s'])}", report
    try:
        found = submission_notes(submission, known_sections, is_stub)[0] if Path(submission).is_dir() else {}
        now = lab_digests(found, Path(submission))
    except OSError as e:
        return f"its files cannot be read ({e})", report
    old = report["lab_files"]
    changes = [(f"{', '.join(names)} " + how) for names, how in (
        (sorted(f for f in now if f in old and now[f] != old[f]), "changed"),
        (sorted(f for f in now if f not in old), "handed in now"),
        (sorted(f for f in old if f not in now), "no longer handed in")) if names]
    if changes:
        return "; ".join(changes), report
    return None, report


def rebuild_class_summary(out_root):
    """class_summary.csv from every grade under out_root (so regrading one submission keeps the
    others' rows); returns (path, reports). Written whole, then renamed: never half a file."""
    # a grade whose last grading was cut short (no COMPLETE) keeps its old report: its row says so
    reports = sorted((r if is_complete(Path(out_root) / name) else dict(r, unfinished=True)
                      for name, r in graded_before(out_root).items()), key=lambda r: r["submission"])
    path = Path(out_root) / SUMMARY
    tmp = path.with_name(SUMMARY + ".tmp")
    write_class_summary(reports, tmp)
    tmp.replace(path)
    return path, reports


class ClassSections(list):
    """The sections class_sections chose, and where the grades already under --out chose them: how
    many such grades (kept), their folder (where) and the sections handed in now that they lack
    (left_out), for section_takers' line."""

    def __init__(self, sections, kept=0, where=None, left_out=()):
        super().__init__(sections)
        self.kept, self.where, self.left_out = kept, where, list(left_out)

    def kept_line(self):
        line = (f"these are the sections of the {self.kept} grade(s) already in {self.where} that this run does "
                "not replace: a later submission is graded over the class's sections")
        if self.left_out:
            every = sorted(set(self) | set(self.left_out))
            line += (f"; not graded, handed in now but not among them: {', '.join(self.left_out)} (to count "
                     f"{'it' if len(self.left_out) == 1 else 'them'}, grade the whole class again with "
                     f"--sections {' '.join(s[:2] for s in every)})")
        return line


def holds_a_file(folder, files):
    """Whether a submission's folder (a grade's recorded path) holds one of `files` (the lab files
    a run found, scan_submission): its grade is replaced by this run."""
    folder = Path(folder)
    return any(isinstance(f, Path) and (folder == f.parent.resolve() or folder in f.parent.resolve().parents)
               for f in files)


def class_sections(handed, out_root, known_sections, is_stub=lambda path, section: False):
    """The sections graded when --sections is not given, and those handed in only as untouched
    stubs. Where out_root holds grades that this run does not replace (none of its submissions'
    files lies in their folder: a late submission graded alone, a second batch), the class's
    sections are already fixed: the sections those grades were graded over (--sections or not), so
    that a late student is graded over the same sections as the rest of the class and the class
    summary keeps its columns; a section handed in now that they lack is not graded, and the list
    returned (ClassSections) says so. Else every section handed in by a submission of this run
    ({section: path} each) or by its grade already under out_root, so that a submission that hands
    in less is not graded over less. A section counts only where some file for it is not an
    untouched stub (is_stub(path, section)): one student who hands in the whole release must not
    give everyone else a zero for each section they were never asked to do. Where no section holds
    more than stubs, those are graded (each one an unmodified stub): there is nothing else to grade."""
    handed = list(handed)
    real = {s for found in handed for s, path in found.items() if not is_stub(path, s)}
    stubs = {s for found in handed for s in found}
    before = graded_before(out_root)
    files = [path for found in handed for path in found.values()]
    kept = [r for r in before.values() if not holds_a_file(r.get("path") or "", files)]
    recorded = {s for r in kept for s in r["graded_sections"]}
    if any(s in known_sections for s in recorded):
        return (ClassSections([s for s in known_sections if s in recorded], len(kept), out_root,
                              [s for s in known_sections if s in real - recorded]),
                [s for s in known_sections if s in stubs - real - recorded])
    for r in before.values():
        for s in r["graded_sections"]:
            sec = r["sections"].get(s) or {}
            if sec.get("status", "missing") != "missing":
                (stubs if sec.get("unmodified_stub") else real).add(s)
    if not real:
        real = stubs
    return [s for s in known_sections if s in real], [s for s in known_sections if s in stubs - real]


def handed_in_stub(grader, path, section):
    """grader.is_stub of a file as handed in, under any name ("01_naive.cu.txt"). A file that
    cannot be read is not a stub here: its grade names the error (Grader.build)."""
    try:
        return grader.is_stub(Path(path), section)
    except OSError:
        return False


def is_grade_folder(folder):
    """Whether the grader wrote this folder (its marker; a grade.json from before the marker)."""
    return (folder / MARKER).is_file() or read_report(folder) is not None


def is_grader_summary(path):
    """Whether a class_summary.csv is one the grader wrote (its header: write_class_summary's)."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            return f.readline().startswith(SUMMARY_HEADER)
    except OSError:
        return False


def out_problem(out_root, repo):
    """Why an --out may not take grades, in a few words (None where it may): the file system's root,
    the repository's root, a folder of its tracked tree (solutions/, labs/, scripts/...: a grade
    folder there would sit among the course's files), a path the build tools mishandle, or one
    holding a class summary or a folder of the grader's names (.harness, .builds) the grader did
    not write. Other files of the instructor's may stay: the grader writes only its own names."""
    out, repo = Path(out_root).resolve(), Path(repo).resolve()
    if out == Path(out.anchor):
        return "the file system's root"
    if out == repo:
        return "the repository's root"
    if repo in out.parents:
        top = out.relative_to(repo).parts[0]
        r = subprocess.run(["git", "-C", str(repo), "ls-files", "--", top], capture_output=True, text=True)
        # (a student release is no git checkout: there the course's own folders; build/ stays free)
        tracked = bool(r.stdout.strip()) if r.returncode == 0 else top in TREE_FOLDERS | {"labs"}
        if tracked or top == ".git":
            return f"inside the repository's {top}/ (give a folder outside its tracked tree, e.g. grades/)"
    if not build_safe(out):
        bad = "".join(sorted({c for c in str(out) if not build_safe(c)}))
        return f"its path holds {bad!r}, which the build tools mishandle; give another"
    if (out / SUMMARY).exists() and not is_grader_summary(out / SUMMARY):
        return f"{out / SUMMARY} is not a class summary the grader wrote: not replaced (move it away, or give another --out)"
    for name in (HARNESS, BUILDS):
        folder = out / name
        if folder.is_symlink() or folder.is_file() or (folder.is_dir() and any(folder.iterdir())
                                                       and not (folder / MARKER).is_file()):
            return f"{folder} is not the grader's: not replaced (move it away, or give another --out)"
    return None


def is_grades_root(folder):
    """Whether a folder is an --out the grader wrote (its class summary or harness, or a grade in it)."""
    folder = Path(folder)
    if is_grader_summary(folder / SUMMARY) or (folder / HARNESS / MARKER).is_file():
        return True
    try:
        return any(f.is_dir() and not f.is_symlink() and (f / MARKER).is_file() for f in folder.iterdir())
    except OSError:
        return False


def archive_stems(name):
    """The folder names an archive unpacks to beside itself: zack.zip -> zack; zack.tar.gz -> zack.tar, zack."""
    stem = Path(name).stem
    return [stem] + ([Path(stem).stem] if Path(stem).suffix.lower() == ".tar" else [])


def skipped_submissions(submissions, out_root):
    """{given: the line that says why} for the paths among the submissions that are not one, and
    that a shell glob (`submissions/*`) catches beside them: --out itself, a grade folder or an --out
    the grader wrote (a rerun must grade what the first run did), and an archive whose unpacked
    folder is among the submissions too. A lone archive stays for cmd_grade to refuse."""
    out_root = Path(out_root).resolve()
    given_dirs = {Path(g).resolve(): g for g in submissions if Path(g).is_dir()}
    skipped = {}
    for given in submissions:
        p = Path(given)
        if p.resolve() == out_root:
            skipped[given] = f"{given}: the --out folder, not a submission; skipped"
        elif p.is_dir() and (is_grade_folder(p) or is_grades_root(p)):
            skipped[given] = f"{given}: grades the grader wrote, not a submission; skipped"
        elif p.exists() and not p.is_dir():
            twin = next((given_dirs[d] for d in ((p.absolute().parent / s).resolve() for s in archive_stems(p.name))
                         if d in given_dirs), None)
            if twin is not None:
                skipped[given] = f"{given}: not a folder; skipped (the folder {twin} is graded)"
    return skipped


def plan_outputs(submissions, out_root):
    """Where each submission's grade goes. Returns (plan, notes, problems): plan holds (given,
    path, name) once per folder (a path given twice is graded once), notes are lines to print, and
    problems stop the grader before anything is written.

    A submission keeps the folder of its earlier grade under out_root (the same path), else gets
    its folder's name, or <parent>-<name> where another submission of this run has that name or
    its folder holds the grade of another submission that still exists. Its folder must be no
    submission, hold none and sit in none (it is replaced whole), and be the grader's if it exists."""
    out_root = Path(out_root).resolve()
    before = graded_before(out_root)
    owner = {str(r.get("path")): name for name, r in before.items()}
    seen, unique, notes = {}, [], []
    for given in submissions:
        p = Path(given).resolve()
        if p in seen:
            notes.append(f"{given}: the same folder as {seen[p]}; graded once")
            continue
        seen[p] = given
        unique.append((given, p))
    count = collections.Counter(p.name for _, p in unique)

    def taken(name, p):
        other = before.get(name, {}).get("path")
        return name in (HARNESS, BUILDS) or bool(other and other != str(p) and Path(other).exists())

    plan = []
    for given, p in unique:
        name = owner.get(str(p))
        if name is None:
            name = p.name
            if count[name] > 1 or taken(name, p):
                name = f"{p.parent.name or 'root'}-{p.name}"
                notes.append(f"{given}: graded as {name} (another submission's folder is also {p.name})")
        plan.append((given, p, name))
    problems = []
    names = collections.defaultdict(list)
    for given, p, name in plan:
        names[name].append(given)
    for name, given in names.items():
        if len(given) > 1:
            problems.append(f"{', '.join(map(str, given))}: would all be graded as {name}; rename a folder")
    if out_root.exists() and not out_root.is_dir():
        return plan, notes, problems + [f"--out {out_root}: not a folder"]
    why = out_problem(out_root, Path(__file__).resolve().parent.parent)
    if why:
        return plan, notes, problems + [f"--out {out_root}: {why}"]
    subs, clash = [p for _, p, _ in plan], []
    for given, p, name in plan:
        dest = out_root / name
        if len(names[name]) > 1:
            continue
        for s in subs:
            if dest == s or s in dest.parents or dest in s.parents:
                how = "is" if dest == s else "is inside" if s in dest.parents else "holds"
                clash.append(f"the grade of {given} would go to {dest}, which {how} the submission {s}")
                break
        else:
            if dest.is_symlink() or dest.is_file() or (dest.is_dir() and any(dest.iterdir()) and not is_grade_folder(dest)):
                problems.append(f"the grade of {given} would replace {dest}, which is not a grade "
                                "(move it away, or give another --out)")
            elif taken(name, p):
                problems.append(f"the grade of {given} would replace {dest}, the grade of {before[name]['path']}")
    if clash:  # one line, however many submissions share the mistake
        problems.append(clash[0] + (f" (and {len(clash) - 1} more like it)" if len(clash) > 1 else "") +
                        "; give --out a folder that is not a submission and holds none")
    return plan, notes, problems


# ---------------------------------------------------------------------------------- sandbox
# A student's program runs with the grader's permissions unless it is fenced in. Under bubblewrap
# (bwrap, Debian's and Ubuntu's package bubblewrap) every file is read-only but the submission's
# own grade folder, there is no network, of the devices only the GPUs (/dev/nvidia*) are there, and
# the program's processes die with the run (a timeout kills them all). Temporary files and the
# caches a Python section fills (Triton's, TorchInductor's) go into the grade folder too: one per
# submission, so that one student's cache never feeds another's run. (/tmp stays as it is, read
# only: a tree or a grade folder under /tmp must stay visible.)
SANDBOX_TOOL = "bwrap"


TREE_FOLDERS = {"common", "scripts", "tests", "solutions", "ch12", "results", ".ci"}  # the course's, not a lab's
SCRATCH = ".cache"  # a grade folder's temporary files and compiler caches, deleted once its runs end


def sandbox_command(cmd, writable, hide=()):
    """cmd fenced in by bubblewrap, able to write only the folder writable; each folder of hide
    seen empty (writable stays visible inside one)."""
    w = str(Path(writable).resolve())
    fence = [SANDBOX_TOOL, "--ro-bind", "/", "/", "--dev", "/dev"]
    for dev in sorted(glob.glob("/dev/nvidia*")):  # the GPUs, their control and unified-memory nodes
        fence += ["--dev-bind", dev, dev]
    for folder in hide:
        fence += ["--tmpfs", str(folder)]
    fence += ["--bind", w, w]  # (inside a hidden folder too: its mount point is made in the empty one)
    for folder in hide:
        fence += ["--remount-ro", str(folder)]
    fence += ["--proc", "/proc", "--chdir", w, "--unshare-net", "--unshare-pid", "--unshare-ipc",
              "--die-with-parent", "--new-session"]
    (Path(w) / SCRATCH / "tmp").mkdir(parents=True, exist_ok=True)
    for var, sub in (("XDG_CACHE_HOME", ""), ("TMPDIR", "/tmp"), ("TRITON_CACHE_DIR", "/triton"),
                     ("TORCHINDUCTOR_CACHE_DIR", "/inductor"), ("CUDA_CACHE_PATH", "/nv")):
        fence += ["--setenv", var, f"{w}/{SCRATCH}{sub}"]
    return fence + ["--", *[str(c) for c in cmd]]


def sandbox_problem():
    """Why no program can be fenced in here (bubblewrap missing, or refused by this kernel), in a
    few words; None where a fenced program runs."""
    if not shutil.which(SANDBOX_TOOL):
        return f"{SANDBOX_TOOL} is not installed (package bubblewrap)"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            r = subprocess.run(sandbox_command(["true"], tmp), capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{SANDBOX_TOOL} did not run: {e}"
    if r.returncode != 0:
        said = (r.stderr or r.stdout).strip().splitlines()
        return f"{SANDBOX_TOOL} cannot make a sandbox here: {said[-1] if said else f'exit {r.returncode}'}"
    return None


def perf_shape(data):
    """(variant, args) a section's speed is graded on: its case file's grade_perf, else its first
    bench entry, run with that entry's first variant (else the section's first); None if neither."""
    perf = data.get("grade_perf") or (data.get("bench") or [None])[0]
    if not perf:
        return None
    return (perf.get("variants") or data["variants"])[0], list(perf["args"])


def perf_command(exe, variant, args, rec):
    """The timing run of a section's perf shape: the graded variant, a sample check unless the
    shape names its own (11's says none: its fp64 gradients take minutes on a CPU), quiet, a record.
    The programs refuse an option given twice, so the shape's own --variant gives way."""
    rest, i = [], 0
    while i < len(args):
        if args[i] == "--variant" and i + 1 < len(args):
            i += 2
            continue
        rest.append(args[i])
        i += 1
    check = [] if "--check" in rest else ["--check", "sample"]
    return list(exe) + ["--variant", variant, "--quiet", *check, "--json", rec] + rest


def build_step(cmd, env):
    """Runs one step of a submission's build: (exit code, output). Its input is closed, and the whole
    process group is stopped after BUILD_TIMEOUT (exit 124): one student's file cannot hang the class."""
    proc = start_stoppable(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors="replace", env=env)
    with stopped_on_interrupt(proc):  # its own session: the terminal's Ctrl-C does not reach the compiler
        try:
            out, _ = proc.communicate(timeout=BUILD_TIMEOUT)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return 124, out + f"\nerror: the build was stopped after {BUILD_TIMEOUT:.0f} s\n"


def prune_build(build_dir):
    """Leaves of a submission's build only bin/, the programs its cases run: the objects, CMake's
    and Ninja's files (5-10 MB a submission, most of its grade folder) served the compile and its
    dependency check, both done. A regrade configures anew (build() empties the grade folder)."""
    build_dir = Path(build_dir)
    if not build_dir.is_dir() or build_dir.is_symlink():
        return
    for entry in build_dir.iterdir():
        if entry.name == "bin" and entry.is_dir() and not entry.is_symlink():
            continue
        shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


def is_utf16(data):
    """Whether a file's bytes begin with a UTF-16 byte-order mark (Windows' "Unicode" encoding)."""
    return data[:2] in (b"\xff\xfe", b"\xfe\xff")


def normalised(text):
    """A lab file's bytes as an editor on any system may have saved them: UTF-8 (a file saved as
    UTF-16 decoded), no BOM, LF line ends."""
    if is_utf16(text):
        try:
            text = text.decode("utf-16").encode()
        except UnicodeError:  # (not UTF-16 after all: compiled as it is, and its errors said)
            pass
    return text.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n")


def split_cat_file_batch(out):
    """{object id: its bytes} from `git cat-file --batch`'s output (a header line, the bytes, a newline each)."""
    at, texts = 0, {}
    while at < len(out):
        header_end = out.index(b"\n", at)
        fields = out[at:header_end].split()
        if len(fields) != 3:  # "<id> missing": skipped
            at = header_end + 1
            continue
        size = int(fields[2])
        texts[fields[0].decode()] = out[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1
    return texts


def code_lines(text):
    """(index, the line without whitespace) of a file's non-blank lines: an editor's re-indentation,
    trailing spaces or blank lines are no edit."""
    squeezed = ((i, re.sub(r"\s+", "", line)) for i, line in enumerate(text.split("\n")))  # lines as an editor numbers them
    return [(i, line) for i, line in squeezed if line]


def edits_outside_exercises(text, stub, regions):
    """Where a handed-in file changes its stub outside the exercise regions (the given code, main,
    the harness call): [(first, last)] line numbers of the handed-in file; a deletion is placed at
    the line after it. `regions`: the stub's exercise lines, (first, end) 0-based (make_stub). Lines
    added right after a region's last line belong to it (a student's helper next to their code)."""
    a, b = code_lines(stub), code_lines(text)
    last_line = max(1, len(text.rstrip("\n").split("\n")))
    inside = lambda i: any(first <= i < end for first, end in regions)
    spans = []
    matcher = difflib.SequenceMatcher(None, [x for _, x in a], [x for _, x in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            outside = i1 == 0 or not inside(a[i1 - 1][0])
        else:
            outside = not all(inside(a[k][0]) for k in range(i1, i2))
        if outside:
            first = b[j1][0] + 1 if j1 < len(b) else last_line
            spans.append((first, b[j2 - 1][0] + 1 if j2 > j1 else first))
    return spans


def line_ranges(spans):
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in spans)


def merged_spans(spans):
    """[(first, last)] line ranges, sorted, overlapping or touching ones joined."""
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def lines_as_spans(numbers):
    """Line numbers as [(first, last)] runs."""
    return merged_spans((n, n) for n in numbers)


def exercise_spans(text, stub, regions):
    """The lines of a handed-in file that stand for each exercise region of its stub, as
    edits_outside_exercises counts them inside (a helper right after a region's code is the
    region's): [(first, end)] 0-based, end exclusive, one per region (None: none left); and the
    line numbers (1-based) the file adds or changes outside them."""
    a, b = code_lines(stub), code_lines(text)
    which = lambda i: next((k for k, (first, end) in enumerate(regions) if first <= i < end), None)
    mine, added = [[] for _ in regions], []
    matcher = difflib.SequenceMatcher(None, [x for _, x in a], [x for _, x in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                r = which(a[i1 + k][0])
                if r is not None:
                    mine[r].append(b[j1 + k][0])
            continue
        if tag == "insert":
            r = which(a[i1 - 1][0]) if i1 > 0 else None
        else:
            owners = [which(a[k][0]) for k in range(i1, i2)]
            r = owners[0] if None not in owners else None
        if r is not None:
            mine[r] += [b[j][0] for j in range(j1, j2)]
        else:
            added += [b[j][0] + 1 for j in range(j1, j2)]
    return [(min(m), max(m) + 1) if m else None for m in mine], added


def cpp_lines(text):
    """(code, bare): the lines of a C++ file without their comments, and without their string and
    character literals too (a brace in "{" or '}' opens no scope). R"x(...)x" is a literal."""
    code, bare, cur, cur_bare = [], [], [], []
    i, n, state, end = 0, len(text), None, ""
    while i < n:
        c = text[i]
        if c == "\n":
            code.append("".join(cur))
            bare.append("".join(cur_bare))
            cur, cur_bare = [], []
            if state == "line" or (state == "literal" and len(end) == 1):  # (only a raw string spans lines)
                state = None
            i += 1
        elif state == "line":
            i += 1
        elif state == "block":
            state, i = (None, i + 2) if text.startswith("*/", i) else ("block", i + 1)
        elif state == "literal":
            if text.startswith(end, i):
                cur.append(end)
                cur_bare.append(end[-1])
                state, i = None, i + len(end)
            elif c == "\\" and len(end) == 1 and i + 1 < n and text[i + 1] != "\n":
                cur.append(text[i:i + 2])
                i += 2
            else:
                cur.append(c)
                i += 1
        elif text.startswith("//", i):
            state, i = "line", i + 2
        elif text.startswith("/*", i):
            cur.append(" ")
            cur_bare.append(" ")
            state, i = "block", i + 2
        elif c == '"' or (c == "'" and not (i and (text[i - 1].isalnum() or text[i - 1] == "_"))):  # (1'000: a number)
            opened, end = c, c
            delim = re.match(r'([^\s()\\]{0,16})\(', text[i + 1:i + 18]) if c == '"' else None
            if delim and re.search(r"(?:^|\W)(?:u8|[uUL])?R$", text[max(0, i - 4):i]):
                opened, end = f'"{delim.group(1)}(', f'){delim.group(1)}"'
            cur.append(opened)
            cur_bare.append(c)
            state, i = "literal", i + len(opened)
        else:
            cur.append(c)
            cur_bare.append(c)
            i += 1
    code.append("".join(cur))
    bare.append("".join(cur_bare))
    return code, bare


def python_code(text):
    """Each line of a Python file without its comments ('#' in a string stays), or None where the
    file does not tokenize (it does not parse either: a compile error)."""
    import io
    import tokenize
    lines = text.split("\n")
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return lines


# What a program does to write its own result record or end its run early, in code the student
# wrote (outside comments): files, processes, the environment, its command line. The self-check
# runs in the student's program, so such code could forge a pass (record_passed); legitimate
# exercise code needs none of it.
FILE_OR_PROCESS_IO = {
    ".cu": re.compile(r"\b(?:fopen|freopen|fdopen|popen|getenv|argv|atexit|quick_exit|[io]?fstream|filebuf)\b"
                      r"|\b(?:std::)?(?:_?exit|_Exit|abort|system|remove|rename|unlink|open)\s*\("
                      r"|\bFILE\s*\*|/proc\b|--json"),
    ".py": re.compile(r"(?<![\w.])(?:open|exec|eval|compile)\s*\(|__import__|__builtins__|\bsys\.exit\b"
                      r"|\b(?:os|sys|subprocess|shutil|pathlib|builtins|importlib|ctypes|io)\b\s*\."
                      r"|^\s*(?:from\s+(?:os|sys|subprocess|shutil|pathlib|builtins|importlib|ctypes|io)\b"
                      r"|import\s+[\w\s,.]*\b(?:os|sys|subprocess|shutil|pathlib|builtins|importlib|ctypes|io)\b)"
                      r"|\bsubprocess\b|/proc\b|--json"),
}


def scope_leaks(text, spans, suffix):
    """Where exercise code leaves the scope its region sits in ([(first, last)], 1-based): C++ code
    whose brace depth (comments and literals aside) goes below the region's own or does not end at
    it (a `}` that closes the function, then file-scope code that runs before main); Python
    statements indented less than the region's EXERCISE line (code at module level). spans:
    exercise_spans of the file."""
    found = []
    if suffix == ".py":
        import ast
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return []
        lines = text.split("\n")
        for span in filter(None, spans):
            first, end = span
            marker = lines[first]
            indent = len(marker) - len(marker.lstrip())
            for node in ast.walk(tree):
                if isinstance(node, (ast.stmt, ast.excepthandler)) and first < node.lineno <= end \
                        and node.col_offset < indent:
                    found.append((node.lineno, min(node.end_lineno or node.lineno, end)))
        return merged_spans(found)
    _, bare = cpp_lines(text)
    for span in filter(None, spans):
        first, end = span
        depth, out = 0, []
        for i in range(first, end):
            for c in bare[i]:
                depth += (c == "{") - (c == "}")
                if depth < 0 and (not out or out[-1] != i):
                    out.append(i)
        if out:
            found.append((out[0] + 1, out[-1] + 1))
        if depth != 0:  # opened or closed a scope for good: the given code after it is no longer where it was
            found.append(((out[0] if out else first) + 1, end))
    return merged_spans(found)


def io_lines(text, line_spans, suffix):
    """The lines among line_spans ([(first, last)], 1-based) whose code (comments aside) does file,
    process or environment I/O (FILE_OR_PROCESS_IO), as [(first, last)]."""
    code = python_code(text) if suffix == ".py" else cpp_lines(text)[0]
    if code is None:  # (does not parse: whole-line comments aside)
        code = ["" if line.lstrip().startswith("#") else line for line in text.split("\n")]
    pattern = FILE_OR_PROCESS_IO[suffix]
    return lines_as_spans(n for a, b in line_spans for n in range(a, b + 1)
                          if n <= len(code) and pattern.search(code[n - 1]))


def review_reasons(sec):
    """Why a section's file is for the instructor to read before its score stands, in a few words
    (None: nothing to review): the self-check runs in the student's own program, which writes the
    result record the grader trusts (record_passed), so code that could forge it is named."""
    reasons = []
    if sec.get("identical_to_solution"):
        reasons.append("identical to the solution")
    if sec.get("exercise_leaves_scope"):
        reasons.append(f"exercise code leaves its scope (lines {line_ranges(sec['exercise_leaves_scope'])})")
    if sec.get("exercise_io"):
        reasons.append(f"exercise code does file or process I/O (lines {line_ranges(sec['exercise_io'])})")
    leaks = {n for a, b in sec.get("exercise_leaves_scope") or [] for n in range(a, b + 1)}
    edits = [(a, b) for a, b in sec.get("edits_outside_exercises") or []
             if not all(n in leaks for n in range(a, b + 1))]
    if edits and not sec.get("identical_to_solution"):
        reasons.append(f"changed given code (lines {line_ranges(edits)})")
    if sec.get("given_code_io"):
        reasons.append(f"changed given code does file or process I/O (lines {line_ranges(sec['given_code_io'])})")
    return "; ".join(reasons) or None


MAX_FILE_BYTES = 1 << 30  # the largest file a student's run may write (its record is a few KB)
REPORTS = ("grade.json", "grade.md")  # a grade folder's reports (write_reports)


class Grader:
    """Holds what every submission shares: the repository, the reference build, the run helper."""

    def __init__(self, root, ref_build, run_limited, make_stub, load_cases, expand_cases, cmake_env, say, jobs=1,
                 devices=(None,), on_device=lambda cmd, device: cmd, program=None, sandbox=False):
        self.root, self.ref_build = Path(root), Path(ref_build)
        self.run_limited, self.make_stub, self.load_cases = run_limited, make_stub, load_cases
        self.expand_cases, self.cmake_env, self.say = expand_cases, cmake_env, say
        self.jobs = max(1, jobs)  # case runs at once (the timing runs stay one at a time)
        self.devices, self.on_device = list(devices), on_device  # case n runs on devices[n % len]
        self.sandbox = sandbox  # every run fenced in, writing only its grade folder (sandbox_command)
        self.not_on_cpu = {}  # --cpu: {section: why this machine cannot run it on the CPU} (a Python package missing)
        # program(section, solution, build_dir, labs_dir): the command that runs a section's program
        self.program = program or (lambda s, solution, build_dir=None, labs_dir=None:
                                   [Path(build_dir or ref_build) / "bin" / (s if solution else f"lab_{s}")])
        self.harness = None  # the prebuilt lab_common every submission links (build_harness), else none
        self.stubs = {}  # section: the stubs a student may have been handed (stub_versions)
        self.regions = {}  # (section, commit): that stub's exercise regions (exercise_regions)
        self._grading_files = None
        self.build_threads = os.cpu_count() or 2  # compiler jobs of one submission's build (fewer when several build at once)

    def grading_files(self):
        """grading_files of the repository, read once (every grade of a run records it)."""
        if self._grading_files is None:
            self._grading_files = grading_files(self.root)
        return self._grading_files

    def stub_versions(self, section):
        """The stubs of a section a student may have been handed: today's (from solutions/), then
        every version committed to labs/, newest first (the students' release may be older than this
        tree), as (normalised bytes, the commit that holds it or None for today's)."""
        if section not in self.stubs:
            name = f"{section}{lab_suffix(section)}"
            solution = self.root / "solutions" / name
            versions = [(normalised(self.make_stub(solution.read_text(), name).encode()), None)] if solution.exists() else []
            try:
                log = subprocess.run(["git", "-C", str(self.root), "log", "--format=%H", "--raw", "--no-abbrev", "--",
                                      f"labs/{name}"], capture_output=True, text=True)
                commit, blobs = None, []  # (blob, commit), newest first
                for line in log.stdout.splitlines():
                    fields = line.split()
                    if len(fields) == 1 and len(fields[0]) in (40, 64):
                        commit = fields[0]
                    elif line.startswith(":") and len(fields) >= 4 and fields[3].strip("0"):  # not the null id (a deletion)
                        blobs.append((fields[3], commit))  # SHA-1 or SHA-256 ids
                shown = subprocess.run(["git", "-C", str(self.root), "cat-file", "--batch"],
                                       input="\n".join(b for b, _ in blobs).encode() + b"\n", capture_output=True) if blobs else None
                if log.returncode != 0 or not blobs or (shown and shown.returncode != 0):
                    raise OSError(log.stderr.strip() or "no committed version")
                texts = split_cat_file_batch(shown.stdout)
                versions += [(normalised(texts[b]), c) for b, c in blobs if b in texts]
            except (OSError, ValueError) as e:
                self.say(f"lab: {name}: only today's stub counts as unmodified (git history of labs/{name} "
                         f"not read: {e})")
            self.stubs[section] = versions
        return self.stubs[section]

    def is_stub(self, path, section):
        """Whether a handed-in file is a stub as generated, untouched (any version of it, see
        stub_versions), whatever name it was handed in under (the section says .cu or .py). Line
        endings and a BOM do not count (an editor on Windows may save them)."""
        text = normalised(path.read_bytes())
        return any(text == stub for stub, _ in self.stub_versions(section))

    def exercise_regions(self, section, suffix, stub, commit):
        """A stub version's exercise regions, from its commit's solution (today's: solutions/), or
        None where today's make_stub does not regenerate that version line for line with the same
        exercise lines (an older make_labs worded its header comments otherwise: no matter)."""
        key = (section, commit)
        if key not in self.regions:
            name, regions = f"{section}{suffix}", []
            if commit is None:
                solution = (self.root / "solutions" / name).read_text()
            else:
                r = subprocess.run(["git", "-C", str(self.root), "show", f"{commit}:solutions/{name}"], capture_output=True)
                solution = r.stdout.decode(errors="replace") if r.returncode == 0 else None
            try:
                made = self.make_stub(solution, name, regions=regions).splitlines() if solution is not None else None
            except Exception:  # an old solution that today's make_labs reads otherwise: not compared
                made = None
            old = stub.decode(errors="replace").splitlines()
            same = made is not None and len(made) == len(old) and all(made[i] == old[i] for a, b in regions
                                                                       for i in range(a, b))
            self.regions[key] = regions if same else None
        return self.regions[key]

    def closest_stub(self, path, section):
        """(edits, stub, regions): the handed-in file's edits outside the exercise regions ([(first,
        last)] lines), against the stub version it is closest to: today's, else an older one whose
        exercise regions today's make_stub regenerates from that commit's solution (one it cannot is
        not compared); that stub's text and regions. None where no stub could be compared."""
        text = normalised(path.read_bytes()).decode(errors="replace")
        best = None
        for stub, commit in self.stub_versions(section):
            regions = self.exercise_regions(section, lab_suffix(section), stub, commit)
            if regions is None:
                continue
            stub = stub.decode(errors="replace")
            spans = edits_outside_exercises(text, stub, regions)
            if best is None or sum(b - a + 1 for a, b in spans) < sum(b - a + 1 for a, b in best[0]):
                best = (spans, stub, regions)
            if not best[0]:
                break
        return best

    def edits_outside(self, path, section):
        """closest_stub's edits alone (None where no stub could be compared)."""
        best = self.closest_stub(path, section)
        return best[0] if best else None

    def forgery_checks(self, path, section):
        """What of a handed-in file could forge its self-check (review_reasons), as a section's
        fields: edits_outside_exercises (a region whose code leaves its scope among them),
        exercise_leaves_scope, exercise_io and given_code_io, each [(first, last)] lines."""
        best = self.closest_stub(path, section)
        if best is None:
            return {"edits_outside_exercises": None}
        edits, stub, regions = best
        text, suffix = normalised(path.read_bytes()).decode(errors="replace"), lab_suffix(section)
        spans, added = exercise_spans(text, stub, regions)
        leaks = scope_leaks(text, spans, suffix)
        return {"edits_outside_exercises": merged_spans(edits + leaks) if leaks else edits,
                "exercise_leaves_scope": leaks,
                "exercise_io": io_lines(text, [(a + 1, b) for a, b in filter(None, spans)], suffix),
                "given_code_io": io_lines(text, lines_as_spans(added), suffix)}  # (not a deletion's next line)

    def solution_copy(self, path, section):
        """solutions/NN_name.* where the handed-in file is that file (whitespace, blank lines, line
        endings aside), else None: such a copy's "edits" are the solution's header comment."""
        solution = self.root / "solutions" / f"{section}{path.suffix}"
        if not solution.is_file():
            return None
        mine = [x for _, x in code_lines(normalised(path.read_bytes()).decode(errors="replace"))]
        theirs = [x for _, x in code_lines(normalised(solution.read_bytes()).decode(errors="replace"))]
        return f"solutions/{solution.name}" if mine == theirs else None

    def configure_args(self, labs_dir, build_dir):
        # compile_commands.json: the include folders a lab's compile names (allowed_dirs)
        args = ["cmake", "-S", str(self.root), "-B", str(build_dir), "-DLAB_BUILD_TESTS=OFF", "-DLAB_BUILD_SOLUTIONS=OFF",
                "-DLAB_BUILD_EXERCISE_TESTS=ON",
                f"-DLAB_LABS_DIR={labs_dir}", "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if (self.root / ".deps" / "include").is_dir():  # a vendored copy (scripts/lab deps --vendor)
            args.append(f"-DCMAKE_PREFIX_PATH={self.root / '.deps'}")
        if self.harness:
            args.append(f"-DLAB_COMMON_LIBRARY={self.harness}")
        return args

    def build_harness(self, folder):
        """Builds lab_common (common/) once, configured as every submission's build is, and has the
        submissions link it: compiling it took most of a one-section submission's build. Returns
        (ok, log); a second run into the same --out rebuilds only what changed."""
        folder = Path(folder).resolve()
        (folder / "labs").mkdir(parents=True, exist_ok=True)  # no lab file: no section target
        (folder / MARKER).touch()
        self.harness = None
        run = lambda cmd: subprocess.run(cmd, capture_output=True, text=True, env=self.cmake_env())
        r = run(self.configure_args(folder / "labs", folder / "build"))
        if r.returncode != 0 and (folder / "build").exists():  # made from another place (a moved --out): anew
            shutil.rmtree(folder / "build")
            r = run(self.configure_args(folder / "labs", folder / "build"))
        log = r.stdout + r.stderr
        if r.returncode == 0:
            r = run(["cmake", "--build", str(folder / "build"), "--target", "lab_common", "--parallel", str(os.cpu_count() or 2)])
            log += r.stdout + r.stderr
        if r.returncode != 0:
            return False, log
        lib = folder / "build" / "common" / "liblab_common.a"
        if not lib.is_file():
            return False, log + f"\n{lib} was not built\n"
        self.harness = lib
        return True, log

    def build_submission(self, labs_dir, build_dir, sections, unit_tests=None):
        """Configures a build of the submitted labs and builds the graded ones (`sections`: a file
        handed in but not graded is not compiled), and the exercises' unit-test programs of
        `unit_tests` ({section: program}, built from that section's file); returns {section or
        program: (ok, log)}."""
        unit_tests = unit_tests or {}
        names = list(sections) + list(unit_tests.values())
        code, log = build_step(self.configure_args(labs_dir, build_dir), self.cmake_env())
        if code != 0:
            return {s: (False, log) for s in names}
        # The graded targets at once, going on past failures (-k); then one target at a time, a no-op
        # for the built ones that repeats a failure's compiler messages into that section's own log:
        # one broken file must not hide the others.
        keep_going = ["-k", "0"] if shutil.which("ninja") else ["-k"]  # ninja needs the count, make takes none
        # The compiler runs fenced in as the programs do (writing only the grade folder, no network)
        # where the grader sandboxes; the configure above runs the repository's own CMake files.
        fence = (lambda cmd: sandbox_command(cmd, Path(labs_dir).parent)) if self.sandbox else (lambda cmd: cmd)
        build_step(fence(["cmake", "--build", str(build_dir), "--target", *(f"lab_{s}" for s in names),
                          "--parallel", str(self.build_threads), "--", *keep_going]), self.cmake_env())
        results = {}
        allowed = self.allowed_dirs(Path(labs_dir).parent, build_dir)
        source = {name: s for s, name in unit_tests.items()}
        for s in names:
            lab_file = f"labs/{source.get(s, s)}.cu"
            # a unit-test program's own source and headers are the course's tests/
            readable = allowed + [(self.root / "tests").resolve()] if s in source else allowed
            code, log = build_step(fence(["cmake", "--build", str(build_dir), "--target", f"lab_{s}", "--parallel",
                                          str(self.build_threads)]), self.cmake_env())
            # What the compiler read, not what the #include lines spell (a macro, a relative path
            # through common/): a file from outside the submission and the lab's headers is a
            # compile error, and a failed build quotes no line of such a file.
            if code == 0:
                deps = read_dependencies(build_dir, s)
                if deps is None:  # ok None: compiled, unchecked (GRADER_PROBLEM)
                    results[s] = (None, f"{lab_file} compiled, but the compiler's list of the files it read was "
                                        f"not found in {build_dir}: a problem of the grader, not of the file\n")
                    continue
                outside = outside_of(deps, readable, build_dir)
            else:
                outside = diagnostic_outside(log, readable, build_dir)
            if outside and code == 0:  # a program built from that file is not the student's: none is kept
                (Path(build_dir) / "bin" / f"lab_{s}").unlink(missing_ok=True)
            results[s] = (False, f"{lab_file}: error: reads a file outside the submission: {outside}\n") if outside \
                else (code == 0, log)
        return results

    def allowed_dirs(self, out, build_dir):
        """The folders a submission's build may read: its grade folder, the harness (common/, the
        vendored .deps/, the prebuilt library's folder), the include folders the build itself names
        (the CUDA toolkit's, NCCL's) and the compilers' own (system headers), resolved. A folder
        that holds the repository (solutions/ among it) is never one."""
        build_dir = Path(build_dir)
        dirs = [Path(out), self.root / "common", self.root / ".deps"]
        if self.harness:
            dirs.append(Path(self.harness).parent)
        try:
            for entry in json.loads((build_dir / "compile_commands.json").read_text()):
                dirs += [build_dir / d for d in include_dirs(entry.get("command", ""))]
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # none written: the folders above and the compilers' own
        for found in build_dir.glob("CMakeFiles/*/CMake*Compiler.cmake"):
            for listed in re.findall(r'_IMPLICIT_INCLUDE_DIRECTORIES "([^"]*)"', found.read_text(errors="replace")):
                dirs += [Path(d) for d in listed.split(";") if d]
        cache = build_dir / "CMakeCache.txt"
        nvcc = re.search(r"^CMAKE_CUDA_COMPILER:\w+=(.+)$", cache.read_text(errors="replace"), re.M) if cache.is_file() else None
        if nvcc:
            dirs.append(Path(nvcc.group(1).strip()).resolve().parent.parent)  # the toolkit: bin/..
        root = self.root.resolve()
        allowed = []
        for d in dirs:
            real = Path(os.path.realpath(d))
            if real != root and real not in root.parents and real not in allowed:
                allowed.append(real)
        return allowed

    def unseen(self, workdir):
        """The folders a student's program must not read, though every other file is readable in
        the sandbox: the answers (solutions/, which a Python lab could import, and ch12/key/) and
        the class's other grades (a classmate's graded copy); never one holding the repository."""
        root = self.root.resolve()
        folders = [root / "solutions", root / "ch12" / "key", Path(workdir).resolve().parent]
        return [f for f in folders if f.is_dir() and f != root and f not in root.parents]

    def launch(self, cmd, device, workdir, student=True):
        """The command line of one run: on its GPU, fenced in where the grader sandboxes (the
        student's program blind to unseen(); the solution's, run for comparison, not)."""
        cmd = self.on_device(cmd, device)
        if not self.sandbox:
            return cmd
        return sandbox_command(cmd, workdir, self.unseen(workdir) if student else ())

    def run_case(self, exe, variant, args, timeout, workdir, n=0, student=True, cpu_model=False):
        """Runs one case (cpu_model: its CPU model, --cpu); the verdict comes from the exit code and
        the run's result record."""
        rec = workdir / f"record-{n}.json"  # one per run: several may run at once
        rec.unlink(missing_ok=True)
        cmd = list(exe) + ["--variant", variant, "--iters", "0", "--json", rec] + args + (["--cpu"] if cpu_model else [])
        code, out, secs = self.run_limited(self.launch(cmd, self.devices[n % len(self.devices)], workdir, student),
                                           timeout)
        record_ok = False
        if rec.exists():
            try:
                r = json.loads(rec.read_text())[-1]
                record_ok = record_passed(r, cpu_model)
                out += "\n" + r["check"].get("verdict", "")  # "output not written: ..." and the like
            except (ValueError, KeyError, IndexError, TypeError):
                record_ok = False
            rec.unlink()
        return code, out, secs, record_ok

    def median_ms(self, exe, variant, args, timeout, workdir, student=True):
        rec = workdir / "perf.json"
        rec.unlink(missing_ok=True)
        cmd = perf_command(exe, variant, args, rec)
        code, out, _ = self.run_limited(self.launch(cmd, self.devices[0], workdir, student), timeout)  # alone on its GPU
        if code != 0 or not rec.exists():
            return None
        try:  # the graded variant's record: a run may add others (10's --against-07 adds 07's kernel)
            return [r for r in json.loads(rec.read_text()) if r.get("variant") == variant][-1]["timing"]["median_ms"]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return None

    def unit_test_program(self, section):
        """The name of a section's exercise unit-test program (its case file's unit_tests), or None."""
        return self.load_cases(section, None).get("unit_tests") if self.load_cases else None

    def unit_test_case(self, staged, section, timeout):
        """The run of a section's exercise unit-test program (its case file's unit_tests, built from
        the student's file), as a case: it passes where the program exits 0 saying PASS. It tests
        what the section's kernels may never call (06's allocator). Its weight is set by run()."""
        out, program = staged["out"], staged["unit_tests"][section]
        ok, log = staged["tests_built"].get(section, (False, "not built\n"))
        (out / f"build-{program}.log").write_text(log)
        case = {"case": UNIT_TESTS, "variant": "-", "weight": 0, "rerun": f"build/bin/lab_{program}"}
        if not ok:  # the lab compiled, but not with the tests: a function's signature changed
            paths = [(str(staged["labs_dir"]) + "/", "labs/"), (str(out) + "/", "")]
            return dict(case, status="does not compile with the unit tests", exit=None, seconds=0.0,
                        log_excerpt=compiler_excerpt(log, paths=paths))
        exe = Path(out) / "build" / "bin" / f"lab_{program}"
        code, text, secs = self.run_limited(self.launch([exe], self.devices[0], out), timeout)
        if code == 0 and re.search(r"^PASS: ", text, re.M):
            status = "pass"
        elif code == 1 and re.search(r"^FAIL: ", text, re.M):
            status = "failed its checks"
        else:
            status = classify(code, text, False, sandboxed=bool(self.sandbox))
        return dict(case, status=status, exit=code, seconds=round(secs, 2),
                    log_excerpt=crash_excerpt(code, text, bool(self.sandbox), 8))

    def grade(self, submission, out_root, known_sections, only_sections, hidden, timeout, on_gpu, gpu_name, sha, progress,
              name=None, cpu_model=False):
        """Grades one submission into out_root/name (default: its folder's name; plan_outputs
        chooses it and checks it may be replaced); returns its report."""
        return self.run(self.build(submission, out_root, known_sections, only_sections, name), hidden, timeout, on_gpu,
                        gpu_name, sha, progress, cpu_model)

    def build(self, submission, out_root, known_sections, only_sections, name=None):
        """The half of grading that needs no GPU: the grade folder made anew, the lab files copied in,
        the graded sections compiled (a Python lab parsed). Several submissions may build at once;
        returns what run() needs."""
        submission = Path(submission).resolve()
        name = name or submission.name
        out = Path(out_root).resolve() / name
        if out.exists():
            if out.is_symlink() or not out.is_dir() or (any(out.iterdir()) and not is_grade_folder(out)):
                raise ValueError(f"{out} is not a grade: not replaced")  # plan_outputs refuses it first
            # before anything else: a grading cut short from here on leaves the last grade's reports
            # with no mark, never taken by --resume for finished and unchanged
            (out / COMPLETE).unlink(missing_ok=True)
            for entry in out.iterdir():  # the last grade's reports stay until run() writes new ones:
                if entry.name not in REPORTS:  # a class whose runs are cut short keeps its grades
                    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        labs_dir = out / "labs"
        labs_dir.mkdir(parents=True)
        (out / MARKER).touch()
        files, ignored, notes, intake = (submission_notes(submission, known_sections,
                                                          lambda path, s: handed_in_stub(self, path, s))
                                         if submission.is_dir()
                                         else ({}, [], [], []))
        graded = only_sections or sorted(files)
        # the files as they are now, before they are copied: what --resume compares a later class with
        report = {"submission": name, "path": str(submission), "time_utc": None, "git_sha": None, "gpu": None,
                  "ignored_files": ignored, "graded_sections": graded, "sections": {}, "bonus_tiers": BONUS_TIERS,
                  "misnamed": notes, "intake": intake, "lab_files": lab_digests(files, submission)}
        if not submission.is_dir():
            report["error"] = "not a folder"
        refused = {s: why for s in files if (why := refused_file(files[s], submission))}
        for s in files:  # under its lab's name, whatever name it was handed in under (scan_submission)
            if s not in refused:
                copy = labs_dir / f"{s}{lab_suffix(s)}"
                shutil.copy(files[s], copy)
                if is_utf16(copy.read_bytes()) and not is_utf16(text := normalised(copy.read_bytes())):
                    copy.write_bytes(text)  # compiled as the UTF-8 text it holds
                    intake.append(f"{files[s].relative_to(submission).as_posix()} was saved as UTF-16; graded "
                                  "as its UTF-8 text (save it as UTF-8)")
        files = {s: labs_dir / f"{s}{lab_suffix(s)}" for s in files}  # a refused one is never there
        # another section's code under this one's name (01's handed in as 02_v1_tile.cu): said so, not
        # built (its compile would show linker errors alone)
        holds = {s: other for s in graded if s in files and s not in refused
                 and (other := section_named(files[s], known_sections)) not in (None, s)}
        present = [s for s in graded if s in files and s not in refused and s not in holds]
        compiled = [s for s in present if files[s].suffix == ".cu"]  # a Python lab is only parsed
        # compiled where the build tools read its path right: the grade folder, else a folder of --out
        # named by a slug, whose copies are checked and built as the grade folder's would be
        work = out if build_safe(out) else Path(out_root).resolve() / BUILDS / build_slug(name)
        work_labs = work / "labs"
        if work != out and compiled:
            shutil.rmtree(work, ignore_errors=True)
            work_labs.mkdir(parents=True)
            (work.parent / MARKER).touch()
            for s in compiled:
                shutil.copy(labs_dir / files[s].name, work_labs / files[s].name)
        outside = {s: outside_include(work_labs / files[s].name, work) for s in compiled}
        # 06 builds on 05's kernel, 07 and 12 on 08's: without that lab file, the section is not built
        needs = {s: lab for s in compiled
                 if not outside[s] and (lab := missing_lab(work_labs / files[s].name, known_sections))}
        inside = [s for s in compiled if not outside[s] and s not in needs]
        unit_tests = {s: name for s in inside if (name := self.unit_test_program(s))}
        built = self.build_submission(work_labs, work / "build", inside, unit_tests) if inside else {}
        if work != out:  # its programs to the grade folder, its logs naming the grade folder's files
            if (work / "build" / "bin").is_dir():
                (out / "build").mkdir()
                (work / "build" / "bin").rename(out / "build" / "bin")
            built = {s: (ok, log.replace(str(work) + "/", str(out) + "/")) for s, (ok, log) in built.items()}
            shutil.rmtree(work, ignore_errors=True)
        tests_built = {s: built.pop(name) for s, name in unit_tests.items() if name in built}
        built.update({s: (False, f"labs/{files[s].name}: error: {needs_text(s, needs[s])}\n") for s in needs})
        built.update({s: (False, f'labs/{files[s].name}: error: #include "{outside[s]}" reads a file outside the '
                                 'submission; only its own lab files and the lab\'s headers are allowed\n')
                      for s in compiled if outside[s]})
        prune_build(out / "build")
        built.update({s: python_syntax(files[s]) for s in present if s not in compiled})
        built.update({s: (False, f"labs/{files[s].name}: error: {refused[s]}\n") for s in graded if s in refused})
        built.update({s: (False, f"labs/{files[s].name}: error: {holds_text(files[s].name, holds[s])}\n") for s in holds})
        return {"report": report, "out": out, "labs_dir": labs_dir, "files": files, "built": built, "refused": refused,
                "needs": needs, "holds": holds, "tests_built": tests_built, "unit_tests": unit_tests}

    def run(self, staged, hidden, timeout, on_gpu, gpu_name, sha, progress, cpu_model=False):
        """The other half, one submission at a time (its cases and its timing have the GPU to
        themselves): the cases of every section that compiled, the speed bonus, the reports.
        cpu_model (--cpu, on_gpu False): the cases the CPU model runs, run on it, for a
        provisional grade (CPU_MODEL)."""
        report, out, labs_dir, files, built = (staged[k] for k in ("report", "out", "labs_dir", "files", "built"))
        name, graded = report["submission"], report["graded_sections"]
        cpu_model = cpu_model and not on_gpu
        report.update(time_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), git_sha=sha,
                      gpu=gpu_name if on_gpu else CPU_MODEL if cpu_model else None, sandboxed=bool(self.sandbox),
                      hidden_cases_sha256=file_digest(hidden) if hidden else None, timeout_s=timeout,
                      grading_files=self.grading_files())
        # the compiler names the file by the grader's path; the student knows it as labs/NN_name.cu
        paths = [(str(labs_dir) + "/", "labs/"), (str(out) + "/", "")]
        for s in graded:
            sec = {"status": "missing", "correctness": 0.0, "cases": [], "weight_total": 0, "weight_passed": 0}
            report["sections"][s] = sec
            if s not in files:
                continue
            # a refused file (a link, an empty one) is not read through: it has no edits to name
            sec["unmodified_stub"] = s not in staged.get("refused", {}) and self.is_stub(files[s], s)
            if s in staged.get("holds", {}):  # another section's file: its "edits" of this stub are all of it
                sec["holds_section"] = staged["holds"][s]
            elif not sec["unmodified_stub"] and s not in staged.get("refused", {}):
                sec.update(self.forgery_checks(files[s], s))
                copy = self.solution_copy(files[s], s)
                if copy:  # for the instructor: grade.md, the student's, names no file of solutions/
                    sec["identical_to_solution"] = copy
                    progress(f"{name}: {s}: identical to the solution ({copy})")
            ok, log = built[s]
            (out / f"build-{s}.log").write_text(log)
            review = review_reasons(sec) if ok is not False else None  # (a file that does not build runs nothing)
            if review:  # the score stands as computed: the instructor decides
                sec["review"] = review
                if not sec.get("identical_to_solution"):
                    progress(f"{name}: {s}: FOR REVIEW: {review} (named in its grade.md)")
            if ok is None:
                sec.update(status=GRADER_PROBLEM, correctness=None, log_excerpt=compiler_excerpt(log, paths=paths))
                progress(f"{name}: {s}: compiled, but {GRADER_PROBLEM}: {sec['log_excerpt']}")
                continue
            if not ok:
                empty = staged.get("refused", {}).get(s) == EMPTY_FILE
                sec.update(status=EMPTY_FILE if empty else "compile error", log_excerpt=compiler_excerpt(log, paths=paths))
                if s in staged.get("needs", {}):
                    sec["needs_lab"] = staged["needs"][s]
                progress(f"{name}: {s}: {sec['status']}" +
                         (f" ({needs_text(s, sec['needs_lab'])})" if "needs_lab" in sec else
                          f" ({holds_text(files[s].name, sec['holds_section'])})" if "holds_section" in sec else ""))
                continue
            if sec["unmodified_stub"]:  # a known 0: its cases are not run
                sec.update(status=CPU_GRADED if cpu_model else "graded" if on_gpu else NOT_RUN,
                           correctness=0.0 if on_gpu or cpu_model else None)
                progress(f"{name}: {s}: unmodified stub: 0, its cases not run")
                continue
            if cpu_model and s in self.not_on_cpu:
                sec.update(status=CPU_NOT_CHECKED, correctness=None, cpu_note=self.not_on_cpu[s])
                progress(f"{name}: {s}: compiled; {CPU_NOT_CHECKED}: {self.not_on_cpu[s]}")
                continue
            # the exercises' unit tests run on the CPU: with or without a GPU
            has_unit = s in staged.get("unit_tests", {})
            data = self.load_cases(s, hidden) if on_gpu or cpu_model or has_unit else {}
            # on the CPU model, the runs `scripts/lab check` makes without a GPU: no `cpu: false` case,
            # only the section's cpu_variants
            every = lambda gpu: [r for r in self.expand_cases(data, False, False, gpu) if r[3] == "pass"] if data else []
            runs = every(not cpu_model)
            if cpu_model:
                sec["gpu_only_runs"] = len(every(True)) - len(runs)
                progress(f"{name}: {s}: {len(runs)} run{'s' if len(runs) != 1 else ''} on the CPU model"
                         + (f"; {sec['gpu_only_runs']} GPU-only run{'s' if sec['gpu_only_runs'] > 1 else ''} of the "
                            "case list skipped" if sec["gpu_only_runs"] else ""))
            limit = min(timeout, data.get("timeout_s", timeout))
            unit = self.unit_test_case(staged, s, limit) if has_unit else None
            if unit:
                progress(f"{name}: {s}: {unit['case']}: {unit['status']}")
            if not on_gpu and not cpu_model:
                sec["status"] = NOT_RUN
                sec["correctness"] = None
                if unit:
                    sec["cases"].append(dict(unit, weight=unit_tests_weight(sum(r[4] for r in runs))))
                progress(f"{name}: {s}: compiled; no GPU, {'the other ' if unit else ''}cases not run")
                continue
            exe = self.program(s, False, out / "build", labs_dir)
            case_names = list(dict.fromkeys(r[0] for r in runs))  # a case's variants are one position
            watch = HangWatch(HUNG_CASES)

            def run_one(case, variant, args, n):
                if watch.stopped():
                    return None
                result = self.run_case(exe, variant, args, limit, out, n, cpu_model=cpu_model)
                watch.ended(case_names.index(case), result[0] == 124)
                return result
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs)
            jobs = [pool.submit(run_one, case, variant, args, n) for n, (case, variant, args, _, _) in enumerate(runs, 1)]
            for n, ((case, variant, args, _, weight), job) in enumerate(zip(runs, jobs), 1):
                result = job.result()
                if result is None:
                    hung = ", ".join(case_names[i] for i in watch.hung)
                    code, text_out, secs, status = None, (f"not run: the runs of {hung} timed out, one "
                                                          "case after another: it hangs"), 0.0, AFTER_HANGS
                else:
                    code, text_out, secs, record_ok = result
                    status = classify(code, text_out, record_ok, cpu_model, bool(self.sandbox))
                if status == "cannot run here" and on_gpu:
                    solution = self.program(s, True, self.ref_build)
                    if self.run_case(solution, variant, args, limit, out, n, student=False)[0] == 77:
                        status = NOT_ON_THIS_GPU  # the solution cannot either (a Hopper-only variant): not counted
                sec["cases"].append({"case": case, "variant": variant, "weight": weight, "status": status, "exit": code,
                                     "seconds": round(secs, 2),
                                     "log_excerpt": crash_excerpt(code, text_out, bool(self.sandbox))})
                if status not in PASSED and not case.startswith(HIDDEN):  # a hidden case's arguments stay hidden
                    sec["cases"][-1]["rerun"] = student_command(s, files[s].suffix, variant, args, cpu_model)
                sec["weight_total"] += weight if status not in UNCOUNTED else 0
                sec["weight_passed"] += weight if status in PASSED else 0
                progress(f"{name}: {s} [{n}/{len(runs)}] {status:<12} {variant} {case}")
            pool.shutdown()
            if cpu_model and not sec["weight_total"]:  # every run needs a GPU for its exercise part, or none ran
                why = next((m.group(1).rstrip(".") for c in sec["cases"] if c["status"] == GPU_ONLY_PART
                            for m in [re.search(r"^not checked here: *(?:needs a GPU: *)?(.+)$", c["log_excerpt"], re.M)]
                            if m), None)
                sec.update(status=CPU_NOT_CHECKED, correctness=None,
                           cpu_note=f"every case's exercise part needs a GPU ({why})" if why else
                           "every case of its list needs a GPU" if not runs else "no case was counted")
                if unit:
                    sec["cases"].insert(0, unit)
                progress(f"{name}: {s}: {CPU_NOT_CHECKED}: {sec['cpu_note']}")
                continue
            if unit:  # a share of the section, whatever its number of cases (unit_tests_weight)
                unit["weight"] = unit_tests_weight(sec["weight_total"])
                sec["cases"].insert(0, unit)
                sec["weight_total"] += unit["weight"]
                sec["weight_passed"] += unit["weight"] if unit["status"] == "pass" else 0
            sec["correctness"] = 100.0 * sec["weight_passed"] / sec["weight_total"] if sec["weight_total"] else 0.0
            sec["status"] = CPU_GRADED if cpu_model else "graded"
            if cpu_model:
                in_part = sum(c["status"] == GPU_ONLY_PART for c in sec["cases"])
                progress(f"{name}: {s}: {sec['correctness']:.1f}% on the CPU model (provisional)"
                         + (f"; {in_part} run{'s' if in_part > 1 else ''}: {GPU_ONLY_PART}, not counted"
                            if in_part else ""))
            perf = perf_shape(data) if on_gpu else None
            if sec["correctness"] == 100.0 and perf:
                variant, args = perf
                mine = self.median_ms(exe, variant, args, limit, out)
                ref = self.median_ms(self.program(s, True, self.ref_build), variant, args, limit, out, student=False)
                sec["speed_ratio"] = (ref / mine) if mine and ref else None
                sec["perf_shape"] = {"variant": variant, "args": args, "student_ms": mine, "solution_ms": ref}
                sec["bonus"] = bonus_for(sec["speed_ratio"])
                progress(f"{name}: {s} performance: {millis(mine)} vs solution {millis(ref)} -> bonus {sec['bonus']}")
        # "not run" only where a section was not run: a file that does not compile is a known 0
        scores = [section_score(report["sections"][s]) for s in graded]
        report["total"] = None if None in scores else (sum(scores) / len(scores) if scores else 0.0)
        # Triton's and CUDA's caches of one submission reach 170 MB: 200 of them would fill a disk
        shutil.rmtree(out / SCRATCH, ignore_errors=True)
        write_reports(report, out)
        mark_complete(out)  # last: only now is this grade finished
        return report
