"""Figure of section 08: the producer/consumer ring over time, with its barriers and phases.

STAGES (3 at D = 128) and the tile sizes are read from common/hopper/ws_forward.cuh. The timeline
is a small event simulation of the protocol the section implements (fill n -> slot n % STAGES,
phase parity (n / STAGES) & 1; the producer waits on k_empty before K and v_empty before V with
parity ^ 1, the consumers on k_full / v_full with parity, and give K back once S has read it, V
once P V has). The durations
are illustrative units, not measurements: what the figure shows is the order of events.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _stages(head_dim=128):
    text = (ROOT / "common/hopper/ws_forward.cuh").read_text()
    # The ring's slots are computed from what fits; the header pins them in a static_assert.
    m = re.search(r"Tiles<64>::STAGES == (\d+) && Tiles<128>::STAGES == (\d+)", text)
    if not m:
        raise SystemExit("fig_08: the STAGES static_assert not found in common/hopper/ws_forward.cuh")
    return int(m.group(1)) if head_dim == 64 else int(m.group(2))


def simulate(stages, fills, load=2.0, s_time=1.0, pv_time=1.0, issue=0.2):
    """Event times of each fill: the producer's K and V issues (each after its wait on k_empty /
    v_empty), K and V landed (k_full, v_full), S done (K released) and P V done (V released)."""
    ev, k_released, v_released, consumer_free, producer_free = [], {}, {}, 0.0, 0.0
    for n in range(fills):
        slot, parity = n % stages, (n // stages) & 1
        k_issue = max(producer_free, k_released.get(n - stages, 0.0))  # k_empty's phase for fill n - stages
        v_issue = max(k_issue + issue, v_released.get(n - stages, 0.0))
        k_landed, v_landed = k_issue + issue + load, v_issue + issue + load
        producer_free = v_issue + issue
        s_start = max(k_landed, consumer_free)
        s_end = s_start + s_time
        pv_end = max(v_landed, s_end) + pv_time
        k_released[n], v_released[n], consumer_free = s_end, pv_end, pv_end
        ev.append(dict(n=n, slot=slot, parity=parity, k_issue=k_issue, v_issue=v_issue, k_landed=k_landed,
                       v_landed=v_landed, s_start=s_start, s_end=s_end, pv_end=pv_end))
    return ev


def make(out_dir):
    import matplotlib.pyplot as plt

    stages = _stages(128)
    fills = 3 * stages - 1
    ev = simulate(stages, fills)
    fig, ax = plt.subplots(figsize=(11, 5.4))
    lanes = ["producer (1 warp)"] + [f"slot {s}" for s in range(stages)] + ["consumers (2 warpgroups)"]
    y = {name: len(lanes) - 1 - i for i, name in enumerate(lanes)}
    cmap = plt.get_cmap("tab10")
    red = "#b00020"
    for e in ev:
        c = cmap(e["n"] % 10)
        sl = f"slot {e['slot']}"
        for half, dy, issue, landed, end in (("K", 0.2, e["k_issue"], e["k_landed"], e["s_end"]),
                                              ("V", -0.2, e["v_issue"], e["v_landed"], e["pv_end"])):
            ax.barh(y["producer (1 warp)"] + dy, 0.2, height=0.35, left=issue, color=c, edgecolor="black", lw=0.5)
            ax.text(issue + 0.1, y["producer (1 warp)"] + dy, f"{half}{e['n']}", ha="center", va="center", fontsize=5.5)
            ax.barh(y[sl] + dy, landed - issue, height=0.38, left=issue, color=c, alpha=0.35, edgecolor=c)
            ax.barh(y[sl] + dy, max(end - landed, 0), height=0.38, left=landed, color=c, alpha=0.85,
                    edgecolor="black", lw=0.5)
            ax.plot([landed] * 2, [y[sl] + dy - 0.19, y[sl] + dy + 0.19], color="black", lw=1.2)
            ax.plot([end] * 2, [y[sl] + dy - 0.19, y[sl] + dy + 0.19], color=red, lw=1.2, ls="--")
            if e["n"] >= stages:  # the producer waited for this half's previous release
                prev = ev[e["n"] - stages]
                released = prev["s_end"] if half == "K" else prev["pv_end"]
                if released >= issue - 1e-9:
                    ax.annotate("", xy=(issue, y["producer (1 warp)"] + dy - 0.15), xytext=(released, y[sl] + dy),
                                arrowprops=dict(arrowstyle="->", color=red, lw=0.8))
        ax.text(e["k_issue"] + 0.05, y[sl] + 0.45, f"fill {e['n']}, parity {e['parity']}", fontsize=6, va="bottom")
        ax.barh(y["consumers (2 warpgroups)"], e["pv_end"] - e["s_start"], left=e["s_start"], color=c,
                edgecolor="black", lw=0.5)
        ax.text((e["s_start"] + e["pv_end"]) / 2, y["consumers (2 warpgroups)"], f"S {e['n']} | PV {e['n']}",
                ha="center", va="center", fontsize=6.5)
    ax.set_yticks([y[n] for n in lanes])
    ax.set_yticklabels(lanes, fontsize=8)
    ax.set_xlabel("time (illustrative units)")
    ax.set_title(f"The K/V ring, STAGES = {stages} (D = 128): fill n goes to slot n % {stages}; its barriers' "
                 f"phase parity is (n / {stages}) & 1 (upper half of a slot: K; lower: V)", fontsize=9)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color="grey", alpha=0.35, label="TMA copy in flight (k_full / v_full pending)"),
                       Patch(color="grey", alpha=0.85, label="K or V waiting for, then read by, the consumers"),
                       Line2D([], [], color="black", label="full phase completes (bytes landed)"),
                       Line2D([], [], color=red, ls="--", label="k_empty / v_empty phase completes (2 releases)"),
                       Line2D([], [], color=red, marker=">", lw=0.8,
                              label="producer's wait on k_empty / v_empty (parity ^ 1)")],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax.set_ylim(-0.8, len(lanes) - 0.2)
    fig.tight_layout()
    path = Path(out_dir) / "08_ring_timeline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path, pingpong(out_dir), persistent(out_dir)]


def consumers_of(head_dim):
    """The consumer warpgroups of ws-pingpong at head_dim, read from the kernel's source."""
    text = (ROOT / "common/hopper/ws_forward.cuh").read_text()
    m = re.search(r'int pingpong_consumers\(int d\) \{ return d == 64 \? (\d+) : (\d+); \}', text)
    if not m:
        raise SystemExit("fig_08: pingpong_consumers() not found in common/hopper/ws_forward.cuh")
    return int(m.group(1)) if head_dim == 64 else int(m.group(2))


