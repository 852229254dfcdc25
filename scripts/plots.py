"""PNG plots of a results folder (drawn by `scripts/lab tables`). Each plot is drawn only from
records that exist; a plot with nothing to show is skipped and named in the returned notes.

What a plot shows, so that a student reads it at a glance: one line per section, its headline
variant (tables.headline; in the D = 64 prefill plot, its fastest variant there; every other
variant is in TABLES.md), each library once in a grey
dashed style of its own, every label starting with its section number (or "library:"), and no
value the records do not hold. CAPTIONS holds each plot's alt text and the sentence TABLES.md
prints under it."""
from pathlib import Path

import tables

PREFILL_SECTIONS = ["01_naive", "02_v1_tile", "03_v2_loop_order", "04_fp16", "08_tma_skeleton", "09_triton"]
DECODE_SECTIONS = ["05_decode", "06_paged"]

# file name: (alt text, the one sentence under the plot in TABLES.md)
CAPTIONS = {
    "prefill_tflops.png": (
        "prefill TFLOP/s against T, one line per section and each SDPA backend once",
        "Each step of the ladder is a jump in TFLOP/s: 01 to 03 in fp32 (03 above SDPA's fp32 kernel), then "
        "Tensor Cores in 04 (level with SDPA's FlashAttention-2) and the Hopper pipeline in 08; 09 is the same "
        "forward in Triton. Against the grey library lines (non-causal, D = 64; the other shapes and variants "
        "are in the tables)."),
    "memory_vs_t.png": (
        "extra device memory against T for 01 and 02, beside the size of the inputs",
        "01's S and P grow as T², far above Q, K, V and O themselves (grey), while 02 keeps O(T·D) of running "
        "state; the sections that allocate nothing beyond Q, K, V, O (0 B) cannot sit on a log axis and are "
        "named on the plot instead."),
    "decode_bandwidth.png": (
        "05 and 06 decode bandwidth against kv length, with the libraries and the copy ceiling",
        "From 8192 keys every kernel, ours and the libraries', reads K/V at about the copy ceiling, so a decode "
        "step is bandwidth; points above the red line are expected, since the ceiling is a measured copy (half "
        "reads, half writes) while a decode step only reads, and they are not L2 hits: from 32k keys the K/V "
        "are many times the 50 MB L2."),
    "sliding_window_time.png": (
        "07 sliding-window time against T, beside plain causal, the ideal and the libraries",
        "With a window the time grows as T·W, on the ideal line, while plain causal (ours and SDPA's) grows as "
        "T²; at T = W = 4096 the window covers everything and the lines meet; FlexAttention with the same "
        "window is the black dashed line (08's `ws --window` runs this same Hopper kernel: its times are in "
        "the tables)."),
    "fp16_accum_error.png": (
        "04 error against fp64 with fp32 and fp16 accumulation, against T",
        "Accumulating in fp16 (--bug fp16-accum) puts the error above the check's bound already at T = 1024 "
        "and it keeps growing with T, while fp32 accumulation stays flat under the bound: why 04 stores half "
        "but sums in float."),
    "roofline.png": (
        "roofline: each section's headline variant under the GPU's measured ceilings",
        "Decode (05, 06) sits on the bandwidth slope, 01 and 02 far under the fp32 line, 03 to 08 right of "
        "their ridge, where the gap to the flat line is compute left to win (windowed shapes are drawn once, "
        "as 07's)."),
}

OURS_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
               "tab:olive", "tab:cyan"]
LIBRARY_STYLES = [("--", "s", "black"), (":", "^", "dimgray"), ("-.", "D", "gray"), ((0, (5, 1, 1, 1)), "v", "black"),
                  ((0, (1, 1)), "P", "dimgray")]


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def short(section):
    """'05_decode' -> '05': the prefix every label of ours starts with."""
    return section[:2]


