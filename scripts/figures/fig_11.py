"""11 backward: the loop order of solutions/11_backward.cu on a causal problem of five tiles a side.
Left, the main kernel: one block per K/V tile (the outer loop), the Q tiles that see its keys
streaming past in order, dK and dV of the tile accumulating in the block's registers; in the atomic
variant each visit also adds its piece of dQ into an fp32 buffer with atomicAdd, from every block
at once. Right, the deterministic variant's separate dQ pass: one block per Q tile, the K/V tiles
in a fixed order, dQ in registers."""
import re

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, Rectangle

from _common import ROOT, constant, require, visible_keys

SECTION = "11_backward"
TILES = 5  # tiles a side of the drawn problem (T = TILES x the tile size)


def visible(qi, kj, block_q, block_kv):
    """Whether any row of Q tile qi sees any key of K/V tile kj (causal, T_q = T_kv)."""
    t = TILES * block_q
    last_row = min(t, (qi + 1) * block_q) - 1
    return visible_keys(last_row, t, t, True)[1] > kj * block_kv


def grid(ax, block_q, block_kv, lit):
    """The tile grid: rows Q tiles, columns K/V tiles; lit(qi, kj) -> (colour, label) or None."""
    for qi in range(TILES):
        for kj in range(TILES):
            x, y = kj, TILES - 1 - qi
            if not visible(qi, kj, block_q, block_kv):
                ax.add_patch(Rectangle((x, y), 1, 1, facecolor="#eeeeee", edgecolor="#bbbbbb", hatch="///", lw=0.8))
                continue
            style = lit(qi, kj)
            ax.add_patch(Rectangle((x, y), 1, 1, facecolor=style[0] if style else "white", edgecolor="#555555", lw=0.8))
            if style and style[1]:
                ax.text(x + 0.5, y + 0.5, style[1], ha="center", va="center", fontsize=9)
    for n in range(TILES):
        ax.text(n + 0.5, TILES + 0.15, f"K/V {n}", ha="center", va="bottom", fontsize=8)
        ax.text(-0.1, TILES - 1 - n + 0.5, f"Q {n}", ha="right", va="center", fontsize=8)


def arrow(ax, a, b, colour, style="-|>", lw=1.2, ls="-"):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=11, color=colour, lw=lw, linestyle=ls))


def main_q_tiles():
    """The main kernel's Q tile per head dimension, (rows at D = 64, rows at D = 128), from Tiles."""
    text = (ROOT / "solutions" / f"{SECTION}.cu").read_text()
    m = re.search(r"static constexpr int BLOCK_Q = HEAD_DIM == 64 \? (\d+) : (\d+);", text)
    if not m:
        raise SystemExit(f"figures: solutions/{SECTION}.cu no longer sets Tiles::BLOCK_Q per D: update the figure")
    return int(m.group(1)), int(m.group(2))


def make(out_dir):
    require(SECTION, "dK, dV stay in registers while every Q tile of every query head of the group streams past")
    require(SECTION, "else atomic_add4(at, v4);")
    require(SECTION, "a second kernel, one block per Q tile,")
    block_kv = constant(SECTION, "BLOCK_KV")
    q_d64, q_d128 = main_q_tiles()
    block_q = q_d64  # drawn at D = 64, where the main kernel's tiles are square
    dq_q, dq_kv = constant(SECTION, "DQ_BLOCK_Q"), constant(SECTION, "DQ_BLOCK_KV")
    blue, orange, red = "#9ecae1", "#fdd0a2", "#d62728"
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.6))

    # Left: the main kernel, block j = 1 highlighted, its Q tiles numbered in the order they stream.
    j = 1
    order = {qi: n + 1 for n, qi in enumerate(q for q in range(TILES) if visible(q, j, block_q, block_kv))}
    grid(left, block_q, block_kv, lambda qi, kj: (blue, f"{order[qi]}") if kj == j else None)
    left.add_patch(Rectangle((j, 0), 1, TILES - j, fill=False, edgecolor="#08519c", lw=2.2))
    arrow(left, (j + 0.15, TILES - j - 0.1), (j + 0.15, 0.1), "#08519c", lw=1.8)  # the stream, inside the block
    left.text(0, -0.3, f"Q, dO tiles stream down (a two-stage cp.async ring);\n"
              f"dK{j}, dV{j}: this block's registers, summed over\nthe stream, stored once",
              ha="left", va="top", fontsize=8.5, color="#08519c")
    buf_x = TILES + 1.2  # the fp32 dQ buffer, one slot per Q tile
    for qi in range(TILES):
        y = TILES - 1 - qi
        left.add_patch(Rectangle((buf_x, y + 0.1), 0.7, 0.8, facecolor=orange, edgecolor="#a63603", lw=0.8))
        left.text(buf_x + 0.35, y + 0.5, f"dQ{qi}", ha="center", va="center", fontsize=8)
        if qi in order:
            arrow(left, (j + 0.8, y + 0.5), (buf_x, y + 0.5), red, lw=0.9, ls="--")
    left.text(buf_x + 0.35, TILES + 0.15, "fp32 dQ, atomicAdd\nfrom every block,\nin any order", ha="center",
              va="bottom", fontsize=8, color=red)
    left.set_title(f"atomic: one block per K/V tile ({block_kv} keys), Q tiles ({block_q} rows at D = 64, "
                   f"{q_d128} at D = 128)\nstream past; dQ added by fp32 atomics from every block, then scaled "
                   "and rounded", fontsize=10)
    left.set_xlim(-0.9, buf_x + 1.1)
    left.set_ylim(-1.4, TILES + 1.0)

    # Right: the deterministic variant's dQ pass, block i = 3 highlighted, K/V tiles in a fixed order.
    i = 3
    row_order = {kj: n + 1 for n, kj in enumerate(k for k in range(TILES) if visible(i, k, dq_q, dq_kv))}
    grid(right, dq_q, dq_kv, lambda qi, kj: (orange, f"{row_order[kj]}") if qi == i else None)
    y = TILES - 1 - i
    right.add_patch(Rectangle((0, y), len(row_order), 1, fill=False, edgecolor="#a63603", lw=2.2))
    arrow(right, (0.1, y + 0.15), (len(row_order) - 0.1, y + 0.15), "#a63603", lw=1.8)  # the fixed order
    right.text(TILES + 0.15, y + 0.5, f"dQ{i}: this block's\nregisters, stored once", ha="left", va="center",
               fontsize=8.5, color="#a63603")
    right.text(TILES / 2, -0.3, "K/V tiles in a fixed order: the same sums, the same bits, every run.\n"
               "dK, dV: the main kernel of the left without its dQ;\nthis pass recomputes P and dS "
               "(S and dP computed twice)", ha="center", va="top", fontsize=8.5)
    right.set_title(f"deterministic: a second kernel, one block per Q tile ({dq_q} rows),\nsums dQ over the "
                    f"K/V tiles ({dq_kv} keys) it sees", fontsize=10)
    right.set_xlim(-0.9, TILES + 2.3)
    right.set_ylim(-1.4, TILES + 1.0)

    for ax in (left, right):
        ax.set_aspect("equal")
        ax.axis("off")
    fig.text(0.5, 0.01, f"Causal, T = {TILES} tiles a side: hatched tiles lie above the diagonal (no query row of "
             "the Q tile sees a key of the K/V tile) and are never visited.", ha="center", fontsize=8.5)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = out_dir / "11_backward_loop_order.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return [path]
