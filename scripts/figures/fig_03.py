"""03 v2 loop order: the loop nesting of FlashAttention-1 (section 02) and FlashAttention-2
(section 03), and where the running O, m, l live in each. The names are the sections' own
(kv_span, the host loop of launch_v1, the grid of launch_v2)."""
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from _common import require


def box(ax, x, y, w, h, text, color, size=9, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.01,rounding_size=0.02", fc=color,
                                ec="k", lw=1))
    ax.text(x + 0.02, y + h - 0.03, text, va="top", ha="left", fontsize=size, weight=weight, family="monospace")


def loop_nesting(out_dir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    for ax in axes:
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    a = axes[0]
    a.set_title("FlashAttention-1 (section 02): K/V outside", fontsize=11, weight="bold")
    box(a, 0.02, 0.05, 0.96, 0.88, "for kv_tile j:        (host loop: one launch each)", "#fde2e2", weight="bold")
    box(a, 0.06, 0.42, 0.88, 0.42, "for q_tile i:      (grid blocks, in parallel)\n"
        "  load Q_i, K_j, V_j\n  read O_i, m_i, l_i   <- HBM\n  S = Q_i K_jᵀ; online rescale\n"
        "  O_i = (α·l·O_i + P V_j) / l_new\n  write O_i, m_i, l_i  -> HBM", "#fff5f5")
    a.text(0.06, 0.22, "O, m, l live in HBM: read and written back\nat every K/V step (O(T·D) bytes per step).\n"
           "Q_i is reloaded for every K/V tile.", fontsize=9, color="#a00")
    b = axes[1]
    b.set_title("FlashAttention-2 (section 03): Q outside", fontsize=11, weight="bold")
    box(b, 0.02, 0.05, 0.96, 0.88, "for q_tile i:          (grid blocks, in parallel)", "#e2f0fd", weight="bold")
    box(b, 0.06, 0.56, 0.88, 0.28, "  load Q_i once;  O = 0, m = -inf, l = 0  (registers)\n"
        "  for kv_tile j in kv_span(i):   (inside the block)\n    S = Q_i K_jᵀ; online rescale of O, l\n"
        "    O += P V_j", "#f5faff")
    box(b, 0.06, 0.38, 0.88, 0.14, "  after the loop, once:\n  O = O / l;  LSE = m + log l  -> HBM", "#f5faff")
    b.text(0.06, 0.22, "O, m, l never leave the block's registers.\nCausal: kv_span stops at the diagonal.",
           fontsize=9, color="#036")
    fig.tight_layout()
    path = out_dir / "03_loop_nesting.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path



def make(out_dir):
    require("02_v1_tile", "for (int kv_tile = 0; kv_tile < lab::ceil_div(pr.t_kv, BLOCK_KV); ++kv_tile) {  // the OUTER loop")
    require("03_v2_loop_order", "const dim3 grid(lab::ceil_div(pr.t_q, BLOCK_Q), pr.b * pr.h);  // one block per (Q tile, head)")
    return [loop_nesting(out_dir)]