def headline_variants(records):
    """{section: the variant its headline record uses} over the sweep records."""
    by = {}
    for r in records:
        by.setdefault(r["section"], []).append(r)
    out = {}
    for section, rs in by.items():
        h = tables.headline(section, rs)
        if h:
            out[section] = h
    return out


def _points(records, x, y):
    pts = sorted({(x(r), y(r)) for r in records if x(r) is not None and y(r) is not None})
    return pts


def _library_series(records, pick_label, x, y):
    """{label: points} of library records, each (label, x) drawn once: the fastest where two
    sections measured the same library on the same problem."""
    best = {}
    for r in records:
        if not tables.is_library(r) or not r["timing"].get("median_ms"):
            continue
        label = pick_label(r)
        if label is None or x(r) is None or y(r) is None:
            continue
        k = (label, x(r))
        if k not in best or r["timing"]["median_ms"] < best[k]["timing"]["median_ms"]:
            best[k] = r
    out = {}
    for (label, xv), r in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        out.setdefault(label, []).append((xv, y(r)))
    return out


def _draw(plt, ours, libraries, title, xlabel, ylabel, path, logx=True, logy=False, extra=None, refs=None):
    """ours and libraries: {label: [(x, y)]}; refs: {label: [(x, y)]} drawn thin and grey (a model, not a
    measurement). Ours solid in colour, each library grey in a dash and marker of its own."""
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for n, (label, pts) in enumerate(ours.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", marker="o", ms=6, lw=2.5, label=label,
                color=OURS_COLORS[n % len(OURS_COLORS)], zorder=2)
    for n, (label, pts) in enumerate(libraries.items()):
        ls, marker, color = LIBRARY_STYLES[n % len(LIBRARY_STYLES)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=ls, marker=marker, ms=6, lw=1.5,
                mfc="none", mew=1.3, label=label, color=color, zorder=3)  # thin and hollow: on top, ours shows
    for label, pts in (refs or {}).items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=":", marker="x", ms=6, lw=1.2,
                label=label, color="tab:gray", zorder=4)
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
    """TFLOP/s against T (non-causal, D = 64, T_q = T_kv): each prefill section in its headline
    precision, by its variant that is fastest on these problems (a section's headline shape may
    have another D, whose best variant differs: 08's), and the SDPA backends measured on them."""
    heads = headline_variants(records)

    def prefill(r):
        p = r["problem"]
        return not p["causal"] and p["t_q"] == p["t_kv"] and p["d"] == 64 and not p.get("window") \
            and not p.get("page_size") and r["section"] in PREFILL_SECTIONS

    ours, dtypes = {}, set()
    for section in PREFILL_SECTIONS:
        h = heads.get(section)
        if not h:
            continue
        mine = [r for r in tables.ours_timed(records) if r["section"] == section and prefill(r)
                and r["problem"]["dtype"] == h["problem"]["dtype"] and r["variant"] == tables.variant_label(r)]
        if not mine:
            continue
        def coverage_then_rate(v):  # the variant measured on the most of these T, then the fastest on average
            rates = [r["metrics"].get("tflops") or 0 for r in mine if r["variant"] == v]
            return len(rates), sum(rates) / len(rates)
        best = max(sorted({r["variant"] for r in mine}), key=coverage_then_rate)
        rs = [r for r in mine if r["variant"] == best]
        pts = _points(rs, lambda r: r["problem"]["t_q"], lambda r: r["metrics"].get("tflops"))
        if pts:
            ours[f"{short(section)} {best} ({h['problem']['dtype']})"] = pts
            dtypes.add(h["problem"]["dtype"])
    if not ours:
        return None
    libs = _library_series([r for r in records if prefill(r) and r["problem"]["dtype"] in dtypes],
                           lambda r: f"library: {r['variant']} ({r['problem']['dtype']})"
                           if r["variant"].startswith("sdpa") else None,
                           lambda r: r["problem"]["t_q"], lambda r: r["metrics"].get("tflops"))
    path = Path(folder) / "prefill_tflops.png"
    _draw(plt, ours, libs, "Prefill: TFLOP/s against T (non-causal, D = 64; batch x T constant in 04, 08 and 09)",
          "T", "TFLOP/s", path, logy=True)
    return path


