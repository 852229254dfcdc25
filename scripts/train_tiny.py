#!/usr/bin/env python3
"""Trains a tiny decoder-only transformer three times, from the same initial weights on the same
batches: with PyTorch's scaled_dot_product_attention (its FlashAttention-2 backend), with the lab's
attention op (section 11's backward, common/torch_op), and, as the yardstick, with SDPA's math
backend (another correct attention that rounds differently); plots the three loss curves.

The task is made here: sort a sequence of digits. Input: N digits, a separator, then the digits
sorted; the loss is on the sorted half. bf16 autocast, AdamW with a linear warm-up and gradient
clipping (without them the loss spikes, and a spike turns a one-ulp difference into two runs).
The curves can only differ by the attention's rounding, so the lab's gap to SDPA means something
only beside the gap between two SDPA backends: the script prints both, on the smoothed loss over
the steps before any two curves part by more than 5%, and the final losses.

  python3 scripts/train_tiny.py                         # 300 steps, plot to results/h200/training_loss.png
  python3 scripts/train_tiny.py --steps 50 --out /tmp/loss.png
  python3 scripts/train_tiny.py --replot results/h200/training_loss.json   # redraw from the record

Exit 0 done, 2 bad arguments or an output path that cannot be written (one line, checked before
anything runs or is created), 77 no torch or no CUDA GPU, 1 any other error (one line).
"""
import argparse
import copy
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "common" / "python"))
from labharness.options import _as_cpp  # noqa: E402  (argparse's messages in the section programs' words)
from labharness.record import writable_path_problem  # noqa: E402  (the section programs' path rules)


