// cpu.unified internals that tests reach: options that force a path, tile or split count, the plan-time
// heuristics, and the resolve step. The harness only needs make_cpu_unified().
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "attnbench/kernel.hpp"
#include "cpu/work_limit.hpp"

namespace attnbench {

// 0 / false = let plan() decide.
struct CpuUnifiedOptions {
  int splits = 0;           // KV splits per (sequence, kv head, q-tile) on the split path
  int q_tile = 0;           // query rows per work item (each row carries the whole GQA group)
  bool split_path = false;  // take the split-KV path even for long queries
};

std::unique_ptr<AttentionKernel> make_cpu_unified(const CpuUnifiedOptions& opts);

// Query rows per work item: about 64 query vectors (rows x group) per item, capped by the longest query.
int cpu_q_tile(const AttentionProblem& p);
// KV tile in tokens: the cache block when it is a reasonable tile, else 64 (tiles may span blocks).
int cpu_kv_tile(const AttentionProblem& p);
// Splits so that about 4 work items per thread exist, each split keeping at least two KV tiles.
int cpu_decode_splits(const AttentionProblem& p, int threads, int q_tile, int kv_tile);

// The kernel's e^x for x <= 0 (a branch-free polynomial), exposed for its accuracy test.
float cpu_unified_exp(float x);

namespace cpu {

// What resolve() knows of the machine: the threads a plan runs on (omp_get_max_threads in the kernel).
struct CpuDevice {
  int threads = 1;
};

// What a cpu.unified plan is built from: the tiling, the path (split-KV or direct) and its splits, the
// micro-kernel's column block, the workspace and the summary.
struct UnifiedInstance {
  DType dtype = DType::bf16;
  int head_size = 0;
  int q_tile = 1, kv_tile = 64, splits = 1, threads = 1;
  bool split_path = false;
  int vec_cols = 8;  // query vectors per micro-kernel column block of the QK gemm: 4 or 8
  int m_pad = 8;     // q_tile * group rounded up to vec_cols
  std::size_t workspace_bytes = 0;
  std::string summary;
};

struct Resolution {
  Support support;
  UnifiedInstance instance;  // meaningful when ok()
  bool ok() const { return support.ok; }
};

// cpu.unified's one resolve step: supports() is its support, plan() builds from its instance. Declines, first to
// last: an invalid problem, 8-bit storage, a feature, the head size, work above knobs.max_gflop.
Resolution resolve(const AttentionProblem& p, const CpuKnobs& knobs, const CpuDevice& device,
                   const CpuUnifiedOptions& opts = {});

}  // namespace cpu

}  // namespace attnbench