def memory_vs_t(records, folder, plt):
    """Extra device memory against T for prefill (non-causal, D = 64): each section's headline
    variant where it allocates something; the sections that allocate 0 B are named in a note (a log
    axis has no 0), and the size of Q, K, V and O of the first series' shape is drawn for scale."""
    heads = headline_variants(records)
    ours, zero, first = {}, [], None
    for section in sorted(heads):
        h = heads[section]
        rs = [r for r in tables.ours_timed(records) if r["section"] == section and r["variant"] == h["variant"]
              and not tables.is_decode(r) and not r["problem"]["causal"] and r["problem"]["d"] == 64
              and r["problem"]["t_q"] == r["problem"]["t_kv"] and not r["problem"].get("page_size")
              and r["metrics"].get("extra_device_bytes") is not None]
        if not rs:
            continue
        if all(r["metrics"]["extra_device_bytes"] == 0 for r in rs):
            zero.append(short(section))
            continue
        rs = [r for r in rs if r["metrics"]["extra_device_bytes"] > 0]
        ours[f"{short(section)} {h['variant']}"] = _points(rs, lambda r: r["problem"]["t_q"],
                                                           lambda r: r["metrics"]["extra_device_bytes"] / 1e6)
        first = first or rs[0]
    if not ours:
        return None
    p = first["problem"]
    size = {"fp32": 4, "fp16": 2, "bf16": 2}.get(p["dtype"], 4)
    ts = sorted({t for pts in ours.values() for t, _ in pts})
    refs = {f"{short(first['section'])} Q, K, V, O themselves (B={p['b']} H={p['h']} D={p['d']} {p['dtype']})":
            [(t, 4 * p["b"] * p["h"] * t * p["d"] * size / 1e6) for t in ts]}

    def note(ax):
        if zero:
            ax.text(0.02, 0.97, f"0 B at every T (not drawable on a log axis): {', '.join(zero)}",
                    transform=ax.transAxes, va="top", fontsize=9,
                    bbox=dict(boxstyle="round", facecolor="white", edgecolor="0.7"))
    path = Path(folder) / "memory_vs_t.png"
    _draw(plt, ours, {}, "Extra device memory against T, prefill (beyond Q, K, V, O; non-causal, D = 64)",
          "T", "MB", path, logy=True, extra=note, refs=refs)
    return path


def decode_bandwidth(records, folder, plt, ceilings):
    """GB/s of K/V read against kv_len: each decode section's headline variant at its headline
    batch size and equal lengths, each library once, and the measured copy ceiling."""
    heads = headline_variants(records)

    def equal_lengths(r):
        return tables.is_decode(r) and not any(n != r["problem"]["t_kv"] for n in r["problem"].get("kv_len") or [])

    ours, batch = {}, None
    for section in DECODE_SECTIONS:
        h = heads.get(section)
        if not h:
            continue
        b = h["problem"]["b"]
        rs = [r for r in tables.ours_timed(records) if r["section"] == section and r["variant"] == h["variant"]
              and equal_lengths(r) and r["problem"]["b"] == b and r["problem"].get("page_size") == h["problem"].get("page_size")]
        page = f" page={h['problem']['page_size']}" if h["problem"].get("page_size") else ""
        ours[f"{short(section)} {h['variant']} B={b}{page}"] = _points(
            rs, lambda r: r["problem"]["t_kv"], lambda r: r["metrics"].get("hbm_gbps"))
        batch = batch or b
    if not ours:
        return None
    libs = _library_series([r for r in records if equal_lengths(r) and r["problem"]["b"] == batch
                            and r["section"] in DECODE_SECTIONS],
                           lambda r: f"library: {r['variant']} B={batch}", lambda r: r["problem"]["t_kv"],
                           lambda r: r["metrics"].get("hbm_gbps"))

    def ceiling(ax):
        if not ceilings:
            return
        c = ceilings["copy_gbps"]
        ax.axhline(c, color="tab:red", lw=1, label=f"copy ceiling {c:.0f} GB/s (measured; read + write)")
        above = [(x, y) for pts in list(ours.values()) + list(libs.values()) for x, y in pts if y > c]
        if above:
            ax.annotate("above the ceiling: decode only reads,\nthe ceiling is a copy (reads + writes)",
                        xy=min(above), xytext=(0.03, 0.78), textcoords="axes fraction", fontsize=9,
                        arrowprops=dict(arrowstyle="->", color="0.3"),
                        bbox=dict(boxstyle="round", facecolor="white", edgecolor="0.7"))
    path = Path(folder) / "decode_bandwidth.png"
    _draw(plt, ours, libs, "Decode: GB/s of K/V read against kv_len (GQA H = 32/8, D = 128)", "kv_len", "GB/s",
          path, extra=ceiling)
    return path


