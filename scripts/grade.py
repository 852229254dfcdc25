"""The instructor's grader: `scripts/lab grade SUBMISSION_DIR...`.

A submission is a folder holding a student's versions of labs/NN_<name>.cu (or .py for a Python
section; any subset; directly in the folder or in a labs/ folder inside it). A path that does not
exist, or a folder without any lab file, is refused by `scripts/lab grade` (exit 2, nothing
written) unless --allow-empty; a file that looks like a misnamed lab is named in the report. For each submission the grader copies those files
into its own tree under --out (the student's code never touches the repository), builds them
against the repository's harness, and for each section:

  compile      a file that does not compile scores 0, with the compiler's first errors quoted
  stub check   a file identical to the generated stub is flagged "unmodified stub" (no GPU needed)
  correctness  the section's case list (tests/cases/NN_name.json, plus --cases hidden cases), each
               run with a time limit; a case scores its weight when the run exits 0 AND leaves a
               result record saying the check passed (so exiting early earns nothing)
  performance  only when correctness is 100%: the student's median time against the reference
               solution's on the section's grade_perf shape, measured in the same run:
               ratio = solution time / student time;  >= 0.9: +10 points;  >= 0.5: +5;  else +0

Section score = correctness (0-100) + bonus; the submission's total is the mean over the graded
sections (--sections, default: the sections the submission contains). Without a GPU (triage) no
case runs: every compiled section reads "not run (no GPU)", never a number. Outputs per submission
grade.json and grade.md, and class_summary.csv for the lot.
"""
import csv
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

BONUS_TIERS = [(0.9, 10), (0.5, 5)]  # (minimum speed ratio vs the solution, bonus points)
LAB_SUFFIXES = (".cu", ".py")
NOT_RUN = "not run (no GPU)"


def scan_submission(folder, known_sections):
    """{section: path} of the lab files in a submission, and the names of the files it ignores."""
    folder = Path(folder)
    roots = [folder / "labs", folder] if (folder / "labs").is_dir() else [folder]
    found, ignored = {}, []
    for root in roots:
        for f in sorted(root.iterdir()):
            if f.is_dir():
                if f.name != "labs":
                    ignored.append(f.name + "/")
                continue
            stem = f.stem if f.suffix == lab_suffix(f.stem) else None
            if stem in known_sections and stem not in found:
                found[stem] = f
            else:
                ignored.append(f.name if root == folder else f"{root.name}/{f.name}")
    return found, ignored


def lab_suffix(section):
    """.py for a Python section (its solution is solutions/NN_name.py), else .cu."""
    return ".py" if (Path(__file__).resolve().parent.parent / "solutions" / f"{section}.py").exists() else ".cu"


def misnamed(ignored, known_sections):
    """For each ignored .cu/.py file that looks like a section's lab under another name, one line:
    "naive.cu: not a lab file; expected labs/01_naive.cu"."""
    out = []
    for name in ignored:
        path = Path(name)
        if path.suffix not in LAB_SUFFIXES:
            continue
        words = set(re.split(r"[^a-z0-9]+", path.stem.lower())) - {""}
        for s in known_sections:
            parts = s.split("_")
            if path.stem.lower() == s.lower() or words & set(parts[1:]) or (words & {parts[0], parts[0].lstrip("0")}):
                out.append(f"{name}: not a lab file; expected labs/{s}{lab_suffix(s)}")
                break
    return out


def total_text(report):
    """The total as the class summary and the console show it."""
    if report["total"] is None:
        return NOT_RUN if report["graded_sections"] else "no lab file"
    return f"{report['total']:.1f}"


def compiler_excerpt(log, lines=8):
    """The first error lines of a build log (what a student needs to see)."""
    errs = [l for l in log.splitlines() if re.search(r"\berror\b", l, re.IGNORECASE)]
    pick = errs[:lines] if errs else log.strip().splitlines()[-lines:]
    return "\n".join(l[:240] for l in pick)


def run_excerpt(out, lines=6):
    return "\n".join(l[:240] for l in out.strip().splitlines()[-lines:])


def bonus_for(ratio):
    if ratio is None:
        return 0
    for threshold, points in BONUS_TIERS:
        if ratio >= threshold:
            return points
    return 0


