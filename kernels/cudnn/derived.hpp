// cudnn.sdpa's derived index tensors, made from params.cu_seqlens_q in run() by a tiny kernel (derived.cu), so a
// call needs no host data and captures into a CUDA graph: seq_len_q [num_seqs] (the padding mask's query lengths)
// and, when the query lengths differ (ragged Q and O), each sequence's first element, cu_seqlens_q * token stride,
// [num_seqs + 1] for Q and for O; for an FP8 graph, its scalars and the e4m3 O it writes before run() dequantises
// it. They sit in the plan's workspace after cuDNN's own. The arithmetic is stated once here, for the kernel and
// for the host (tests).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "attnbench/dtype.hpp"
#include "common/device/host_device.hpp"

namespace attnbench::cudnn {

// The FP8 graph's scalar tensors, in this order in the workspace (the kernel writes the inputs, cuDNN the amaxes).
struct Fp8Scalars {
  float descale_q = 1.f, descale_k = 1.f, descale_v = 1.f, descale_s = 1.f, scale_s = 1.f, scale_o = 1.f;
  float amax_s = 0.f, amax_o = 0.f;
};
constexpr int kFp8Scalars = sizeof(Fp8Scalars) / sizeof(float);

struct DerivedTables {
  int32_t* seq_len_q = nullptr;  // [num_seqs]
  int32_t* q_offsets = nullptr;  // [num_seqs + 1] elements; null when Q and O are not ragged
  int32_t* o_offsets = nullptr;  // [num_seqs + 1]
  float* fp8 = nullptr;          // [kFp8Scalars], FP8 graphs only
  unsigned char* o_codes = nullptr;  // FP8 graphs: cuDNN's e4m3 O, [total_q, heads, d] dense
};

// Entry i (0 <= i <= num_seqs) of every table. Offsets are int32: the plan declines problems whose last offset,
// total_q * token stride, does not fit.
ATTNBENCH_HD_INLINE void derive_entry(const int32_t* cu_seqlens_q, int num_seqs, int i, int64_t q_stride_token,
                                      int64_t o_stride_token, const DerivedTables& t) {
  const int64_t start = cu_seqlens_q[i];
  if (i < num_seqs) t.seq_len_q[i] = cu_seqlens_q[i + 1] - cu_seqlens_q[i];
  if (t.q_offsets) t.q_offsets[i] = static_cast<int32_t>(start * q_stride_token);
  if (t.o_offsets) t.o_offsets[i] = static_cast<int32_t>(start * o_stride_token);
}

// Byte offsets of the tables in the workspace, each 256-byte aligned, after cuDNN's `cudnn_bytes`; an FP8 graph's
// scalars and O codes (`o_code_bytes` of them, 0 for a 16-bit graph) after those.
struct WorkspaceLayout {
  std::size_t seq_len_q = 0, q_offsets = 0, o_offsets = 0, fp8 = 0, o_codes = 0;
  std::size_t total = 0;  // the plan's workspace_bytes
};

inline WorkspaceLayout workspace_layout(std::size_t cudnn_bytes, int num_seqs, bool ragged,
                                        std::size_t o_code_bytes = 0) {
  const auto up = [](std::size_t n) { return (n + 255) / 256 * 256; };
  const std::size_t offsets = up((static_cast<std::size_t>(num_seqs) + 1) * sizeof(int32_t));
  WorkspaceLayout w;
  w.seq_len_q = up(cudnn_bytes);
  w.total = w.seq_len_q + up(static_cast<std::size_t>(num_seqs) * sizeof(int32_t));
  if (ragged) {
    w.q_offsets = w.total;
    w.o_offsets = w.q_offsets + offsets;
    w.total = w.o_offsets + offsets;
  }
  if (o_code_bytes > 0) {
    w.fp8 = w.total;
    w.o_codes = w.fp8 + up(sizeof(Fp8Scalars));
    w.total = w.o_codes + up(o_code_bytes);
  }
  return w;
}

inline DerivedTables tables_in(void* workspace, const WorkspaceLayout& w, bool ragged) {
  char* base = static_cast<char*>(workspace);
  DerivedTables t;
  t.seq_len_q = reinterpret_cast<int32_t*>(base + w.seq_len_q);
  if (ragged) {
    t.q_offsets = reinterpret_cast<int32_t*>(base + w.q_offsets);
    t.o_offsets = reinterpret_cast<int32_t*>(base + w.o_offsets);
  }
  if (w.o_codes > 0) {
    t.fp8 = reinterpret_cast<float*>(base + w.fp8);
    t.o_codes = reinterpret_cast<unsigned char*>(base + w.o_codes);
  }
  return t;
}

// Enqueues the kernel that writes every table from the device's cu_seqlens_q (and, where t.fp8 is set, the FP8
// graph's input scalars from `fp8`); throws on a launch error.
void launch_derive_tables(const int32_t* cu_seqlens_q, int num_seqs, int64_t q_stride_token, int64_t o_stride_token,
                          const DerivedTables& t, cudaStream_t stream, const Fp8Scalars& fp8 = {});

// out[t, h, :] = e4m3 value of codes[t, h, :] * inv_scale_o (one fp32 product, rounded once to out's 16-bit dtype)
// for total_q tokens of heads x d codes packed dense; out by its token and head strides (elements).
void launch_dequantize_o(const unsigned char* codes, int64_t total_q, int heads, int d, float inv_scale_o, DType out_dt,
                         void* out, int64_t o_stride_token, int64_t o_stride_head, cudaStream_t stream);

}  // namespace attnbench::cudnn
