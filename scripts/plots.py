"""PNG plots of a results folder (called by `scripts/lab tables`). Each plot is drawn only from
records that exist; a plot with nothing to show is skipped and named in the returned notes."""
from pathlib import Path

PREFILL_SECTIONS = ["01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "08_tma_skeleton"]


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _series(records, pick, x, y):
    """{label: [(x, y), ...]} sorted by x, for the records `pick` labels (None = leave out)."""
    out = {}
    for r in records:
        label = pick(r)
        if label is None:
            continue
        xv, yv = x(r), y(r)
        if xv is None or yv is None:
            continue
        out.setdefault(label, []).append((xv, yv))
    return {k: sorted(v) for k, v in sorted(out.items())}


def _draw(plt, series, title, xlabel, ylabel, path, logx=True, logy=False, extra=None):
    fig, ax = plt.subplots(figsize=(11, 5.5))
    colors = plt.get_cmap("tab20").colors  # 20 distinct colours: the default cycle repeats after 10
    for n, (label, pts) in enumerate(series.items()):
        style = "--" if "(baseline)" in label or "bound" in label else "-"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=label, color=colors[n % len(colors)])
    if extra:
        extra(ax)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def prefill_ladder(records, folder, plt):
    """TFLOP/s against T for the prefill ladder: non-causal, D = 64, fp32 and bf16, the SDPA
    backends dashed (eager attention is in the tables)."""
    def pick(r):
        p = r["problem"]
        if p["causal"] or p["t_q"] != p["t_kv"] or r["section"] not in PREFILL_SECTIONS or p["d"] != 64:
            return None
        if p["dtype"] not in ("fp32", "bf16") or (r["build"] == "baseline" and not r["variant"].startswith("sdpa")):
            return None
        tag = f"{r['section']} {r['variant']} {p['dtype']}" + (f" page={p['page_size']}" if p.get("page_size") else "")
        return tag + (" (baseline)" if r["build"] == "baseline" else "")
    s = _series(records, pick, lambda r: r["problem"]["t_q"], lambda r: r["metrics"].get("tflops"))
    if not s:
        return None
    path = Path(folder) / "prefill_tflops.png"
    _draw(plt, s, "Prefill: TFLOP/s vs sequence length (non-causal, D = 64)", "T", "TFLOP/s", path, logy=True)
    return path


def memory_vs_t(records, folder, plt):
    """Extra device memory against T for prefill (T_q = T_kv): S and P (naive) against the flash
    sections' O(T·D) or nothing. A log axis cannot show 0 bytes: those are drawn at 1 byte."""
    def pick(r):
        p = r["problem"]
        if r["build"] == "baseline" or p["causal"] or p["t_q"] != p["t_kv"] or p["t_q"] == 1:
            return None
        if r["metrics"].get("extra_device_bytes") is None:
            return None
        return f"{r['section']} {r['variant']} D={p['d']}"
    s = _series(records, pick, lambda r: r["problem"]["t_q"],
                lambda r: max(r["metrics"]["extra_device_bytes"], 1) / 1e6)
    if not s:
        return None
    path = Path(folder) / "memory_vs_t.png"
    _draw(plt, s, "Extra device memory vs T, prefill (beyond Q, K, V, O; 0 B drawn at 1 B)", "T", "MB", path, logy=True)
    return path


def decode_bandwidth(records, folder, plt, ceilings):
    def pick(r):
        p = r["problem"]
        if p["t_q"] != 1 or r["section"] not in ("05_decode", "06_paged"):
            return None
        if any(n != p["t_kv"] for n in p.get("kv_len") or []):
            return None  # a mixed-length batch is not a point on a kv_len axis (TABLES.md lists it)
        if r["build"] == "baseline" and r["section"] != "05_decode":
            return None  # SDPA has no paged path: 06's baselines are 05's calls again (TABLES.md lists them)
        page = f" page={p['page_size']}" if p.get("page_size") else ""
        return f"{r['section']} {r['variant']} B={p['b']}{page}" + (" (baseline)" if r["build"] == "baseline" else "")
    s = _series(records, pick, lambda r: r["problem"]["t_kv"], lambda r: r["metrics"].get("hbm_gbps"))
    if not s:
        return None
    path = Path(folder) / "decode_bandwidth.png"
    extra = (lambda ax: ax.axhline(ceilings["copy_gbps"], color="k", lw=1, ls=":", label="copy ceiling (read + write)")) if ceilings else None
    _draw(plt, s, "Decode: GB/s of K/V read vs kv_len", "kv_len", "GB/s", path, extra=extra)
    return path