def window_time(records, folder, plt):
    """Time against T of 07's headline variant with its window and without one (plain causal),
    the ideal (its plain-causal time x the FLOP ratio (T·W - W²/2) / (T²/2)) and the libraries
    measured on the same problems (FlexAttention with the window, SDPA plain causal)."""
    section = "07_sliding_window"
    sec = [r for r in records if r["section"] == section]
    h = tables.headline(section, sec)
    if h is None:
        return None
    w, v = h["problem"]["window"], h["variant"]
    mine = [r for r in tables.ours_timed(sec) if r["variant"] == v and r["problem"]["t_q"] == r["problem"]["t_kv"]]
    windowed = [r for r in mine if r["problem"].get("window") == w]
    causal = [r for r in mine if not r["problem"].get("window")]
    ms = lambda r: r["timing"].get("median_ms")  # noqa: E731
    t = lambda r: r["problem"]["t_q"]  # noqa: E731
    ours = {f"07 {v} W={w}": _points(windowed, t, ms)}
    if causal:
        ours[f"07 {v} causal, no window"] = _points(causal, t, ms)
    plain = dict(_points(causal, t, ms))
    refs = {}
    ideal = [(x, plain[x] * tables.ideal_window_ratio(x, w)) for x, _ in ours[f"07 {v} W={w}"] if x in plain]
    if ideal:
        refs[f"07 ideal W={w}: causal time x (T·W - W²/2) / (T²/2)"] = ideal
    libs = _library_series([r for r in sec if r["problem"].get("window") in (None, w)],
                           lambda r: f"library: {r['variant']} " + (f"W={w}" if r["problem"].get("window") else
                                                                   "causal, no window"), t, ms)
    path = Path(folder) / "sliding_window_time.png"
    _draw(plt, ours, libs, f"Sliding window: time against T (B=1 H=16 D=128 {h['problem']['dtype']}, causal)",
          "T", "ms", path, logy=True, refs=refs)
    return path


def fp16_accum_error(records, folder, plt):
    """04's accumulation study (04_fp16.accum-sweep.json: one shape family, T = 1k ... 32k): the
    error against fp64 with fp32 and with fp16 accumulation, and the bound the check holds it to."""
    sweep = [r for r in records if r["section"] == "04_fp16" and r.get("_tag") == "accum-sweep"
             and r["check"].get("max_abs_err") is not None]
    if not sweep:
        return None
    ours = {}
    for r in sweep:
        label = f"04 {r['variant']} {'--bug ' + r['bug'] if r.get('bug') else 'fp32 accumulation'} {r['problem']['dtype']}"
        ours.setdefault(label, []).append((r["problem"]["t_q"], r["check"]["max_abs_err"]))
    ours = {k: sorted(v) for k, v in sorted(ours.items())}
    bound = sorted((r["problem"]["t_q"], r["check"]["ref_err_bound"]) for r in sweep
                   if not r.get("bug") and r["check"].get("ref_err_bound") is not None)
    refs = {"04 the check's bound (2x same-precision unfused error + atol)": bound} if bound else {}
    path = Path(folder) / "fp16_accum_error.png"
    _draw(plt, ours, {}, "04, accumulation study: max |error| against fp64 vs T", "T", "max abs error", path,
          logy=True, refs=refs)
    return path


