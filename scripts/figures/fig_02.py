"""02 v1 tile: the tile grid of a causal problem with T_q != T_kv and ragged edges, with the
section's tile sizes (solutions/02_v1_tile.cu) and the lab's bottom-right causal alignment
(attention_math.h). The loop nesting of FA1 against FA2, which 02 embeds too, is fig_03's."""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from _common import constant, visible_keys

T_Q, T_KV = 150, 230  # neither a multiple of the tile: both last tiles are ragged


def tile_grid(out_dir):
    bq, bkv = constant("02_v1_tile", "BLOCK_Q"), constant("02_v1_tile", "BLOCK_KV")
    nq, nkv = -(-T_Q // bq), -(-T_KV // bkv)
    vis = np.zeros((nq * bq, nkv * bkv))  # 0 padding, 1 masked, 2 visible
    for i in range(nq * bq):
        for j in range(nkv * bkv):
            if i < T_Q and j < T_KV:
                b, e = visible_keys(i, T_Q, T_KV, True)
                vis[i, j] = 2 if b <= j < e else 1
    fig, ax = plt.subplots(figsize=(10, 6.4))
    cmap = plt.matplotlib.colors.ListedColormap(["#dddddd", "#ffffff", "#7fb3e6"])
    ax.imshow(vis, cmap=cmap, vmin=0, vmax=2, interpolation="nearest", aspect="equal")
    for qt in range(nq):
        for kt in range(nkv):
            rows = min(bq, T_Q - qt * bq)  # rows past T_q are never computed; keys past T_kv are masked
            blk = vis[qt * bq:qt * bq + rows, kt * bkv:(kt + 1) * bkv]
            kind = "skip" if not (blk == 2).any() else ("full" if (blk == 2).all() else "mask")
            color = {"skip": "#777777", "full": "#1f5f99", "mask": "#c0392b"}[kind]
            ax.add_patch(Rectangle((kt * bkv + 1, qt * bq + 1), bkv - 3, bq - 3, fill=False, ec=color, lw=2))
            ax.text(kt * bkv + bkv / 2, qt * bq + rows / 2, f"({qt},{kt}) {kind}", ha="center", va="center",
                    fontsize=9, color=color, weight="bold", bbox=dict(fc="white", ec="none", alpha=0.7, pad=1))
    ax.axhline(T_Q - 0.5, color="k", ls="--", lw=1)
    ax.axvline(T_KV - 0.5, color="k", ls="--", lw=1)
    ax.text(T_KV + 1, 4, "T_kv", fontsize=9)
    ax.text(2, T_Q + 6, "T_q", fontsize=9)
    ax.set_xlabel(f"key j  (tiles of BLOCK_KV = {bkv})")
    ax.set_ylabel(f"query i  (tiles of BLOCK_Q = {bq})")
    ax.set_title(f"Causal, T_q = {T_Q}, T_kv = {T_KV}, bottom-right aligned: query i sees keys j <= i + {T_KV - T_Q}\n"
                 "blue: visible   white: masked   grey: padding past T (rows_in_tile, tile_load's zeros)",
                 fontsize=10)
    fig.tight_layout()
    path = out_dir / "02_causal_tile_grid.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make(out_dir):
    return [tile_grid(out_dir)]