def classify(code, out, record_ok):
    """What happened to one correctness run."""
    if code == 0 and record_ok:
        return "pass"
    if code == 0:
        return "exited early (no passing result record)"
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
    if code < 0:
        return f"crashed (signal {-code})"
    return f"exit {code}"


def section_score(sec):
    """The section's points, or None where its cases were not run (triage: no GPU)."""
    if sec["status"] == NOT_RUN:
        return None
    if sec["status"] != "graded":
        return 0.0
    return sec["correctness"] + sec.get("bonus", 0)


def score_text(sec, fmt="{:.1f}"):
    score = section_score(sec)
    return NOT_RUN if score is None else fmt.format(score)


def total_line(report):
    if not report["graded_sections"]:
        return "**Total: 0** — no lab file found (expected labs/NN_<name>.cu files, e.g. 01_naive.cu)."
    if report["total"] is None:
        return (f"**Total: {NOT_RUN}** — triage only: compile errors and unmodified stubs below; "
                "grade on a GPU machine for correctness and performance.")
    return (f"**Total: {report['total']:.1f}** (mean over {len(report['graded_sections'])} section(s): "
            f"{', '.join(report['graded_sections'])})")


def render_markdown(report):
    """grade.md from a grade.json report."""
    lines = [f"# Grade: {report['submission']}", "",
             f"Graded {report['time_utc']} at commit {report['git_sha']} on {report['gpu'] or 'no GPU (triage only)'}.", "",
             total_line(report), ""]
    for line in report.get("misnamed", []):
        lines += [f"- `{line.split(':')[0]}`:{line.split(':', 1)[1]}"]
    if report.get("misnamed"):
        lines.append("")
    if report["ignored_files"]:
        lines += ["Ignored files (not a lab of this course): " + ", ".join(f"`{f}`" for f in report["ignored_files"]), ""]
    lines += ["| section | status | correctness | speed vs solution | bonus | score |", "|---|---|---:|---:|---:|---:|"]
    for name in report["graded_sections"]:
        s = report["sections"][name]
        ratio = s.get("speed_ratio")
        run = s["status"] != NOT_RUN
        lines.append(f"| {name} | {s['status']}{' (unmodified stub)' if s.get('unmodified_stub') else ''} | "
                     f"{format(s['correctness'], '.0f') + '%' if run else NOT_RUN} | "
                     f"{'–' if ratio is None else f'{ratio:.2f}×'} | {s.get('bonus', 0) if run else '–'} | "
                     f"{score_text(s)} |")
    lines.append("")
    for name in report["graded_sections"]:
        s = report["sections"][name]
        lines += [f"## {name}", ""]
        if s["status"] == "missing":
            lines += ["Not in the submission: 0 points.", ""]
            continue
        if s["status"] == "compile error":
            lines += ["Does not compile: 0 points. The compiler said:", "", "```", s["log_excerpt"], "```", ""]
            continue
        if s.get("unmodified_stub"):
            lines += ["The file is the unmodified stub: no exercise was attempted.", ""]
        if s["status"] == "not run (no GPU)":
            lines += ["Compiled; cases not run (no GPU on the grading machine).", ""]
            continue
        failed = [c for c in s["cases"] if c["status"] != "pass"]
        lines += [f"{len(s['cases']) - len(failed)} of {len(s['cases'])} cases passed "
                  f"({s['weight_passed']:g} of {s['weight_total']:g} weight).", ""]
        if failed:
            lines += ["| case | variant | result | seconds |", "|---|---|---|---:|"]
            lines += [f"| {c['case']} | {c['variant']} | {c['status']} | {c['seconds']:.1f} |" for c in failed]
            lines.append("")
            first = failed[0]
            lines += [f"First failure, `{first['case']}` ({first['variant']}):", "", "```", first["log_excerpt"], "```", ""]
    return "\n".join(lines)


def write_reports(report, folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grade.json").write_text(json.dumps(report, indent=1) + "\n")
    (folder / "grade.md").write_text(render_markdown(report))


def write_class_summary(reports, path):
    sections = sorted({s for r in reports for s in r["graded_sections"]})
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["submission", "total"] + sections)
        for r in reports:
            w.writerow([r["submission"], total_text(r)] +
                       [score_text(r["sections"][s]) if s in r["sections"] else "" for s in sections])


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