def window_time(records, folder, plt):
    """Time against T of 07's variants with a window and without one (plain causal), the baselines,
    the ideal (window's own plain-causal time times the FLOP ratio (T·W - W²/2) / (T²/2)), and 08's
    Hopper kernel with 07's tile skip (`ws --window`) on the same shapes."""
    from tables import ideal_window_ratio

    def family(p):  # a problem up to its length and window
        return tuple(p.get(k) for k in ("b", "h", "h_kv", "d", "dtype", "causal"))
    sweep = {family(r["problem"]) for r in records if r["section"] == "07_sliding_window"}

    def pick(r):
        p = r["problem"]
        if p["t_q"] != p["t_kv"]:
            return None
        w = p.get("window")
        if r["section"] == "08_tma_skeleton":  # 08's ws on the shapes of 07's sweep
            if r["variant"] != "ws" or family(p) not in sweep:
                return None
            return "08 ws (Hopper) " + (f"W={w}" if w else "causal, no window")
        if r["section"] != "07_sliding_window":
            return None
        return f"{r['variant']} " + (f"W={w}" if w else "causal, no window") + (" (baseline)" if r["build"] == "baseline" else "")
    s = _series(records, pick, lambda r: r["problem"]["t_q"], lambda r: r["timing"].get("median_ms"))
    if not s:
        return None
    for label, pts in list(s.items()):  # the ideal line of each windowed series of ours
        if "(baseline)" in label or not label.startswith("window ") or "W=" not in label:
            continue
        w = int(label.split("W=")[1])
        causal = dict(s.get("window causal, no window", []))
        ideal = [(t, causal[t] * ideal_window_ratio(t, w)) for t, _ in pts if t in causal]
        if ideal:
            s[f"ideal W={w}: plain causal x (T·W - W²/2) / (T²/2)"] = ideal
    path = Path(folder) / "sliding_window_time.png"
    _draw(plt, s, "Sliding window: time vs T", "T", "ms", path, logy=True)
    return path


def fp16_accum_error(records, folder, plt):
    """04's accumulation sweep (bench 04 --tag accum-sweep: one shape family, T = 1k ... 32k): the
    error against fp64 with fp32 and with fp16 accumulation, and the bound the check holds it to."""
    sweep = [r for r in records if r["section"] == "04_fp16" and r.get("_tag") == "accum-sweep"
             and r["check"].get("max_abs_err") is not None]

    def pick(r):
        return f"{r['variant']} {'--bug ' + r['bug'] if r.get('bug') else 'fp32 accumulation'} {r['problem']['dtype']}"
    s = _series(sweep, pick, lambda r: r["problem"]["t_q"], lambda r: r["check"]["max_abs_err"])
    if not s:
        return None
    bound = _series([r for r in sweep if not r.get("bug")], lambda r: "bound (2x same-precision error + atol)",
                    lambda r: r["problem"]["t_q"], lambda r: r["check"].get("ref_err_bound"))
    s.update(bound)
    path = Path(folder) / "fp16_accum_error.png"
    _draw(plt, s, "04, accumulation sweep: max |error| vs fp64 against T", "T", "max abs error", path, logy=True)
    return path


def roof(peak_tflops, bw_tbs, lo=0.1, hi=1e4):
    """The roofline min(peak, bandwidth x intensity) as the points a log-log plot needs: the two
    ends and the ridge, where the slope meets the flat top (intensity peak / bandwidth)."""
    ridge = peak_tflops / bw_tbs
    xs = [lo] + ([ridge] if lo < ridge < hi else []) + [hi]
    return [(x, min(peak_tflops, bw_tbs * x)) for x in xs]


def roofline(records, folder, plt, ceilings):
    """Each kernel at (FLOP per modelled HBM byte, TFLOP/s) under the GPU's two measured ceilings."""
    pts = {}
    for r in records:
        m = r["metrics"]
        if r["build"] == "baseline" or not m.get("tflops") or not m.get("hbm_bytes_model"):
            continue
        flops = m.get("flops_model") or m["tflops"] * 1e12 * r["timing"]["median_ms"] * 1e-3
        pts.setdefault(r["section"], []).append((flops / m["hbm_bytes_model"], m["tflops"]))
    if not pts or not ceilings:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    bw = ceilings["copy_gbps"] / 1e3  # TB/s
    for name, peak in (("bf16 GEMM", ceilings["bf16_gemm_tflops"]), ("fp32 GEMM", ceilings["fp32_gemm_tflops"])):
        xs, ys = zip(*roof(peak, bw))
        ax.plot(xs, ys, ":", label=f"{name} {peak:.0f} TFLOP/s / copy {bw:.2f} TB/s")
    for name, p in sorted(pts.items()):
        ax.scatter([a for a, _ in p], [b for _, b in p], label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP per modelled HBM byte")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("Roofline (ceilings measured on this GPU: ceilings.json)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(folder) / "roofline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render_all(records, folder, ceilings):
    """Returns (written paths, notes on what was skipped)."""
    try:
        plt = _plt()
    except ImportError:
        return [], ["matplotlib not installed (pip install -r scripts/requirements.txt): no plots"]
    made, notes = [], []
    sweep = [r for r in records if not r.get("_tag")]  # a tagged file (bench --tag) is a side study
    for name, fn in (("prefill ladder", lambda: prefill_ladder(sweep, folder, plt)),
                     ("memory vs T", lambda: memory_vs_t(sweep, folder, plt)),
                     ("decode bandwidth", lambda: decode_bandwidth(sweep, folder, plt, ceilings)),
                     ("sliding window", lambda: window_time(sweep, folder, plt)),
                     ("fp16 accumulation error", lambda: fp16_accum_error(records, folder, plt)),
                     ("roofline", lambda: roofline(sweep, folder, plt, ceilings))):
        path = fn()
        (made.append(path) if path else notes.append(f"plot '{name}': no records for it yet"))
    return made, notes
