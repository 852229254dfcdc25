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


def check_writable(path):
    """Bad input (exit 2, file untouched) unless `path` is a record list or can be created."""
    p = Path(path)
    if p.exists():
        try:
            data = json.loads(p.read_text() or "[]")
        except (OSError, ValueError) as e:
            raise BadInput(f"--json {path}: not a JSON record list ({e.__class__.__name__})")
        if not isinstance(data, list):
            raise BadInput(f"--json {path}: holds a JSON {type(data).__name__}, not a record list")
        if not os.access(p, os.W_OK):
            raise BadInput(f"--json {path}: cannot be written")
    elif not p.parent.is_dir():
        raise BadInput(f"--json {path}: folder {p.parent} does not exist")
    elif not os.access(p.parent, os.W_OK):
        raise BadInput(f"--json {path}: cannot create a file in {p.parent}")


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
    d.mkdir(parents=True, exist_ok=True)
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
