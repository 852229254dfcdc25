"""04 fp16: the fragment layout of mma.sync.m16n8k16 (which lane of the warp holds which element
of A, B and C, and in which register), as the mma variant's comment in solutions/04_fp16.cu
states it (lane = 4·g + t)."""
import matplotlib.pyplot as plt
import numpy as np

from _common import require


def owners():
    a = {}  # (row, col) -> (lane, register name)
    b = {}
    c = {}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for half in range(2):
            a[(g, 2 * t + half)] = (lane, "a0")
            a[(g + 8, 2 * t + half)] = (lane, "a1")
            a[(g, 2 * t + 8 + half)] = (lane, "a2")
            a[(g + 8, 2 * t + 8 + half)] = (lane, "a3")
            b[(2 * t + half, g)] = (lane, "b0")
            b[(2 * t + 8 + half, g)] = (lane, "b1")
            c[(g, 2 * t + half)] = (lane, f"c{half}")
            c[(g + 8, 2 * t + half)] = (lane, f"c{2 + half}")
    return a, b, c


def draw(ax, cells, rows, cols, title, color_of):
    img = np.zeros((rows, cols, 3))
    for (r, k), (lane, reg) in cells.items():
        img[r, k] = color_of(lane)
    ax.imshow(img, interpolation="nearest")
    for (r, k), (lane, reg) in cells.items():
        ax.text(k, r, f"{lane}\n{reg}", ha="center", va="center", fontsize=5.5)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=6)
    ax.set_title(title, fontsize=10)
    ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
    ax.grid(which="minor", color="w", lw=0.6)
    ax.tick_params(which="minor", length=0)


def make(out_dir):
    require("04_fp16", "//   A (16 x 16, row-major) 4 regs: a0 = (row g,   cols 2t, 2t+1)   a1 = (row g+8, cols 2t, 2t+1)")
    require("04_fp16", "//   C/D (16 x 8, fp32)     4 regs: c0, c1 = (row g, cols 2t, 2t+1)  c2, c3 = (row g+8, same cols)")
    a, b, c = owners()
    cmap = plt.get_cmap("tab10")

    def by_g(lane):  # rows are shared by the 4 lanes of a quad (same g): colour by quad
        return np.array(cmap((lane // 4) % 10)[:3]) * 0.55 + 0.45

    fig = plt.figure(figsize=(15, 7.2))
    gs = fig.add_gridspec(1, 3, width_ratios=[16, 8, 8])
    draw(fig.add_subplot(gs[0]), a, 16, 16, "A = Q or P fragment (16 x 16, row-major)\nrows = query rows, cols = k", by_g)
    draw(fig.add_subplot(gs[1]), b, 16, 8, "B = Kᵀ or V fragment (16 x 8)\nrows = k, cols = n", by_g)
    draw(fig.add_subplot(gs[2]), c, 16, 8, "C/D = S or O accumulator (16 x 8, fp32)\nrows = query rows", by_g)
    fig.suptitle("mma.sync.m16n8k16: each cell shows the lane (0-31) that holds it and the register; "
                 "lane = 4·g + t, colour = quad g.\nA row of S (and of O) is spread over the 4 lanes of one quad: "
                 "row max and row sum need 2 shuffles (xor 1, xor 2). Two C blocks side by side = one A fragment: "
                 "P feeds P·V from registers.", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    path = out_dir / "04_mma_fragments.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
