"""09: which K/V tiles each Q tile of the Triton kernel visits, and how (the two sweeps).

The bounds are the kernel's (solutions/09_triton.py, EXERCISE kv-loop) and the tile shape is the
CPU one read from that file, on the handout's worked example (T_q = 100, T_kv = 257, causal)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cpu_tiles():
    src = (ROOT / "solutions" / "09_triton.py").read_text()
    m = re.search(r'CPU_TILES = \{"BLOCK_M": (\d+), "BLOCK_N": (\d+)\}', src)
    return int(m.group(1)), int(m.group(2))


def sweeps(t_q, t_kv, bm, bn, causal=True):
    """Per Q tile: (full_end, kv_end) as the kernel computes them."""
    shift, out = t_kv - t_q, []
    for q0 in range(0, t_q, bm):
        if causal:
            q_last = min(q0 + bm, t_q) - 1
            kv_end = max(min(t_kv, q_last + shift + 1), 0)
            full_end = max(min(t_kv, q0 + shift + 1), 0) // bn * bn
        else:
            kv_end, full_end = t_kv, t_kv // bn * bn
        out.append((full_end, kv_end))
    return out


def make(out_dir):
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle
    t_q, t_kv = 100, 257
    bm, bn = cpu_tiles()
    rows = sweeps(t_q, t_kv, bm, bn)
    n_kv = -(-t_kv // bn)
    fig, ax = plt.subplots(figsize=(9, 2.8))
    colors = {"unmasked": "#4c72b0", "masked": "#dd8452", "skipped": "#eeeeee"}
    for r, (full_end, kv_end) in enumerate(rows):
        for c in range(n_kv):
            k0 = c * bn
            kind = "unmasked" if k0 + bn <= full_end else "masked" if k0 < kv_end else "skipped"
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=colors[kind], edgecolor="white"))
    ax.set_xlim(0, n_kv)
    ax.set_ylim(len(rows), 0)
    ax.set_xlabel(f"K/V tile ({bn} keys each; T_kv = {t_kv})")
    ax.set_ylabel(f"Q tile ({bm} rows)")
    ax.set_yticks([r + 0.5 for r in range(len(rows))], [str(r) for r in range(len(rows))])
    ax.set_title(f"09: the two sweeps of each Q tile, causal, T_q = {t_q}, T_kv = {t_kv} (bottom-right aligned)")
    ax.legend(handles=[Patch(color=v, label=k) for k, v in colors.items()], loc="upper left", fontsize=8,
              bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    path = Path(out_dir) / "09_two_sweeps.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
