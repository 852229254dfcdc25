"""The lab's attention as a PyTorch op: section 11's backward (and a plain fp32 forward that feeds
it), built with torch.utils.cpp_extension on first use and registered with torch.library
(custom ops with a fake implementation and autograd), so torch.compile traces it.

    from common.torch_op import attention
    o = attention(q, k, v, causal=True)   # q [B, T_q, H, D], k, v [B, T_kv, H_kv, D]; fp16/bf16, CUDA

Layout is the lab's (and FlashAttention's): [B, T, H, D], contiguous; causal is bottom-right
aligned when T_q != T_kv; GQA when H_kv divides H. Bad inputs raise ValueError or TypeError
before anything is built or launched.
"""
from .op import attention, check_inputs, load_extension  # noqa: F401
