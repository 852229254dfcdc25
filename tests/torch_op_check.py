"""Tests of the lab's attention as a PyTorch op (common/torch_op).

  --bad-inputs   wrong device, dtype, strides, D, shapes: each raises TypeError/ValueError with a
                 reason, nothing is built or launched (runs without a GPU; needs torch)
  --gpu          outputs and dQ, dK, dV against fp64 autograd on ragged, causal and GQA shapes,
                 each gradient within 2x the error of eager attention at the same precision + atol;
                 torch.library.opcheck; torch.compile(fullgraph=True) through forward and backward

Exit 0 pass, 1 fail, 77 when torch (or, for --gpu, a CUDA GPU) is missing.
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def reference(q, k, v, causal):
    """Attention by its definition on [B, T, H, D] tensors, in their dtype (fp64 for the truth)."""
    import torch
    b, t_q, h, d = q.shape
    t_kv, h_kv = k.shape[1], k.shape[2]
    kk = k.repeat_interleave(h // h_kv, dim=2).transpose(1, 2)
    vv = v.repeat_interleave(h // h_kv, dim=2).transpose(1, 2)
    s = (q.transpose(1, 2) @ kk.transpose(-1, -2)) * d ** -0.5
    if causal:  # bottom-right aligned: row i sits at position i + T_kv - T_q
        i = torch.arange(t_q, device=q.device)[:, None]
        j = torch.arange(t_kv, device=q.device)[None, :]
        s = s.masked_fill(j > i + (t_kv - t_q), float("-inf"))
    p = torch.softmax(s.float() if s.dtype != torch.float64 else s, dim=-1).to(q.dtype)
    return (p @ vv).transpose(1, 2)


def bad_inputs():
    import torch
    from common.torch_op import attention
    f16 = dict(dtype=torch.float16)
    q = torch.zeros(1, 8, 2, 64, **f16)
    cases = [
        ("fp32", (q.float(), q.float(), q.float()), TypeError, "fp16 or bf16"),
        ("mixed dtypes", (q, q.bfloat16(), q), TypeError, "share a dtype"),
        ("3-d", (q[0], q[0], q[0]), ValueError, "4-d"),
        ("strides", (q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2)), ValueError, "contiguous"),
        ("D=96", (torch.zeros(1, 8, 2, 96, **f16),) * 3, ValueError, "D=96"),
        ("H % H_kv", (torch.zeros(1, 8, 3, 64, **f16), q, q), ValueError, "multiple of H_kv"),
        ("k, v differ", (q, q, torch.zeros(1, 9, 2, 64, **f16)), ValueError, "k and v shapes"),
        ("not a tensor", ([1.0], q, q), TypeError, "torch.Tensor"),
        ("CPU tensors", (q, q, q), ValueError, "CUDA"),
    ]
    failed = 0
    for name, args, kind, text in cases:
        try:
            attention(*args)
            print(f"FAIL {name}: no exception")
            failed += 1
        except kind as e:
            ok = text in str(e)
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {type(e).__name__}: {e}")
            failed += not ok
        except Exception as e:  # any other exception type is a failure too (but never a crash)
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            failed += 1
    print(f"{'PASS' if not failed else 'FAIL'}: {len(cases) - failed} of {len(cases)} bad inputs refused with a reason")
    return 0 if not failed else 1


def gpu():
    import torch
    if not torch.cuda.is_available():
        print("cannot run here: no CUDA GPU")
        return 77
    from common.torch_op import attention
    from common.torch_op.op import attention_forward
    torch.manual_seed(0)
    failed = 0
    shapes = [  # (B, T_q, T_kv, H, H_kv, D, causal, dtype)
        (2, 77, 77, 4, 4, 64, True, torch.bfloat16),
        (1, 100, 333, 4, 2, 128, True, torch.float16),
        (2, 129, 65, 8, 2, 64, False, torch.bfloat16),
        (1, 1, 1, 2, 1, 128, False, torch.float16),
        (1, 300, 300, 6, 3, 128, True, torch.bfloat16),
    ]
    for (b, t_q, t_kv, h, h_kv, d, causal, dt) in shapes:
        q = (torch.rand(b, t_q, h, d, device="cuda") - 0.5 + 0.25).to(dt)
        k = (torch.rand(b, t_kv, h_kv, d, device="cuda") - 0.5 + 0.25).to(dt)
        v = (torch.rand(b, t_kv, h_kv, d, device="cuda") - 0.5 + 0.5).to(dt)
        d_o = (torch.rand(b, t_q, h, d, device="cuda") - 0.5).to(dt)

        def run(fn, cast):
            xs = [x.detach().to(cast).requires_grad_() for x in (q, k, v)]
            out = fn(*xs, causal)
            out.backward(d_o.to(cast))
            return [out.detach().double()] + [x.grad.double() for x in xs]

        exact = run(reference, torch.float64)
        eager = run(reference, dt)
        mine = run(attention, dt)
        line = []
        for name, e, s, m in zip(("O", "dQ", "dK", "dV"), exact, eager, mine):
            bound = 2 * (s - e).abs().max().item() + 1e-3
            err = (m - e).abs().max().item()
            ok = err <= bound and torch.isfinite(m).all().item()
            failed += not ok
            line.append(f"{name} {err:.2e} <= {bound:.2e}" if ok else f"{name} {err:.2e} > {bound:.2e} FAIL")
        print(f"B={b} T_q={t_q} T_kv={t_kv} H={h}/{h_kv} D={d} causal={causal} {str(dt)[6:]}: " + ", ".join(line))

    q = torch.randn(1, 70, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 90, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 90, 2, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    try:
        torch.library.opcheck(attention_forward, (q, k, v, True))
        print("ok   torch.library.opcheck")
    except Exception as e:
        print(f"FAIL torch.library.opcheck: {type(e).__name__}: {e}")
        failed += 1

    def loss(q, k, v):
        return attention(q, k, v, causal=True).float().square().sum()
    grads_eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
    compiled = torch.compile(loss, fullgraph=True)
    grads_compiled = torch.autograd.grad(compiled(q, k, v), (q, k, v))
    worst = max((a.float() - c.float()).abs().max().item() / (a.float().abs().max().item() + 1e-6)
                for a, c in zip(grads_eager, grads_compiled))
    ok = worst < 1e-2
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} torch.compile(fullgraph=True): gradients match eager (max relative {worst:.1e})")
    print(f"{'PASS' if not failed else 'FAIL'}: lab attention op ({failed} failures)")
    return 0 if not failed else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bad-inputs", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("cannot run here: torch is not installed")
        return 77
    return bad_inputs() if a.bad_inputs else gpu()


if __name__ == "__main__":
    sys.exit(main())