class Grader:
    """Holds what every submission shares: the repository, the reference build, the run helper."""

    def __init__(self, root, ref_build, run_limited, make_stub, load_cases, expand_cases, cmake_env, say, jobs=1,
                 devices=(None,), on_device=lambda cmd, device: cmd, program=None):
        self.root, self.ref_build = Path(root), Path(ref_build)
        self.run_limited, self.make_stub, self.load_cases = run_limited, make_stub, load_cases
        self.expand_cases, self.cmake_env, self.say = expand_cases, cmake_env, say
        self.jobs = max(1, jobs)  # case runs at once (the timing runs stay one at a time)
        self.devices, self.on_device = list(devices), on_device  # case n runs on devices[n % len]
        # program(section, solution, build_dir, labs_dir): the command that runs a section's program
        self.program = program or (lambda s, solution, build_dir=None, labs_dir=None:
                                   [Path(build_dir or ref_build) / "bin" / (s if solution else f"lab_{s}")])

    def build_submission(self, labs_dir, build_dir, sections):
        """Configures a build of only the submitted labs; returns {section: (ok, log)}."""
        args = ["cmake", "-S", str(self.root), "-B", str(build_dir), "-DLAB_BUILD_TESTS=OFF", "-DLAB_BUILD_SOLUTIONS=OFF",
                f"-DLAB_LABS_DIR={labs_dir}", "-DCMAKE_BUILD_TYPE=Release"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if (self.root / ".deps" / "include").is_dir():  # a vendored copy (scripts/lab deps --vendor)
            args.append(f"-DCMAKE_PREFIX_PATH={self.root / '.deps'}")
        r = subprocess.run(args, capture_output=True, text=True, env=self.cmake_env())
        if r.returncode != 0:
            return {s: (False, r.stdout + r.stderr) for s in sections}
        # Every target at once, going on past failures (-k); then one target at a time, a no-op for
        # the built ones that repeats a failure's compiler messages into that section's own log:
        # one broken file must not hide the others.
        keep_going = ["-k", "0"] if shutil.which("ninja") else ["-k"]  # ninja needs the count, make takes none
        subprocess.run(["cmake", "--build", str(build_dir), "--parallel", str(os.cpu_count() or 2), "--", *keep_going],
                       capture_output=True, text=True, env=self.cmake_env())
        results = {}
        for s in sections:
            r = subprocess.run(["cmake", "--build", str(build_dir), "--target", f"lab_{s}", "--parallel", str(os.cpu_count() or 2)],
                               capture_output=True, text=True, env=self.cmake_env())
            results[s] = (r.returncode == 0, r.stdout + r.stderr)
        return results

    def run_case(self, exe, variant, args, timeout, workdir, n=0):
        """Runs one case; the verdict comes from the exit code and the run's result record."""
        rec = workdir / f"record-{n}.json"  # one per run: several may run at once
        rec.unlink(missing_ok=True)
        cmd = list(exe) + ["--variant", variant, "--iters", "0", "--json", rec] + args
        code, out, secs = self.run_limited(self.on_device(cmd, self.devices[n % len(self.devices)]), timeout)
        record_ok = False
        if rec.exists():
            try:
                r = json.loads(rec.read_text())[-1]
                record_ok = bool(r["check"]["passed"]) and r["check"]["rows_checked"] > 0 and r["build"] == "lab"
                out += "\n" + r["check"].get("verdict", "")  # "output not written: ..." and the like
            except (ValueError, KeyError, IndexError, TypeError):
                record_ok = False
            rec.unlink()
        return code, out, secs, record_ok

    def median_ms(self, exe, variant, args, timeout, workdir):
        rec = workdir / "perf.json"
        rec.unlink(missing_ok=True)
        cmd = perf_command(exe, variant, args, rec)
        code, out, _ = self.run_limited(self.on_device(cmd, self.devices[0]), timeout)  # alone on its GPU
        if code != 0 or not rec.exists():
            return None
        try:  # the graded variant's record: a run may add others (10's --against-07 adds 07's kernel)
            return [r for r in json.loads(rec.read_text()) if r.get("variant") == variant][-1]["timing"]["median_ms"]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return None

    def grade(self, submission, out_root, known_sections, only_sections, hidden, timeout, on_gpu, gpu_name, sha, progress):
        submission = Path(submission)
        name = submission.resolve().name
        out = Path(out_root) / name
        if out.exists():
            shutil.rmtree(out)
        labs_dir = out / "labs"
        labs_dir.mkdir(parents=True)
        files, ignored = scan_submission(submission, known_sections) if submission.is_dir() else ({}, [])
        graded = only_sections or sorted(files)
        report = {"submission": name, "path": str(submission), "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "git_sha": sha, "gpu": gpu_name if on_gpu else None, "ignored_files": ignored,
                  "graded_sections": graded, "sections": {}, "bonus_tiers": BONUS_TIERS,
                  "misnamed": misnamed(ignored, known_sections)}
        if not submission.is_dir():
            report["error"] = "not a folder"
        for s in files:
            shutil.copy(files[s], labs_dir / files[s].name)
        present = [s for s in graded if s in files]
        compiled = [s for s in present if files[s].suffix == ".cu"]  # a Python lab has nothing to build
        built = self.build_submission(labs_dir, out / "build", compiled) if compiled else {}
        built.update({s: (True, "") for s in present if s not in compiled})
        for s in graded:
            sec = {"status": "missing", "correctness": 0.0, "cases": [], "weight_total": 0, "weight_passed": 0}
            report["sections"][s] = sec
            if s not in files:
                continue
            text = files[s].read_text(errors="replace")
            solution = self.root / "solutions" / f"{s}{files[s].suffix}"
            stub = self.make_stub(solution.read_text(), solution.name) if solution.exists() else None
            sec["unmodified_stub"] = text == stub
            ok, log = built[s]
            (out / f"build-{s}.log").write_text(log)
            if not ok:
                sec.update(status="compile error", log_excerpt=compiler_excerpt(log))
                progress(f"{name}: {s}: compile error")
                continue
            if not on_gpu:
                sec["status"] = NOT_RUN
                sec["correctness"] = None
                progress(f"{name}: {s}: compiled{' (unmodified stub)' if sec['unmodified_stub'] else ''}; no GPU, cases not run")
                continue
            data = self.load_cases(s, hidden)
            runs = [r for r in self.expand_cases(data, False, False, True) if r[3] == "pass"]
            exe = self.program(s, False, out / "build", labs_dir)
            limit = min(timeout, data.get("timeout_s", timeout))
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.jobs)
            jobs = [pool.submit(self.run_case, exe, variant, args, limit, out, n) for n, (_, variant, args, _, _) in enumerate(runs, 1)]
            for n, ((case, variant, args, _, weight), job) in enumerate(zip(runs, jobs), 1):
                code, text_out, secs, record_ok = job.result()
                status = classify(code, text_out, record_ok)
                sec["cases"].append({"case": case, "variant": variant, "weight": weight, "status": status, "exit": code,
                                     "seconds": round(secs, 2), "log_excerpt": run_excerpt(text_out)})
                sec["weight_total"] += weight
                sec["weight_passed"] += weight if status == "pass" else 0
                progress(f"{name}: {s} [{n}/{len(runs)}] {status:<12} {variant} {case}")
            pool.shutdown()
            sec["correctness"] = 100.0 * sec["weight_passed"] / sec["weight_total"] if sec["weight_total"] else 0.0
            sec["status"] = "graded"
            perf = perf_shape(data)
            if sec["correctness"] == 100.0 and perf:
                variant, args = perf
                mine = self.median_ms(exe, variant, args, limit, out)
                ref = self.median_ms(self.program(s, True, self.ref_build), variant, args, limit, out)
                sec["speed_ratio"] = (ref / mine) if mine and ref else None
                sec["perf_shape"] = {"variant": variant, "args": args, "student_ms": mine, "solution_ms": ref}
                sec["bonus"] = bonus_for(sec["speed_ratio"])
                progress(f"{name}: {s} performance: {mine} ms vs solution {ref} ms -> bonus {sec['bonus']}")
        scores = [section_score(report["sections"][s]) for s in graded]
        report["total"] = None if None in scores or (not on_gpu and present) else (sum(scores) / len(scores) if scores else 0.0)
        write_reports(report, out)
        return report