def schedule(wgs, steps, gemm, softmax, turns):
    """Per warpgroup, the (start, end, kind) of its GEMM issues and softmaxes. One tensor core runs
    the GEMMs in issue order. turns=False: a warpgroup issues as soon as its softmax is done (they
    fall into step: all issue, then all exponentiate). turns=True: warpgroup w issues its step k
    only after warpgroup w - 1 has issued its own (the named-barrier ring of ws-pingpong)."""
    tc_free, last_issue, out = 0.0, -1.0, {w: [] for w in range(wgs)}
    ready = [0.0] * wgs
    for k in range(steps):
        for w in range(wgs):
            start = max(ready[w], tc_free, last_issue if turns else 0.0)
            end = start + gemm
            out[w].append((start, end, "gemm"))
            tc_free, last_issue = end, start
            out[w].append((end, end + softmax, "softmax"))
            ready[w] = end + softmax
    return out


def pingpong(out_dir, steps=4):
    """The ping-pong timeline: consumer warpgroups' GEMMs (on the one tensor core) and softmaxes,
    without and with the turns, at D = 128 (2 warpgroups; a GEMM step about as long as a softmax)
    and D = 64 (the GEMMs half as long: 2 warpgroups leave the tensor core idle, ws-pingpong's count
    there does not). Durations are illustrative units."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    panels = [(128, False, 2), (128, True, consumers_of(128)), (64, True, 2), (64, True, consumers_of(64))]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 8.0), sharex=True)
    for ax, (d, turns, wgs) in zip(axes, panels):
        gemm, softmax = (1.0, 1.0) if d == 128 else (0.5, 1.0)  # S + PV per step, and one softmax
        if not turns:  # the failure mode: the warpgroups in step, issuing together and sharing the
            sched = {w: [] for w in range(wgs)}  # tensor core, then all exponentiating while it idles
            t = 0.0
            for k in range(steps):
                for w in range(wgs):
                    sched[w].append((t, t + wgs * gemm, "gemm"))
                    sched[w].append((t + wgs * gemm, t + wgs * gemm + softmax, "softmax"))
                t += wgs * gemm + softmax
        else:
            sched = schedule(wgs, steps, gemm, softmax, True)
        spans = sorted((s, e) for w in sched for s, e, kind in sched[w] if kind == "gemm")
        busy, reach = 0.0, 0.0  # the union of the GEMM intervals: when the tensor core works
        for s, e in spans:
            busy += max(0.0, e - max(s, reach))
            reach = max(reach, e)
        span = max(e for w in sched for s, e, kind in sched[w])
        for w in range(wgs):
            for s, e, kind in sched[w]:
                ax.barh(wgs - 1 - w, e - s, left=s, color="#3b6fb6" if kind == "gemm" else "#f2a541",
                        edgecolor="black", lw=0.5)
        ax.set_yticks(range(wgs))
        ax.set_yticklabels([f"consumer {w}" for w in reversed(range(wgs))], fontsize=8)
        what = "ws-pingpong (turns by named barriers)" if turns else "no turns: the warpgroups fall into step"
        ax.set_title(f"D = {d}, {wgs} consumer warpgroups, {what}: tensor core busy "
                     f"{100 * busy / span:.0f}% of the time shown", fontsize=9)
    axes[-1].set_xlabel("time (illustrative units: a step's GEMMs S(n) + PV(n-1) against one softmax)")
    axes[0].legend(handles=[Patch(color="#3b6fb6", label="GEMMs on the tensor core (S(n), PV(n-1))"),
                            Patch(color="#f2a541", label="softmax (exponentials, row sums: no tensor core)")],
                   fontsize=7, loc="upper right")
    fig.tight_layout()
    path = Path(out_dir) / "08_pingpong_timeline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _job_order(section_heads):
    """The kernel's causal job order (job_place in common/hopper/ws_forward.cuh): job index ->
    (head, q_tile), Q tile by Q tile, longest first, across sections of section_heads heads."""
    text = (ROOT / "common/hopper/ws_forward.cuh").read_text()
    for rule in ("const int section = index / per_section, first_bh = section * s;",
                 "const int r = index - section * per_section, q = r / width;",
                 "return {first_bh + r % width, causal ? q_tiles - 1 - q : q};"):
        if rule not in text:
            raise SystemExit("fig_08: job_place's order not found in common/hopper/ws_forward.cuh")

    def place(index, q_tiles, heads):
        s = max(section_heads, 1)
        section, first = index // (s * q_tiles), index // (s * q_tiles) * s
        width = min(s, heads - first)
        r = index - section * s * q_tiles
        return first + r % width, q_tiles - 1 - r // width
    return place


def persistent(out_dir, sms=3, heads=2, q_tiles=6, setup=0.6, epilogue=0.25, handover=0.1):
    """A causal problem (Q tile q sees q + 1 K/V tiles) on a few SMs, its jobs taken greedily in
    the kernel's order: by the hardware's block scheduler (a block per job: each pays its start,
    the launch, the barriers and the wait for Q and its first K/V tile, and its epilogue with the
    tensor core idle) and by ws-persistent's queue (one start per SM; between jobs only what the
    next Q's load does not hide under the last P V and the epilogue). Durations are illustrative
    units (a K/V tile = 1); the measured difference is the handout's table."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    order = _job_order(section_heads=heads)  # the heads' K and V fit in L2 together: one section
    jobs = [order(i, q_tiles, heads) for i in range(heads * q_tiles)]
    colours = ["#3b6fb6", "#6aa84f", "#c27ba0", "#e69138"]
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.4), sharex=True)
    for ax, plain in zip(axes, (True, False)):
        free = [setup if not plain else 0.0] * sms
        for head, q in jobs:
            sm = min(range(sms), key=lambda s: free[s])  # the SM that is free first takes the next job
            t = free[sm]
            if plain:
                ax.barh(sms - 1 - sm, setup, left=t, color="#dddddd", edgecolor="#888888", hatch="///", lw=0.5)
                t += setup
            elif t > setup:
                t += handover
            ax.barh(sms - 1 - sm, q + 1, left=t, color=colours[head % len(colours)], edgecolor="black", lw=0.5)
            ax.text(t + (q + 1) / 2, sms - 1 - sm, f"h{head} q{q}", ha="center", va="center", fontsize=7, color="white")
            t += q + 1
            if plain:
                ax.barh(sms - 1 - sm, epilogue, left=t, color="#eeeeee", edgecolor="#888888", lw=0.5)
                t += epilogue
            free[sm] = t
        for sm in range(sms):
            if not plain:
                ax.barh(sms - 1 - sm, setup, left=0.0, color="#dddddd", edgecolor="#888888", hatch="///", lw=0.5)
        span = max(free)
        ax.set_yticks(range(sms))
        ax.set_yticklabels([f"SM {s}" for s in reversed(range(sms))], fontsize=8)
        what = ("plain grid (ws-pingpong): a block per job" if plain else
                "ws-persistent: a block per SM, jobs from the queue")
        ax.set_title(f"{what}: the last job ends at {span:.1f}", fontsize=9)
    axes[-1].set_xlabel("time (illustrative units: one K/V tile = 1; a job at T = 4096 has up to 32 tiles)")
    axes[-1].legend(handles=[Patch(facecolor="#dddddd", hatch="///", label="block start: launch, barriers, Q and first K/V in flight"),
                            Patch(color="#eeeeee", label="epilogue (O, LSE to memory) with nothing behind it"),
                            Patch(color=colours[0], label="a job's K/V tiles (h: head, q: Q tile, longest first)")],
                   fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=3)
    fig.tight_layout()
    path = Path(out_dir) / "08_persistent_timeline.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

