// The PyTorch extension of the lab's attention: the backward of section 11 (its kernels and
// launcher, included from the solution) and the plain fp32 forward that feeds it, on torch
// tensors in the lab's layout [B, T, H, D]. op.py checks every input before calling here; the
// TORCH_CHECKs below repeat the checks that protect memory, so that a direct call with a bad
// tensor raises a Python RuntimeError instead of reading out of bounds.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#define LAB_KERNELS_ONLY
#define LAB_CANNOT_RUN_THROWS  // a GPU without the kernels' shared memory: a RuntimeError, not exit 77
#include "../../solutions/11_backward.cu"

namespace {

void check_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&q, &k, &v}) {
    TORCH_CHECK(t->is_cuda(), "lab attention: tensors must be on a CUDA device");
    TORCH_CHECK(t->dim() == 4, "lab attention: tensors must be [B, T, H, D]");
    TORCH_CHECK(t->is_contiguous(), "lab attention: tensors must be contiguous");
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "lab attention: q, k, v must share a dtype");
    TORCH_CHECK(t->device() == q.device(), "lab attention: q, k, v must be on one device");
  }
  TORCH_CHECK(q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16, "lab attention: dtype must be fp16 or bf16");
  TORCH_CHECK(q.size(3) == 64 || q.size(3) == 128, "lab attention: D must be 64 or 128");
  TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == q.size(0) && k.size(3) == q.size(3), "lab attention: k, v shapes");
  TORCH_CHECK(k.size(2) >= 1 && q.size(2) % k.size(2) == 0, "lab attention: H must be a multiple of H_kv");
  TORCH_CHECK(q.size(1) >= 1 && k.size(1) >= 1, "lab attention: T must be >= 1");
}

std::vector<at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  check_qkv(q, k, v);
  const c10::cuda::CUDAGuard guard(q.device());
  const int b = int(q.size(0)), t_q = int(q.size(1)), h = int(q.size(2)), d = int(q.size(3));
  const int t_kv = int(k.size(1)), h_kv = int(k.size(2));
  at::Tensor o = at::empty_like(q);
  at::Tensor lse = at::empty({b, h, t_q}, q.options().dtype(at::kFloat));
  const cudaStream_t st = at::cuda::getCurrentCUDAStream();
  if (q.scalar_type() == at::kHalf)
    lab::fwd32::forward<__half>(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr<float>(), b, h, h_kv,
                                t_q, t_kv, d, causal, st);
  else
    lab::fwd32::forward<__nv_bfloat16>(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr<float>(), b,
                                       h, h_kv, t_q, t_kv, d, causal, st);
  return {o, lse};
}

std::vector<at::Tensor> backward(const at::Tensor& d_o, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& o, const at::Tensor& lse, bool causal, bool deterministic) {
  check_qkv(q, k, v);
  TORCH_CHECK(d_o.sizes() == q.sizes() && o.sizes() == q.sizes() && d_o.is_contiguous() && o.is_contiguous() &&
                  d_o.scalar_type() == q.scalar_type() && o.scalar_type() == q.scalar_type() && d_o.is_cuda() && o.is_cuda(),
              "lab attention backward: dO and O must be contiguous tensors like q");
  TORCH_CHECK(lse.is_cuda() && lse.is_contiguous() && lse.scalar_type() == at::kFloat && lse.dim() == 3 &&
                  lse.size(0) == q.size(0) && lse.size(1) == q.size(2) && lse.size(2) == q.size(1),
              "lab attention backward: lse must be a contiguous fp32 [B, H, T_q] tensor");
  const c10::cuda::CUDAGuard guard(q.device());
  const int b = int(q.size(0)), t_q = int(q.size(1)), h = int(q.size(2)), d = int(q.size(3));
  at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  const bool atomic = !deterministic;
  at::Tensor work = at::empty({workspace_floats(b, h, t_q, d, atomic)}, q.options().dtype(at::kFloat));
  const BackwardArgs args{q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), d_o.data_ptr(), lse.data_ptr<float>(),
                          dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), work.data_ptr<float>(),
                          b, h, int(k.size(2)), t_q, int(k.size(1)), d, causal, atomic};
  launch_backward_any(args, q.scalar_type() == at::kHalf, "", at::cuda::getCurrentCUDAStream());
  return {dq, dk, dv};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "fp32 attention forward: O, LSE");
  m.def("backward", &backward, "section 11's backward: dQ, dK, dV");
}
