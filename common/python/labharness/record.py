"""The result record (schema v1, record.cpp's fields), appended atomically to a record list, and
the .npy dump (npy.cpp's files and meta.json)."""
import json
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from .options import BadInput

SCHEMA_VERSION = 1
REQUIRED = ["schema_version", "section", "variant", "build", "git_sha", "time_utc", "gpu", "gpu.name", "problem",
            "problem.b", "problem.h", "problem.h_kv", "problem.t_q", "problem.t_kv", "problem.d", "problem.dtype",
            "problem.causal", "problem.window", "problem.page_size", "check", "check.passed", "check.max_abs_err",
            "check.rel_l2_err", "check.ref_err_bound", "check.rule", "check.rows_checked", "timing",
            "timing.warmup", "timing.iters", "timing.median_ms", "timing.min_ms", "timing.max_ms", "metrics",
            "metrics.tflops", "metrics.hbm_gbps", "metrics.hbm_bytes_model", "metrics.extra_device_bytes",
            "command"]


def writable_path_problem(path, want_dir):
    """Why `path` cannot take the run's output ("" if it can), in record.cpp's words, so a Python
    section refuses what a C++ one refuses: a file where a folder is wanted, a missing parent folder
    (never created: a typo is not a new tree), an empty path, a kernel file system."""
    if not path:
        return "an empty path"
    a = os.path.realpath(os.path.abspath(path))
    for pseudo in ("/proc", "/sys", "/dev"):
        if a == pseudo or a.startswith(pseudo + "/"):
            return f"{path} is in {pseudo}, a kernel file system, not a place for files"
    if os.path.exists(a):
        if want_dir and not os.path.isdir(a):
            return f"{path} is a file, not a folder"
        if not want_dir and os.path.isdir(a):
            return f"{path} is a folder, not a file"
        if not want_dir and not os.path.isfile(a):
            return f"{path} is not a regular file"
        if not os.access(a, os.W_OK):
            return f"{path} is not writable"
        return ""
    parent = os.path.dirname(a)
    if not os.path.exists(parent):
        return f"folder {parent} does not exist"
    if not os.path.isdir(parent):
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"folder {parent} is not writable"
    return ""


def record_path_problem(path):
    """writable_path_problem for a record list, and an existing file must hold one (a user's other
    file is never appended to)."""
    why = writable_path_problem(path, want_dir=False)
    if why or not os.path.exists(path):
        return why
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return f"{path} is not readable"
    if not text.strip():
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    records = isinstance(data, list) and all(isinstance(r, dict) and "schema_version" in r and "section" in r
                                              for r in data)
    if not records:
        return f"{path} holds something other than a JSON list of records; it is left as it is (give another file)"
    return ""


def check_outputs(o):
    """--json and --dump before anything runs (bad input, exit 2): a run never ends by losing its
    record or its dump, nor by writing over a user's file. Given empty, each is bad input too."""
    if o.json is not None:
        why = record_path_problem(o.json)
        if why:
            raise BadInput(f"--json: {why}")
    if o.dump is not None:
        why = writable_path_problem(o.dump, want_dir=True)
        if why:
            raise BadInput(f"--dump: {why}")


def _finite(x):
    return x if x is None or (isinstance(x, (int, float)) and math.isfinite(x)) else None


def git_sha():
    sha = os.environ.get("LAB_GIT_SHA")
    if sha:
        return sha
    try:
        out = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def make(section, variant, build, gpu, problem, c, timing, metrics, command, bug=""):
    check = {k: c[k] for k in ("passed", "rule", "rows_checked", "unwritten", "verdict")}
    for k in ("max_abs_err", "rel_l2_err", "ref_err_bound", "lse_max_abs_err", "lse_err_bound"):
        check[k] = _finite(c[k])
    rec = {"schema_version": SCHEMA_VERSION, "section": section, "variant": variant, "build": build,
           "git_sha": git_sha(), "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "gpu": gpu,
           "problem": problem, "check": check, "timing": timing,
           "metrics": {k: _finite(v) if isinstance(v, float) else v for k, v in metrics.items()},
           "command": command}
    if bug:
        rec["bug"] = bug
    bad = validate(rec)
    if bad:
        raise RuntimeError(f"internal error: record fails its schema: {bad}")
    return rec


def validate(rec):
    for path in REQUIRED:
        node = rec
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                return f"field '{path}': missing"
            node = node[key]
    if rec["schema_version"] != SCHEMA_VERSION:
        return f"field 'schema_version': expected {SCHEMA_VERSION}"
    if rec["build"] not in ("solution", "lab", "cpu-model", "baseline"):
        return f"field 'build': unexpected '{rec['build']}'"
    return ""


def append(path, rec):
    """Appends to the record list at `path` atomically: a reader never sees half a file."""
    p = Path(path)
    data = json.loads(p.read_text() or "[]") if p.exists() else []
    data.append(rec)
    fd, tmp = tempfile.mkstemp(dir=str(p.parent) if str(p.parent) else ".", prefix=p.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, p)


def dump_npy(folder, p, qkv, out_o, out_lse, o, section, extra=None):
    d = Path(folder)
    d.mkdir(exist_ok=True)  # its parent exists: check_outputs saw to it
    q, k, v = qkv
    for name, a in (("q", q), ("k", k), ("v", v), ("o", out_o)):
        np.save(d / f"{name}.npy", np.ascontiguousarray(a, dtype=np.float32))
    if out_lse is not None:
        np.save(d / "lse.npy", np.ascontiguousarray(out_lse, dtype=np.float32))
    for name, a in (extra or {}).items():
        np.save(d / f"{name}.npy", a)
    meta = {"section": section, "variant": o.variant, "problem": p.json(), "softmax_scale": p.softmax_scale,
            "seed": o.seed,
            "layout": {"q": "[B, T_q, H, D]", "k": "[B, T_kv, H_kv, D]", "v": "[B, T_kv, H_kv, D]",
                       "o": "[B, T_q, H, D]", "lse": "[B, H, T_q], natural log"},
            "note": "values stored as float32; they are exact values of the problem's dtype. "
                    "Unwritten output elements are NaN (all-ones bits)."}
    (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
