#!/usr/bin/env python3
"""Trains a tiny decoder-only transformer twice, from the same initial weights on the same batches:
once with PyTorch's scaled_dot_product_attention, once with the lab's attention op (section 11's
backward, common/torch_op), and plots both loss curves on one picture.

The task is made here: sort a sequence of digits. Input: N digits, a separator, then the digits
sorted; the loss is on the sorted half. bf16 autocast, AdamW. The two curves can only differ by
the attention's rounding (the lab's op and SDPA round P, dS and the gradients differently), so
their gap is what bf16 allows; the script prints it.

  python3 scripts/train_tiny.py                         # 400 steps, plot to results/h200/training_loss.png
  python3 scripts/train_tiny.py --steps 50 --out /tmp/loss.png
  python3 scripts/train_tiny.py --replot results/h200/training_loss.json   # redraw from the record

Exit 0 done, 2 bad arguments, 77 no torch or no CUDA GPU.
"""
import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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
    ap = argparse.ArgumentParser(description="train a tiny transformer with SDPA and with the lab's attention op")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--digits", type=int, default=24, help="sequence to sort (T = 2*digits)")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4, help="heads of dimension 64")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "results" / "h200" / "training_loss.png"))
    ap.add_argument("--json", default=None, help="also write both curves here (default: next to --out)")
    ap.add_argument("--replot", metavar="JSON", help="only redraw --out from a saved record (no GPU needed)")
    a = ap.parse_args()
    if a.replot:
        try:
            record = json.loads(Path(a.replot).read_text())
            record["loss_sdpa"], record["loss_lab"]
        except (OSError, ValueError, KeyError) as e:
            print(f"bad input: {a.replot} is not a training record ({e})", file=sys.stderr)
            return 2
        return report_and_plot(record, Path(a.out))
    if a.steps < 1 or a.batch < 1 or a.digits < 2 or a.layers < 1 or a.heads < 1 or not a.lr > 0:
        print("bad input: --steps, --batch, --layers, --heads >= 1, --digits >= 2, --lr > 0", file=sys.stderr)
        return 2
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

    vocab, sep = 17, 16  # digits 0..15, separator
    seq_len = 2 * a.digits  # inputs: digits, sep, sorted[:-1]; targets shifted by one
    d_model = 64 * a.heads

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=True).transpose(1, 2)

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
        losses, t0 = [], time.time()
        for seq in batches:
            seq = seq.cuda(non_blocking=True)
            inp, tgt = seq[:, :-1], seq[:, 1:]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(inp)
            loss = F.cross_entropy(logits[:, a.digits:].float().reshape(-1, vocab), tgt[:, a.digits:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"{name:>5}: loss {losses[0]:.3f} -> {losses[-1]:.4f} in {a.steps} steps ({time.time() - t0:.1f} s)")
        return losses

    ref = train_with(sdpa, "sdpa")
    mine = train_with(lab, "lab")
    record = {"task": f"sort {a.digits} digits of 16", "steps": a.steps, "batch": a.batch, "layers": a.layers,
              "heads": a.heads, "head_dim": 64, "dtype": "bf16 autocast", "lr": a.lr, "seed": a.seed,
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "loss_sdpa": ref, "loss_lab": mine}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path = Path(a.json) if a.json else out.with_suffix(".json")
    json_path.write_text(json.dumps(record) + "\n")
    return report_and_plot(record, out)


def report_and_plot(record, out):
    """Prints the gap between the two curves and draws them (also from a saved record: --replot)."""
    ref, mine = record["loss_sdpa"], record["loss_lab"]
    rel = [abs(x - y) / max(x, 1e-9) for x, y in zip(ref, mine)]
    quarter = max(1, len(rel) // 4)
    apart = next((i for i, r in enumerate(rel) if r > 0.05), None)
    print(f"gap: max {100 * max(rel[:quarter]):.2f}% of the loss over the first {quarter} steps; "
          + (f"first step more than 5% apart: {apart}" if apart is not None else "never more than 5% apart")
          + f"; final loss {ref[-1]:.4f} (SDPA) vs {mine[-1]:.4f} (lab)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return 0
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(ref, label="PyTorch SDPA", linewidth=1.5)
    ax.plot(mine, label="lab attention op (section 11 backward)", linewidth=1.0, linestyle="--")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (sorted half)")
    ax.set_title(f"{record['task']}: same weights, same batches ({record['gpu']})", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
