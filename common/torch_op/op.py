"""torch.library registration of the lab's attention (see __init__.py)."""
import os
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent
_EXT = None
SUPPORTED_D = (64, 128)
# The backward's dQ: "atomic" (fp32 atomics, fast, not bitwise reproducible) or "deterministic".
DETERMINISTIC = os.environ.get("LAB_ATTENTION_DETERMINISTIC", "0") == "1"


def load_extension(verbose=False):
    """Builds (once, cached by torch under ~/.cache/torch_extensions) and returns the extension."""
    global _EXT
    if _EXT is None:
        from torch.utils.cpp_extension import load
        _EXT = load(name="lab_attention_ext", sources=[str(_HERE / "ext.cu")],
                    extra_include_paths=[str(_HERE.parent)],
                    extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr", "-std=c++17", "-lineinfo"],
                    extra_cflags=["-O3", "-std=c++17"], verbose=verbose)
    return _EXT


def check_inputs(q, k, v):
    """Raises TypeError/ValueError with a one-line reason when the op cannot take these tensors."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"lab attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in (torch.float16, torch.bfloat16):
            raise TypeError(f"lab attention: {name} has dtype {t.dtype}; fp16 or bf16 only")
        if t.dim() != 4:
            raise ValueError(f"lab attention: {name} must be 4-d [B, T, H, D], got shape {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"lab attention: {name} must be contiguous in the layout [B, T, H, D] "
                             f"(got strides {t.stride()}; call .contiguous())")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"lab attention: q, k, v must share a dtype (got {q.dtype}, {k.dtype}, {v.dtype})")
    b, t_q, h, d = q.shape
    if d not in SUPPORTED_D:
        raise ValueError(f"lab attention: head dimension D={d} is not supported (64 or 128)")
    if k.shape != v.shape:
        raise ValueError(f"lab attention: k and v shapes differ: {tuple(k.shape)} vs {tuple(v.shape)}")
    if k.shape[0] != b or k.shape[3] != d:
        raise ValueError(f"lab attention: k is {tuple(k.shape)}, q is {tuple(q.shape)}: B and D must match")
    h_kv = k.shape[2]
    if t_q < 1 or k.shape[1] < 1 or h_kv < 1 or h % h_kv != 0:
        raise ValueError(f"lab attention: need T >= 1 and H={h} a multiple of H_kv={h_kv}")
    for name, t in (("q", q), ("k", k), ("v", v)):  # last, so that the checks above can be tested without a GPU
        if t.device.type != "cuda":
            raise ValueError(f"lab attention: {name} is on {t.device}; the op runs on CUDA devices only")
    if not (q.device == k.device == v.device):
        raise ValueError("lab attention: q, k, v must be on the same device")


@torch.library.custom_op("lab::attention_forward", mutates_args=())
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    o, lse = load_extension().forward(q, k, v, causal)
    return o, lse


@attention_forward.register_fake
def _(q, k, v, causal):
    b, t_q, h, _ = q.shape
    return torch.empty_like(q), q.new_empty((b, h, t_q), dtype=torch.float32)


@torch.library.custom_op("lab::attention_backward", mutates_args=())
def attention_backward(d_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                       lse: torch.Tensor, causal: bool, deterministic: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dq, dk, dv = load_extension().backward(d_o, q, k, v, o, lse, causal, deterministic)
    return dq, dk, dv


@attention_backward.register_fake
def _(d_o, q, k, v, o, lse, causal, deterministic):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, causal = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.causal = causal
    ctx.mark_non_differentiable(lse)


def _backward(ctx, d_o, _d_lse):  # the LSE is an output for the backward only: no gradient flows into it
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(d_o.contiguous(), q, k, v, o, lse, ctx.causal, DETERMINISTIC)
    return dq, dk, dv, None


attention_forward.register_autograd(_backward, setup_context=_setup_context)


def attention(q, k, v, causal=False):
    """softmax(q kᵀ / sqrt(D)) v on [B, T, H, D] tensors; differentiable (section 11's backward)."""
    check_inputs(q, k, v)
    if not isinstance(causal, bool):
        raise TypeError(f"lab attention: causal must be a bool, got {type(causal).__name__}")
    return attention_forward(q, k, v, causal)[0]
