"""Figure of section 07: the K/V tiles a sliding window visits, with its two edges.

The tile sizes are read from the section's source (solutions/07_sliding_window.cu: the mma
kernel's 16-row warps x 4 and 64-key tiles); the predicate is the lab's (common/toolbox/
attention_math.h: visible_keys), ported line for line below, and a tile is classified row by row
as the section's host count (count_tiles) does.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _constant(path, name):
    m = re.search(rf"constexpr int {name} = (\d+);", (ROOT / path).read_text())
    if not m:
        raise SystemExit(f"fig_07: {name} not found in {path}")
    return int(m.group(1))


def visible_keys(i, t_q, t_kv, causal, window):
    """lab::visible_keys: keys [begin, end) that query row i attends (bottom-right aligned)."""
    pos = i + (t_kv - t_q)
    end = min(t_kv, pos + 1) if causal else t_kv
    begin = max(0, pos - window + 1) if window > 0 else 0
    end = max(end, 0)
    begin = min(begin, end)
    return begin, end


def tile_kind(q0, q1, k0, k1, t_q, t_kv, causal, window):
    """The tile of rows [q0, q1) x keys [k0, k1): 'none' (no row attends a key of it: skipped),
    'full' (every row attends all of it: no mask; never a tile past T_kv) or 'partial' (masked)."""
    ranges = [visible_keys(i, t_q, t_kv, causal, window) for i in range(q0, q1)]
    if not any(b < e and b < k1 and e > k0 for b, e in ranges):
        return "none"
    return "full" if all(b <= k0 and e >= k1 for b, e in ranges) else "partial"


def make(out_dir):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    block_kv = _constant("solutions/07_sliding_window.cu", "BLOCK_KV")
    block_q = 4 * _constant("solutions/07_sliding_window.cu", "ROWS_PER_WARP")  # window-mma: 4 warps
    t, window = 1024, 200
    nq, nk = -(-t // block_q), -(-t // block_kv)
    colors = {"none": "#f2f2f2", "full": "#4c9be8", "partial": "#f5a623"}
    fig, ax = plt.subplots(figsize=(7.2, 6.4))
    counts = {"none": 0, "full": 0, "partial": 0}
    for qt in range(nq):
        for kt in range(nk):
            vis = tile_kind(qt * block_q, min(t, (qt + 1) * block_q), kt * block_kv,
                            (kt + 1) * block_kv, t, t, True, window)
            counts[vis] += 1
            ax.add_patch(Rectangle((kt * block_kv, qt * block_q), block_kv, block_q, facecolor=colors[vis],
                                   edgecolor="white", linewidth=1.2))
    # the two edges of the band of attended keys, per row
    rows = list(range(t))
    ax.plot([visible_keys(i, t, t, True, window)[1] for i in rows], rows, color="#b00020", lw=1.6)
    ax.plot([visible_keys(i, t, t, True, window)[0] for i in rows], rows, color="#6a1b9a", lw=1.6)
    ax.annotate("causal edge: key j <= i\n(the diagonal tile of each row of tiles)", xy=(700, 690),
                xytext=(760, 420), fontsize=9, arrowprops=dict(arrowstyle="->"))
    ax.annotate(f"window edge: key j > i - W\n(W = {window}: the tile where it starts)", xy=(560, 770),
                xytext=(40, 900), fontsize=9, arrowprops=dict(arrowstyle="->"))
    ax.set_xlim(0, t)
    ax.set_ylim(t, 0)
    ax.set_xlabel(f"key j (K/V tiles of {block_kv})")
    ax.set_ylabel(f"query row i (Q tiles of {block_q})")
    visited = counts["full"] + counts["partial"]
    ax.set_title(f"Causal + window W = {window}, T = {t}: {visited} of {nq * nk} tiles visited, "
                 f"{counts['partial']} of them masked", fontsize=10)
    ax.legend(handles=[Patch(color=colors["none"], label="skipped (never loaded)"),
                       Patch(color=colors["full"], label="visited, no mask"),
                       Patch(color=colors["partial"], label="visited, masked per element")],
              loc="upper right", fontsize=8)
    fig.tight_layout()
    path = Path(out_dir) / "07_window_tiles.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
