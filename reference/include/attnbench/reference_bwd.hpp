// The attention backward's fp32 reference (Eigen) over every row. No GPU headers.
#pragma once
#include "attnbench/attention_bwd.hpp"

namespace attnbench::reference {

// From the 16-bit HOST tensors p.q, p.k, p.v, p.d_o (packed varlen, p's strides; p.o and p.lse are not read): the
// forward in fp32 and its gradients, each over every row:
//   o [total_q, heads, head_size], lse [total_q, heads] (-inf for a row that sees no key),
//   dq [total_q, heads, head_size], dk, dv [total_k, kv_heads, head_size] (GQA: summed over the group's heads),
// with D = rowsum(dO o O) over O rounded to the dtype (the O a backward kernel reads), dS = P o (dP - D) (times 1 - tanh^2 of the capped score under softcap), dQ = scale dS K,
// dK = scale dS^T Q, dV = P^T dO. Keys no row sees get zero gradients. Multi-threaded.
void attention_backward(const AttentionBwdParams& p, float* o, float* lse, float* dq, float* dk, float* dv);

// The same on the GPU (reference/gpu/attention_bwd_ref.cu; CUDA builds only), every pointer in its memory, enqueued
// on `stream` (a cudaStream_t): p.q, p.k, p.v, p.d_o, p.cu_seqlens_q/_k read; o, lse, dsum (D, [total_q, heads])
// and the gradients written. Throws std::runtime_error naming a launch error.
void attention_backward_gpu(const AttentionBwdParams& p, float* o, float* lse, float* dsum, float* dq, float* dk,
                            float* dv, void* stream);

}  // namespace attnbench::reference
