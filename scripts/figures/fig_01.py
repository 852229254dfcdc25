"""01 naive: the HBM traffic and the memory of S and P against T, from the section's byte model
(solutions/01_naive.cu: naive_hbm_bytes = fused_hbm_bytes + 2 · score_bytes, score_bytes = S and P
in fp32) beside the fused minimum that sections 02-04 approach."""
import matplotlib.pyplot as plt

from _common import require

BH, D = 32, 64        # B·H heads, head dimension (the section's bench shapes)
H200_BYTES = 141e9    # device memory of the H200 the lab measures on


def fused_bytes(t):   # lab::fused_hbm_bytes, fp32: Q, K, V read, O written once, + LSE
    return (4 * BH * t * D) * 4 + BH * t * 4


def score_bytes(t):   # S and P, fp32
    return 2 * BH * t * t * 4


def make(out_dir):
    require("01_naive", "return lab::fused_hbm_bytes(p) + 2 * score_bytes(p);")
    require("01_naive", "return 2 * p.score_elems() * int64_t(sizeof(float));")
    ts = [2 ** k for k in range(8, 18)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.loglog(ts, [fused_bytes(t) + 2 * score_bytes(t) for t in ts], "o-", color="tab:red",
               label="naive: + S, P written and read (16 B per score)")
    ax1.loglog(ts, [fused_bytes(t) for t in ts], "s-", color="tab:blue", label="fused: Q, K, V, O once")
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("T (= T_q = T_kv)")
    ax1.set_ylabel("HBM bytes per forward (model)")
    ax1.set_title(f"Traffic: T² against T  (B·H = {BH}, D = {D}, fp32)")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)
    ax2.loglog(ts, [score_bytes(t) for t in ts], "o-", color="tab:red", label="S + P in device memory")
    ax2.axhline(H200_BYTES, color="k", ls="--", lw=1)
    ax2.text(ts[0], H200_BYTES * 1.3, "H200: 141 GB", fontsize=8)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("T")
    ax2.set_ylabel("bytes")
    ax2.set_title("Memory: where the naive program must stop")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = out_dir / "01_traffic_vs_t.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
