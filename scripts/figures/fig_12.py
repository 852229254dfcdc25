"""12 ring attention: who owns which rows of the causal score matrix, and how much causal work each
rank does, for the contiguous and the zigzag layout at N = 4 ranks (solutions/12_ring.cu's shard
map, and its 64x64 tiles for the work count)."""
import matplotlib.pyplot as plt
import numpy as np

from _common import constant, require

N = 4
T = 2 * N * 64 * 2  # 1024: zigzag chunks of 128 rows, shards of 256 rows (4 tiles)


def shard_row(local, rank, ranks, t, layout):
    """The shard map of solutions/12_ring.cu (EXERCISE shard-map), in Python."""
    if layout == "contiguous":
        return rank * (t // ranks) + local
    chunk = t // (2 * ranks)
    return rank * chunk + local if local < chunk else (2 * ranks - 1 - rank) * chunk + (local - chunk)


def owner_and_work(layout, bq, bkv):
    tl = T // N
    owner = np.zeros(T, dtype=int)
    for r in range(N):
        for i in range(tl):
            owner[shard_row(i, r, N, T, layout)] = r
    tiles = []
    for r in range(N):  # the kernel's tiles of every (Q shard, K/V block) pair, skipped when all masked
        count = 0
        for blk in range(N):
            for q0 in range(0, tl, bq):
                for k0 in range(0, tl, bkv):
                    if shard_row(k0, blk, N, T, layout) <= shard_row(min(q0 + bq, tl) - 1, r, N, T, layout):
                        count += 1
        tiles.append(count)
    return owner, tiles


def ring_layouts(out_dir):
    require("12_ring", "return local < chunk ? rank * chunk + local : (2 * ranks - 1 - rank) * chunk + (local - chunk);")
    bq = constant("12_ring", "NUM_WARPS") * constant("12_ring", "ROWS_PER_WARP")  # BLOCK_Q
    bkv = constant("12_ring", "BLOCK_KV")
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 9), gridspec_kw={"height_ratios": [3, 1.3]})
    for col, layout in enumerate(("contiguous", "zigzag")):
        owner, tiles = owner_and_work(layout, bq, bkv)
        ax = axes[0, col]
        img = np.ones((T, T, 3))
        for i in range(T):
            rgb = plt.matplotlib.colors.to_rgb(colors[owner[i]])
            img[i, :i + 1] = rgb  # the causal row: keys 0..i, computed by the rank that owns query i
        ax.imshow(img, interpolation="nearest", aspect="equal")
        ax.set_title(f"{layout}: query rows coloured by their rank\n(each rank computes the coloured part of its rows)",
                     fontsize=10)
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
        bars = axes[1, col]
        bars.bar(range(N), tiles, color=colors)
        mean = sum(tiles) / N
        bars.axhline(mean, color="k", ls="--", lw=1)
        bars.set_xticks(range(N), [f"rank {r}" for r in range(N)])
        bars.set_ylabel(f"{bq}x{bkv} tiles computed")
        bars.set_title(f"causal work per rank: max/mean = {max(tiles) / mean:.2f}", fontsize=10)
        for r, x in enumerate(tiles):
            bars.text(r, x, str(x), ha="center", va="bottom", fontsize=9)
    fig.suptitle(f"Ring attention, N = {N} ranks, T = {T}, causal: the ring waits for its busiest rank at every step",
                 fontsize=11)
    fig.tight_layout()
    path = out_dir / "12_ring_layouts.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make(out_dir):
    return [ring_layouts(out_dir)]