class BadInput(Exception):
    """Refused before anything runs or is written: exit 2 with this one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's usage block and "error:" line, as the lab's one line
        raise BadInput(_as_cpp(message))


def bad_values(a):
    """The first argument out of its range, in words ("" when all are fine). NaN fails every
    comparison, so each float is tested for being finite first."""
    for name, v, low in (("--steps", a.steps, 1), ("--batch", a.batch, 1), ("--digits", a.digits, 2),
                         ("--layers", a.layers, 1), ("--heads", a.heads, 1), ("--warmup", a.warmup, 0),
                         ("--seed", a.seed, 0)):
        if v < low:
            return f"{name} must be >= {low} (got {v})"
    if not (math.isfinite(a.lr) and a.lr > 0):
        return f"--lr must be a positive number (got {a.lr})"
    if not (math.isfinite(a.clip) and a.clip >= 0):
        return f"--clip must be a number >= 0 (got {a.clip})"
    return ""


def output_problem(a):
    """--out and the record beside it (--json, or --out's name with .json) checked before the minutes
    of training: a missing folder is refused, never created (a typo is not a new tree)."""
    why = writable_path_problem(a.out, want_dir=False)
    if why or a.replot:
        return f"--out: {why}" if why else ""
    why = writable_path_problem(a.json if a.json is not None else str(Path(a.out).with_suffix(".json")), want_dir=False)
    return f"--json: {why}" if why else ""


def read_record(path):
    """A saved training record for --replot, or BadInput saying why it is not one."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"{path} is not a training record ({getattr(e, 'strerror', None) or e})") from None
    curves = ("loss_sdpa", "loss_lab")
    if not isinstance(record, dict) or not all(isinstance(record.get(k), list) and record[k] for k in curves) or \
            not all(isinstance(x, (int, float)) for k in curves for x in record[k]):
        raise BadInput(f"{path} is not a training record (no loss_sdpa and loss_lab curves of numbers)")
    record.setdefault("task", "training")
    record.setdefault("gpu", "unknown GPU")
    return record


def build_model(torch, vocab, d_model, heads, layers, seq_len, attention_fn):
    nn = torch.nn
    head_dim = d_model // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
            self.proj = nn.Linear(d_model, d_model, bias=False)
            self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, head_dim).unbind(2)  # [B, T, H, D] each
            x = x + self.proj(attention_fn(q, k, v).reshape(b, t, d_model))
            return x + self.mlp(self.ln2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(seq_len, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return Model()


def main():
    ap = _Parser(description="train a tiny transformer with SDPA and with the lab's attention op")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--digits", type=int, default=24, help="sequence to sort (T = 2*digits)")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4, help="heads of dimension 64")
    ap.add_argument("--lr", type=float, default=5e-4, help="peak learning rate, after the warm-up")
    ap.add_argument("--warmup", type=int, default=50, help="steps of linear learning-rate warm-up")
    ap.add_argument("--clip", type=float, default=1.0, help="gradient norm clipped to this (0: no clipping)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "results" / "h200" / "training_loss.png"))
    ap.add_argument("--json", default=None, help="also write both curves here (default: next to --out)")
    ap.add_argument("--replot", metavar="JSON", help="only redraw --out from a saved record (no GPU needed)")
    a = ap.parse_args()
    why = (bad_values(a) if not a.replot else "") or output_problem(a)
    if why:
        raise BadInput(why)
    if a.replot:
        return report_and_plot(read_record(a.replot), Path(a.out))
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("cannot run here: torch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("cannot run here: no CUDA GPU")
        return 77
    from common.torch_op import attention
    from torch.nn.attention import SDPBackend, sdpa_kernel

    vocab, sep = 17, 16  # digits 0..15, separator
    seq_len = 2 * a.digits  # inputs: digits, sep, sorted[:-1]; targets shifted by one
    d_model = 64 * a.heads

    def sdpa_with(backend):
        def run(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      is_causal=True).transpose(1, 2)
        return run
    sdpa, control = sdpa_with(SDPBackend.FLASH_ATTENTION), sdpa_with(SDPBackend.MATH)

    def lab(q, k, v):
        return attention(q.contiguous(), k.contiguous(), v.contiguous(), causal=True)

    torch.manual_seed(a.seed)
    base = build_model(torch, vocab, d_model, a.heads, a.layers, seq_len, sdpa).cuda()
    data = torch.Generator().manual_seed(a.seed + 1)
    batches = []
    for _ in range(a.steps):  # the same batches, in the same order, for both runs
        x = torch.randint(0, 16, (a.batch, a.digits), generator=data)
        seq = torch.cat([x, torch.full((a.batch, 1), sep), x.sort(dim=1).values], dim=1)
        batches.append(seq)

    # The block calls the attention it was built with: build the model per run, then load the
    # same initial weights.
    def train_with(fn, name):
        torch.manual_seed(a.seed)
        model = build_model(torch, vocab, d_model, a.heads, a.layers, seq_len, fn).cuda()
        model.load_state_dict(base.state_dict())
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
        warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / max(a.warmup, 1)))
        losses, t0 = [], time.time()
        for seq in batches:
            seq = seq.cuda(non_blocking=True)
            inp, tgt = seq[:, :-1], seq[:, 1:]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(inp)
            loss = F.cross_entropy(logits[:, a.digits:].float().reshape(-1, vocab), tgt[:, a.digits:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if a.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            warm.step()
            losses.append(loss.item())
        print(f"{name:>7}: loss {losses[0]:.3f} -> {losses[-1]:.4f} in {a.steps} steps ({time.time() - t0:.1f} s)")
        return losses

    ref = train_with(sdpa, "sdpa")
    mine = train_with(lab, "lab")
    other = train_with(control, "control")
    record = {"task": f"sort {a.digits} digits of 16", "steps": a.steps, "batch": a.batch, "layers": a.layers,
              "heads": a.heads, "head_dim": 64, "dtype": "bf16 autocast", "lr": a.lr, "warmup": a.warmup,
              "clip": a.clip, "seed": a.seed, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "sdpa_backend": "FLASH_ATTENTION", "control_backend": "MATH",
              "loss_sdpa": ref, "loss_lab": mine, "loss_control": other}
    record["gap"] = gaps(ref, mine, other)
    out = Path(a.out)
    json_path = Path(a.json) if a.json else out.with_suffix(".json")
    json_path.write_text(json.dumps(record) + "\n")
    return report_and_plot(record, out)


SMOOTH = 10  # steps of the trailing mean the gaps are measured on (one batch's noise is not a gap)
PART = 0.05  # two curves "part" at the first step their smoothed losses differ by more than this


def smooth(xs, w=SMOOTH):
    """Trailing mean over the last w values (fewer at the start)."""
    out, total = [], 0.0
    for i, x in enumerate(xs):
        total += x - (xs[i - w] if i >= w else 0.0)
        out.append(total / min(i + 1, w))
    return out


def rel_gap(a, b):
    """Per step |a - b| / b of two smoothed curves (b the reference)."""
    return [abs(x - y) / max(abs(y), 1e-9) for x, y in zip(smooth(a), smooth(b))]


def gaps(ref, mine, control=None):
    """The comparison the summary line prints: for lab vs SDPA and (when there is one) control vs SDPA,
    the max relative gap of the smoothed loss over the steps before any pair parts by more than PART,
    and the first step each pair parts (None: never)."""
    pairs = {"lab": rel_gap(mine, ref)}
    if control:
        pairs["control"] = rel_gap(control, ref)
    parted = {k: next((i for i, r in enumerate(g) if r > PART), None) for k, g in pairs.items()}
    window = min([p for p in parted.values() if p is not None] + [len(ref)])
    return {"steps_compared": window, "smooth_steps": SMOOTH, "part_threshold": PART,
            **{f"max_gap_{k}": max(g[:max(window, 1)]) for k, g in pairs.items()},
            **{f"parted_{k}": p for k, p in parted.items()},
            "final": {"sdpa": ref[-1], "lab": mine[-1], **({"control": control[-1]} if control else {})}}


def summary(record):
    """The one line a run ends with."""
    g = gaps(record["loss_sdpa"], record["loss_lab"], record.get("loss_control"))
    when = lambda p: "never" if p is None else f"step {p}"
    line = (f"gap over the first {g['steps_compared']} steps (smoothed over {SMOOTH}): lab vs SDPA max "
            f"{100 * g['max_gap_lab']:.2f}%")
    if "max_gap_control" in g:
        line += f", SDPA math vs SDPA flash max {100 * g['max_gap_control']:.2f}%"
    line += f"; parted by >{100 * PART:.0f}%: lab {when(g['parted_lab'])}"
    if "parted_control" in g:
        line += f", control {when(g['parted_control'])}"
    f = g["final"]
    line += f"; final loss SDPA {f['sdpa']:.4f}, lab {f['lab']:.4f}" + (
        f", control {f['control']:.4f}" if "control" in f else "")
    return line


def report_and_plot(record, out):
    """Prints the gaps between the curves and draws them (also from a saved record: --replot)."""
    print(summary(record))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return 0
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(record["loss_sdpa"], label="PyTorch SDPA (FlashAttention-2 backend)", linewidth=1.5)
    ax.plot(record["loss_lab"], label="lab attention op (section 11 backward)", linewidth=1.0, linestyle="--")
    if record.get("loss_control"):
        ax.plot(record["loss_control"], label="control: SDPA math backend", linewidth=1.0, linestyle=":",
                color="black")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (sorted half)")
    ax.set_title(f"{record['task']}: same weights, same batches ({record['gpu']})", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print("wrote", out)
    return 0


def entry():
    """Exit codes as the section programs: 2 bad input (one line), 77 cannot run here, and any other
    error one line too, not a traceback (LAB_TRACEBACK=1 shows it)."""
    try:
        code = main()
    except BadInput as e:
        print(f"bad input: {e}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception as e:  # noqa: BLE001
        if os.environ.get("LAB_TRACEBACK"):
            raise
        print(f"error: {type(e).__name__}: {e} (LAB_TRACEBACK=1 shows the whole traceback)", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    entry()
