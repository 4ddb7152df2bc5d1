// cpu.unified internals that tests reach: options that force a path, tile or split count, the plan-time
// heuristics, and the support check with explicit knobs. The harness only needs make_cpu_unified().
#pragma once
#include <memory>

#include "attnbench/kernel.hpp"

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

// supports() with explicit knobs (supports() itself reads the environment's knobs).
Support cpu_unified_support(const AttentionProblem& p, const KnobValues& knobs);

}  // namespace attnbench
