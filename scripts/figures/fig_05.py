"""Figures of section 05 (decode): split-KV over a batch of mixed lengths, and the LSE merge.

The tile size comes from common/decode/decode.cuh; the splits are the lab's rule (a split covers
keys [s·keys_per_split, (s+1)·keys_per_split), a split past a sequence's end is an empty block);
the merge is computed with the formulas the exercise implements, on the handout's worked example.
"""
import math
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def block_n():
    text = (ROOT / "common" / "decode" / "decode.cuh").read_text()
    warp = int(re.search(r"constexpr int WARP_KEYS = (\d+);", text).group(1))
    groups = int(re.search(r"constexpr int GROUPS = (\d+);", text).group(1))
    return warp * groups


def split_figure(out):
    import matplotlib.pyplot as plt
    tile = block_n()
    lengths = [1000, 620, 150, 900]          # a batch of mixed lengths (keys per sequence)
    keys_per_split = 4 * tile                # 4 tiles a split
    t_max = max(lengths)
    splits = math.ceil(t_max / keys_per_split)
    fig, ax = plt.subplots(figsize=(9, 3.4))
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52"]
    for b, n in enumerate(lengths):
        y = len(lengths) - 1 - b
        for s in range(splits):
            lo, hi = s * keys_per_split, min((s + 1) * keys_per_split, n)
            if hi > lo:
                ax.barh(y, hi - lo, left=lo, height=0.6, color=colors[s % 4], alpha=0.85, edgecolor="black")
                ax.text((lo + hi) / 2, y, f"split {s}\n(O_{s}, LSE_{s})", ha="center", va="center", fontsize=7, color="white")
            else:
                lo = s * keys_per_split
                ax.barh(y, keys_per_split, left=lo, height=0.6, color="none", edgecolor="grey", hatch="//")
                ax.text(lo + keys_per_split / 2, y, f"split {s}: no key\nLSE = -inf, weight 0", ha="center",
                        va="center", fontsize=7, color="dimgrey")
        ax.text(t_max + keys_per_split * 0.05 + (splits * keys_per_split - t_max), y, f"kv_len {n}", va="center", fontsize=8)
    for s in range(splits + 1):
        ax.axvline(s * keys_per_split, color="black", lw=0.6, ls=":")
    ax.set_yticks(range(len(lengths)))
    ax.set_yticklabels([f"sequence {b}" for b in reversed(range(len(lengths)))])
    ax.set_xlim(0, splits * keys_per_split * 1.18)
    ax.set_xlabel(f"key index (splits of {keys_per_split} keys = {keys_per_split // tile} tiles of {tile})")
    ax.set_title("split-KV: one block per (sequence, K/V head, split); each writes a partial O and its LSE")
    fig.tight_layout()
    path = out / "05_split_kv.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def merge_figure(out):
    import matplotlib.pyplot as plt
    # The handout's worked example: three splits of one row.
    lse = [2.0, 1.0, -math.inf]
    o = [10.0, 4.0, 0.0]
    hi = max(x for x in lse)
    total = hi + math.log(sum(math.exp(x - hi) for x in lse if x != -math.inf))
    w = [0.0 if x == -math.inf else math.exp(x - total) for x in lse]
    merged = sum(wi * oi for wi, oi in zip(w, o))
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    names = ["split 0", "split 1", "split 2\n(empty)"]
    axes[0].bar(names, [x if x != -math.inf else 0 for x in lse], color=["#4C72B0", "#DD8452", "white"], edgecolor="black")
    axes[0].text(2, 0.1, "-inf", ha="center")
    axes[0].axhline(total, color="black", ls="--")
    axes[0].text(0.6, total + 0.08, f"merged LSE = {total:.4f}", fontsize=8)
    axes[0].set_ylim(0, 2.8)
    axes[0].set_title("LSE_s of each split")
    axes[1].bar(names, w, color=["#4C72B0", "#DD8452", "white"], edgecolor="black")
    for i, x in enumerate(w):
        axes[1].text(i, x + 0.02, f"{x:.4f}", ha="center", fontsize=8)
    axes[1].set_ylim(0, 1)
    axes[1].set_title("weight exp(LSE_s - LSE)")
    axes[2].bar(names + ["merged"], o + [merged], color=["#4C72B0", "#DD8452", "white", "#55A868"], edgecolor="black")
    for i, x in enumerate(o + [merged]):
        axes[2].text(i, x + 0.2, f"{x:.4f}" if i == 3 else f"{x:g}", ha="center", fontsize=8)
    axes[2].set_ylim(0, 11.5)
    axes[2].set_title("O_s (one column) and the merged O")
    fig.suptitle("The LSE merge of one row: O = sum_s exp(LSE_s - LSE) O_s; the empty split weighs exactly 0")
    fig.tight_layout()
    path = out / "05_lse_merge.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def make(out_dir):
    out = Path(out_dir)
    return [split_figure(out), merge_figure(out)]
