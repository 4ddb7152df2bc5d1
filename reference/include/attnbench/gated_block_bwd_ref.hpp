// fp32 reference of the gated block's backward (Eigen) over every token: the forward's save set and every
// gradient, by the chain rule stage by stage; and the same on the GPU. No GPU headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnbench/gated_block.hpp"
#include "attnbench/gated_block_ref.hpp"

namespace attnbench::reference {

// fp32, T = B S tokens. The save set (gated_block_bwd.hpp's GatedSaved): q_pre [T, h_q d], k_pre [T, h_kv d], the
// projection's Q and K; q, k [.] after norm + RoPE; v [T, h_kv d]; gate [T, h_q d]; o [T, h_q d], the SDPA's output
// over q, k, v rounded to the dtype (the inputs a backward kernel reads); lse [T, h_q]; rstd_q [T, h_q], rstd_k
// [T, h_kv]. The gradients: dh [T, d_model]; dwq, dwgate [h_q d, d_model], dwk, dwv [h_kv d, d_model] (W_qkvg's
// parts, unfused); dw_o [d_model, h_q d]; dw_q_norm, dw_k_norm [d] (empty without qk_norm).
struct GatedBwdRef {
  std::vector<float> q_pre, k_pre, q, k, v, gate, o, lse, rstd_q, rstd_k;
  std::vector<float> dh, dwq, dwgate, dwk, dwv, dw_o, dw_q_norm, dw_k_norm;
};

// From the 16-bit inputs and dy [T, d_model]: dY = dy W_o; s = sigmoid(gate); dW_o = dy^T (o s); dO = dY s and
// dGATE = dY o s (1 - s); the SDPA backward (attention_backward: D over O rounded to the dtype) for dQ, dK, dV;
// RoPE's transpose and the RMSNorm's backward (dx = rstd (dn - n mean(dn n)), dw = sum g n) for the pre-norm dQ,
// dK; then dW_part = dP_part^T h and dh = sum dP_part W_part. The SDPA reads q, k, v and dO rounded to the dtype.
// Declines (std::invalid_argument) what validate_gated_bwd declines and seq_lens. Multi-threaded.
GatedBwdRef gated_block_backward(const GatedGeometry& g, const GatedOptions& o, const GatedRefInputs& in,
                                 const uint16_t* dy);

// The same on the GPU (reference/gpu/gated_block_bwd_ref.cu; CUDA builds only): DEVICE pointers. Inputs are 16-bit
// halves of the dtype in GatedRefInputs' shapes, dy [T, d_model]; q_norm_weight and k_norm_weight are read only under
// qk_norm, cos and sin only when rope_dim > 0. The outputs are fp32, GatedBwdRef's tensors in its layouts, every one
// written whole (dw_q_norm and dw_k_norm only under qk_norm: null otherwise). workspace:
// gated_block_backward_gpu_workspace(g) bytes, 256-byte aligned (fp32 copies of h, dy and the weights, dY, Y, dQ,
// dK, dV, the rounded q, k, v, dO, D, cu_seqlens and the norm weights' partial sums).
struct GatedBwdGpuIo {
  const uint16_t *h = nullptr, *wq = nullptr, *wgate = nullptr, *wk = nullptr, *wv = nullptr;
  const uint16_t *q_norm_weight = nullptr, *k_norm_weight = nullptr, *cos = nullptr, *sin = nullptr;
  const uint16_t *w_o = nullptr, *dy = nullptr;
  float *q_pre = nullptr, *k_pre = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *gate = nullptr, *o = nullptr;
  float *lse = nullptr, *rstd_q = nullptr, *rstd_k = nullptr;
  float *dh = nullptr, *dwq = nullptr, *dwgate = nullptr, *dwk = nullptr, *dwv = nullptr, *dw_o = nullptr;
  float *dw_q_norm = nullptr, *dw_k_norm = nullptr;
  void* workspace = nullptr;
};

// Bytes of workspace gated_block_backward_gpu asks for (0 in a build without the GPU reference).
std::size_t gated_block_backward_gpu_workspace(const GatedGeometry& g);

// gated_block_backward's math and rounding points on the GPU, enqueued on `stream` (a cudaStream_t): exact fp32
// GEMMs (a tiled SGEMM of fp32 FMAs: no tensor cores, no TF32), the norm + RoPE, the gate and their backward in
// plain kernels (the norm's sums in double, as the host's), attention_backward_gpu for the SDPA over q, k, v and dO
// rounded to the dtype. Allocates nothing, copies nothing to the host. Declines (std::invalid_argument) what the
// host one declines and a needed pointer null; throws std::runtime_error naming a failed launch, std::logic_error
// in a build without the GPU reference.
void gated_block_backward_gpu(const GatedGeometry& g, const GatedOptions& o, const GatedBwdGpuIo& io, void* stream);

}  // namespace attnbench::reference