def roof(peak_tflops, bw_tbs, lo=0.1, hi=1e4):
    """The roofline min(peak, bandwidth x intensity) as the points a log-log plot needs: the two
    ends and the ridge, where the slope meets the flat top (intensity peak / bandwidth)."""
    ridge = peak_tflops / bw_tbs
    xs = [lo] + ([ridge] if lo < ridge < hi else []) + [hi]
    return [(x, min(peak_tflops, bw_tbs * x)) for x in xs]


def roofline(records, folder, plt, ceilings):
    """Each section's headline variant at (FLOP per modelled HBM byte, TFLOP/s) under the GPU's two
    measured ceilings."""
    heads = headline_variants(records)
    pts = {}
    for r in tables.ours_timed(records):
        m, h = r["metrics"], heads.get(r["section"])
        if not h or r["variant"] != h["variant"] or not m.get("tflops") or not m.get("hbm_bytes_model"):
            continue
        keep = tables.HEADLINE_SHAPES.get(r["section"])
        if r["problem"].get("window") and not (keep and keep(r["problem"])):
            continue  # a windowed shape is the lesson of the section that keeps it (07), drawn there once
        flops = m.get("flops_model") or m["tflops"] * 1e12 * r["timing"]["median_ms"] * 1e-3
        pts.setdefault(f"{short(r['section'])} {r['variant']}", []).append((flops / m["hbm_bytes_model"], m["tflops"]))
    if not pts or not ceilings:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5))
    bw = ceilings["copy_gbps"] / 1e3  # TB/s
    for (name, peak), ls in zip((("bf16 GEMM", ceilings["bf16_gemm_tflops"]), ("fp32 GEMM", ceilings["fp32_gemm_tflops"])),
                                ("--", ":")):
        xs, ys = zip(*roof(peak, bw))
        ax.plot(xs, ys, ls, color="black", lw=1.2, label=f"ceiling: {name} {peak:.0f} TFLOP/s, copy {bw:.2f} TB/s")
    markers = "osD^vP*X"
    for n, (name, p) in enumerate(sorted(pts.items())):
        color = OURS_COLORS[n % len(OURS_COLORS)]  # every other section hollow: coinciding points stay visible
        ax.scatter([a for a, _ in p], [b for _, b in p], label=name, marker=markers[n % len(markers)], s=60,
                   zorder=3 + n % 2, facecolors=color if n % 2 == 0 else "none", edgecolors=color, linewidths=1.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP per modelled HBM byte")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("Roofline: each section's headline variant (ceilings measured on this GPU)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
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
    sweep = [r for r in records if not r.get("_tag")]  # a tagged file is a side study
    for name, fn in (("prefill ladder", lambda: prefill_ladder(sweep, folder, plt)),
                     ("memory vs T", lambda: memory_vs_t(sweep, folder, plt)),
                     ("decode bandwidth", lambda: decode_bandwidth(sweep, folder, plt, ceilings)),
                     ("sliding window", lambda: window_time(sweep, folder, plt)),
                     ("fp16 accumulation error", lambda: fp16_accum_error(records, folder, plt)),
                     ("roofline", lambda: roofline(sweep, folder, plt, ceilings))):
        path = fn()
        (made.append(path) if path else notes.append(f"plot '{name}': no records for it yet"))
    return made, notes
