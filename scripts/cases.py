"""Case files: the one list of what `scripts/lab check` (students) and `scripts/lab grade`
(instructors) run for a section. One JSON file per section, tests/cases/NN_name.json:

  section     "01_naive": the program the cases run (solutions/01_naive.cu, labs/01_naive.cu)
  variants    the section's variants; a case runs once per variant unless it lists its own
  cpu_variants optional: the variants a check without a GPU runs (their CPU models run different
              code of the student's: 05's split runs the merge that single never needs); default:
              the first variant (the others' CPU models are the same algorithm)
  gpu_exercises optional: the exercises only a GPU runs (the CPU model skips them: 04's mma ones,
              08's protocol past ring-slot); a check without a GPU names them apart when still
              the stub, since its failure cannot come from them
  unit_tests  optional: a test program of the section's exercises (tests/), built for the lab as
              lab_<name> and for the solution as <name>; `check` runs it first, on any machine
  timeout_s   optional: seconds a graded run may take before it counts as a hang (scripts/lab grade
              takes the smaller of it and --timeout; check takes --timeout alone)
  cases       [{name, args: [...], weight (default 1), cpu (default true), variants (optional)}]
              must PASS the self-check (exit 0); `cpu: false` = skipped by the CPU model (too slow)
  bad_inputs  [{name, args}]: must be refused with exit 2 and a one-line reason, before any GPU work
  bugs        [{bug, name, args}]: run on the solution with --bug, must FAIL the self-check (exit 1)
  bench       [{args, variants, tag, expect, quick}]: the sweep of `scripts/lab bench`; entries with a
              `tag` run only with `bench --tag TAG` (e.g. an error sweep with a --bug: `expect: "fail"`);
              `bench --quick` runs the entries marked `quick: true` (else the first); a tagged entry
              may name another section's `program` (with its `variants`) to time it on this
              section's shape in the same run (09's exercise 4: 04 and 08 beside Triton)
  baselines   [spec]: library baselines for the bench (scripts/baselines.py --spec)
  baseline_tags optional [tag]: `bench --tag` studies that time the baselines too (studies on the
              sweep's shapes); other studies run without them
  grade_perf  optional {args, variants}: the shape the grader times against the solution
  sanitize    optional {args | shapes, variants}: the small shape (args) or shapes (a list of args
              lists) compute-sanitizer runs (default: ragged causal
              T=67/131) and on which variants (default: all)
  ncu         optional {args, variants}: the shape `bench --ncu` measures DRAM bytes on
  compare     optional [{args, variants}]: the shapes `scripts/lab compare` times the section on
              (default: its untagged bench entries); the first variant listed (else the section's)

An instructor's hidden case file has the same format (a `section` and `cases`, optionally
`variants`); `--cases FILE` adds its cases to the section's own.
"""
import json
from pathlib import Path

KNOWN_KEYS = {"section", "about", "variants", "cpu_variants", "gpu_exercises", "unit_tests", "timeout_s", "cases",
              "bad_inputs", "bugs", "bench", "baselines", "grade_perf", "sanitize", "ncu", "compare", "baseline_tags"}
CASE_KEYS = {"name", "args", "weight", "cpu", "variants"}


class CaseFileError(Exception):
    pass


def _strings(x):
    return isinstance(x, list) and all(isinstance(a, str) for a in x)


