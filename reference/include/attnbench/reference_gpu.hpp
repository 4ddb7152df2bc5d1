// The fp32 reference on the GPU: every row of a paged attention problem, computed where its inputs already live,
// so that the gate compares every output row. No GPU headers: pointers and the stream are opaque.
//
// Deliberately simple and apart from the kernels under test: one thread block per (query row, head), a plain loop
// over the row's visible keys through the block table, fp32 throughout, two passes (the row's maximum, then the
// weights and their sum), and the features from the README's statement ("Attention features") written again here;
// it includes nothing of kernels/ but the params struct. The GPU tests check it against the Eigen reference.
#pragma once
#include <string>

#include "attnbench/attention.hpp"

namespace attnbench::reference {

// Whether this build has the GPU reference (the CUDA backend); without it paged_attention_gpu throws.
bool gpu_reference_built();

// Why the GPU reference cannot compute problem p ("" when it can): the gated block's fusions are not its op.
std::string gpu_reference_conflict(const AttentionProblem& p);

// Enqueues every row of `p` on `stream` (a cudaStream_t). `p` holds DEVICE pointers (the types and features as
// reference::paged_attention reads them); out: [total_q, heads, head_size] fp32, lse (optional): [total_q, heads]
// (AttentionParams::lse's definition). Throws std::runtime_error naming the launch error.
void paged_attention_gpu(const AttentionParams& p, float* out, float* lse, void* stream);

}  // namespace attnbench::reference
