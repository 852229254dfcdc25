"""Figures of section 06 (paged): a block table mapping logical to physical blocks, and the KV
memory fragmentation the serving simulation measures.

Both come from the section's own program: the block tables are those `06_paged --dump` writes
(the allocator's shuffled pool, the lengths from the seed), and the memory numbers are
`06_paged --simulate --json`. Needs build/bin/06_paged (the solution's build).
"""
import json
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def program():
    exe = ROOT / "build" / "bin" / "06_paged"
    if not exe.exists():
        raise SystemExit(f"figures: {exe.relative_to(ROOT)} is missing: build it first (cmake --build build --target 06_paged)")
    return exe


def table_figure(out):
    import matplotlib.pyplot as plt
    import numpy as np
    page, b, t_kv = 16, 4, 100
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(program()), "--cpu", "--t", "1", "--t-kv", str(t_kv), "--b", str(b), "--h", "2", "--h-kv", "1",
                        "--d", "64", "--page-size", str(page), "--seed", "3", "--dump", tmp], check=True,
                       stdout=subprocess.DEVNULL)
        tables = np.load(Path(tmp) / "block_tables.npy")
        lengths = np.load(Path(tmp) / "kv_len.npy") if (Path(tmp) / "kv_len.npy").exists() else None
    used = sorted({int(e) for e in tables.flatten() if e >= 0})
    pool = max(used) + 2
    fig, ax = plt.subplots(figsize=(10, 4.2))
    colors = ["#4C72B0", "#DD8452", "#55A868", "#C44E52"]
    for s in range(tables.shape[0]):
        y0 = 3.2 + (tables.shape[0] - 1 - s) * 0.7
        n = int(lengths[s]) if lengths is not None else t_kv
        ax.text(-0.6, y0, f"seq {s}\n({n} keys)", ha="right", va="center", fontsize=8)
        for j, e in enumerate(tables[s]):
            if e < 0:
                ax.add_patch(plt.Rectangle((j, y0 - 0.25), 0.9, 0.5, fill=False, ec="lightgrey"))
                ax.text(j + 0.45, y0, "-1", ha="center", va="center", fontsize=7, color="grey")
                continue
            ax.add_patch(plt.Rectangle((j, y0 - 0.25), 0.9, 0.5, color=colors[s % 4], alpha=0.85))
            ax.text(j + 0.45, y0, str(int(e)), ha="center", va="center", fontsize=8, color="white")
            x_phys = int(e) * (tables.shape[1] + 2) / pool
            ax.annotate("", xy=(x_phys + 0.2, 0.55), xytext=(j + 0.45, y0 - 0.27),
                        arrowprops=dict(arrowstyle="->", color=colors[s % 4], lw=0.8, alpha=0.7))
    width = (tables.shape[1] + 2) / pool
    owner = {int(e): s for s in range(tables.shape[0]) for e in tables[s] if e >= 0}
    for p in range(pool):
        c = colors[owner[p] % 4] if p in owner else "white"
        ax.add_patch(plt.Rectangle((p * width, 0.1), width * 0.9, 0.45, color=c, ec="black", lw=0.3))
        ax.text(p * width + width * 0.45, 0.33, str(p), ha="center", va="center", fontsize=7,
                color="white" if p in owner else "grey")
    ax.text(-0.6, 0.33, "physical\npool", ha="right", va="center", fontsize=8)
    ax.text(0, 3.55 + (tables.shape[0] - 1) * 0.7, f"block table [B, {tables.shape[1]}]: logical block j -> physical block (page = {page} tokens)",
            fontsize=9)
    ax.set_xlim(-2.2, tables.shape[1] + 2.2)
    ax.set_ylim(0, 3.8 + tables.shape[0] * 0.7)
    ax.axis("off")
    ax.set_title("06's block tables (from `06_paged --dump`): logical neighbours are scattered over the pool; "
                 "white = free blocks", fontsize=9)
    fig.tight_layout()
    path = out / "06_block_table.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def fragmentation_figure(out):
    import matplotlib.pyplot as plt
    with tempfile.TemporaryDirectory() as tmp:
        js = Path(tmp) / "sim.json"
        subprocess.run([str(program()), "--simulate", "--json", str(js)], check=True, stdout=subprocess.DEVNULL)
        r = json.loads(js.read_text())
    mean = r["mean_tokens"]
    per_token = r["config"]["bytes_per_token"]
    gb = lambda tokens: tokens * per_token / 1e9
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    names = ["live tokens", "contiguous\n(max_seq_len each)", "paged", "paged +\nprefix sharing"]
    vals = [gb(mean["live"]), gb(mean["contiguous"]), gb(mean["paged"]), gb(mean["paged_shared"])]
    bars = a.bar(names, vals, color=["#8172B2", "#C44E52", "#4C72B0", "#55A868"])
    for bar, v in zip(bars, vals):
        a.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.0f} GB", ha="center", va="bottom", fontsize=8)
    a.set_ylabel("KV memory, mean over decode steps (GB)")
    a.set_title(f"{r['config']['requests']} requests, block {r['config']['block_size']}: "
                f"contiguous wastes {100 * r['contiguous_waste']:.0f}%", fontsize=9)
    a.tick_params(axis="x", labelsize=8)
    sweep = r["block_size_sweep"]
    bs = [s["block_size"] for s in sweep]
    b.plot(bs, [100 * s["paged_waste"] for s in sweep], "o-", label="paged: internal fragmentation")
    b.plot(bs, [100 * s["sharing_saving"] for s in sweep], "s-", label="prefix sharing saves (of paged)")
    b.set_xscale("log", base=2)
    b.set_xticks(bs)
    b.set_xticklabels([str(x) for x in bs])
    b.set_xlabel("block size (tokens)")
    b.set_ylabel("%")
    b.legend(fontsize=8)
    b.set_title("bigger blocks: more waste in each sequence's last block", fontsize=9)
    fig.suptitle("What `06_paged --simulate` measures (its default stream of requests)", fontsize=10)
    fig.tight_layout()
    path = out / "06_fragmentation.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def make(out_dir):
    out = Path(out_dir)
    return [table_figure(out), fragmentation_figure(out)]