def validate(data, where="case file"):
    """Raises CaseFileError naming the first problem found."""
    def bad(msg):
        raise CaseFileError(f"{where}: {msg}")
    if not isinstance(data, dict):
        bad("expected a JSON object")
    for key in ("section", "cases"):
        if key not in data:
            bad(f"missing '{key}'")
    unknown = set(data) - KNOWN_KEYS
    if unknown:
        bad(f"unknown key '{sorted(unknown)[0]}' (known: {', '.join(sorted(KNOWN_KEYS))})")
    if not isinstance(data["section"], str) or not data["section"][:2].isdigit():
        bad("'section' must be a section name like \"01_naive\"")
    if "variants" in data and (not _strings(data["variants"]) or not data["variants"]):
        bad("'variants' must be a non-empty list of strings")
    if "cpu_variants" in data and (not _strings(data["cpu_variants"]) or not data["cpu_variants"]
                                   or not set(data["cpu_variants"]) <= set(data.get("variants", data["cpu_variants"]))):
        bad("'cpu_variants' must be a non-empty list of the section's variants")
    if "gpu_exercises" in data and not (_strings(data["gpu_exercises"]) and data["gpu_exercises"]):
        bad("'gpu_exercises' must be a non-empty list of exercise names, like \"mma-online-softmax\"")
    if "unit_tests" in data and not (isinstance(data["unit_tests"], str) and data["unit_tests"].isidentifier()):
        bad("'unit_tests' must be the name of a test program, like \"exercises_05_decode\"")
    if "timeout_s" in data and not (isinstance(data["timeout_s"], (int, float)) and data["timeout_s"] > 0):
        bad("'timeout_s' must be a positive number")
    san = data.get("sanitize", {})
    if "args" in san and "shapes" in san:
        bad("'sanitize': give 'args' (one shape) or 'shapes' (several), not both")
    if "shapes" in san and (not isinstance(san["shapes"], list) or not san["shapes"]
                            or not all(_strings(x) for x in san["shapes"])):
        bad("'sanitize': 'shapes' must be a non-empty list of lists of strings")
    for group in ("bench", "compare"):
        items = data.get(group, [])
        if not isinstance(items, list) or not all(isinstance(e, dict) and _strings(e.get("args")) for e in items):
            bad(f"'{group}' must be a list of objects each with 'args', a list of strings")
    for n, e in enumerate(data.get("bench", [])):
        if "program" in e:
            other = e["program"]
            if not (isinstance(other, str) and other[:2].isdigit() and e.get("tag") and _strings(e.get("variants"))
                    and e["variants"]):
                bad(f"bench[{n}]: 'program' (another section's program on this shape) needs a section name, a 'tag' "
                    "and its 'variants'")
            if where.endswith(".json") and not (Path(where).parent / f"{other}.json").exists():
                bad(f"bench[{n}]: 'program' names no section: {other}")
    tags = data.get("baseline_tags", [])
    if not _strings(tags) or not set(tags) <= {e.get("tag") for e in data.get("bench", [])}:
        bad("'baseline_tags' must be a list of tags that bench entries carry")
    names = set()
    for group in ("cases", "bad_inputs", "bugs"):
        items = data.get(group, [])
        if not isinstance(items, list):
            bad(f"'{group}' must be a list")
        for n, case in enumerate(items):
            at = f"{group}[{n}]"
            if not isinstance(case, dict):
                bad(f"{at}: expected an object")
            if not isinstance(case.get("name"), str) or not case["name"]:
                bad(f"{at}: missing 'name'")
            at = f"{group}[{n}] '{case['name']}'"
            if group == "cases":
                extra = set(case) - CASE_KEYS
                if extra:
                    bad(f"{at}: unknown key '{sorted(extra)[0]}'")
            if not _strings(case.get("args", [])):
                bad(f"{at}: 'args' must be a list of strings (write numbers as \"64\")")
            if "weight" in case and not (isinstance(case["weight"], (int, float)) and case["weight"] > 0):
                bad(f"{at}: 'weight' must be a positive number")
            if "variants" in case and not _strings(case["variants"]):
                bad(f"{at}: 'variants' must be a list of strings")
            if group == "bugs" and not isinstance(case.get("bug"), str):
                bad(f"{at}: missing 'bug'")
            key = (group, case.get("bug"), case["name"])  # a bug case is named "bug BUG: NAME"
            if key in names:
                bad(f"{at}: duplicate name")
            names.add(key)
    return data


DEFAULT_SANITIZE_SHAPE = ["--t", "67", "--t-kv", "131", "--causal", "--h", "2"]  # small, ragged, causal


def sanitize_shapes(data):
    """The argument lists compute-sanitizer runs a section with (its case file's, else the default)."""
    san = data.get("sanitize", {})
    return san.get("shapes") or [san.get("args", DEFAULT_SANITIZE_SHAPE)]


def load(path):
    path = Path(path)
    if not path.exists():
        raise CaseFileError(f"no case file {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CaseFileError(f"{path}: not valid JSON: {e.msg} (line {e.lineno})")
    return validate(data, str(path))


def merge_hidden(data, hidden):
    """The section's case list plus an instructor's hidden cases for the same section."""
    if hidden["section"] != data["section"]:
        return data
    merged = dict(data)
    merged["cases"] = data["cases"] + [dict(c, name="hidden: " + c["name"]) for c in hidden["cases"]]
    return merged
