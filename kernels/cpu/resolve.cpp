// cpu.unified's resolve step: whether it takes a problem (types, head size, the work limit) and, when it does, the
// instance it runs: tiles, the path (split-KV or direct) and its splits, the micro-kernel's column block, the
// workspace and the plan's summary. Pure host logic, tested without running the kernel.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "cpu/unified.hpp"

namespace attnbench {

namespace {
constexpr int kTargetVectors = 64;  // query vectors per work item
}  // namespace

int cpu_q_tile(const AttentionProblem& p) {
  return std::max(1, std::min(kTargetVectors / std::max(1, p.group_size()), p.max_seqlen_q()));
}

int cpu_kv_tile(const AttentionProblem& p) { return p.block_size >= 16 && p.block_size <= 128 ? p.block_size : 64; }

int cpu_decode_splits(const AttentionProblem& p, int threads, int q_tile, int kv_tile) {
  int64_t units = 0;  // (sequence, kv head, q-tile) items before splitting
  for (int q : p.q_lens) units += (q + q_tile - 1) / q_tile;
  units *= p.kv_heads;
  const int64_t target = 4 * static_cast<int64_t>(std::max(1, threads));
  const int64_t want = (target + units - 1) / std::max<int64_t>(1, units);
  const int64_t most = std::max(1, p.max_seqlen_k() / (2 * kv_tile));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, most, 64})));
}

namespace cpu {
namespace {

Support unified_support(const AttentionProblem& p, const CpuKnobs& knobs) {
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    return Support::no(e.what());
  }
  if (const std::string types = unified_storage_conflict(p, "cpu.unified"); !types.empty()) return Support::no(types);
  if (p.head_size % 8 != 0 || p.head_size > 512)
    return Support::no("head_size " + std::to_string(p.head_size) + " is not a multiple of 8 in [8, 512]");
  const std::string over = over_work_limit(attention_work(p).flops, knobs);
  return over.empty() ? Support::yes() : Support::no("problem " + over);
}

UnifiedInstance make_instance(const AttentionProblem& p, const CpuDevice& device, const CpuUnifiedOptions& opts) {
  UnifiedInstance in;
  in.dtype = p.types.o;  // the kernel's dtype: O's (Q's too unless it is 8-bit)
  in.head_size = p.head_size;
  in.threads = std::max(1, device.threads);
  in.q_tile = opts.q_tile > 0 ? std::min(opts.q_tile, p.max_seqlen_q()) : cpu_q_tile(p);
  in.kv_tile = cpu_kv_tile(p);
  // Split path: decode, or queries that fit one q-tile against a long KV (too few items to fill the threads).
  in.split_path = opts.split_path || opts.splits > 0 || p.max_seqlen_q() == 1 ||
                  (p.max_seqlen_q() <= in.q_tile && p.max_seqlen_k() >= 16 * p.max_seqlen_q());
  in.splits = !in.split_path ? 1
              : opts.splits > 0 ? opts.splits
                                : cpu_decode_splits(p, in.threads, in.q_tile, in.kv_tile);
  const int M = in.q_tile * p.group_size();
  in.vec_cols = M <= 4 ? 4 : 8;  // decode with a small group: no wasted half column block
  in.m_pad = (M + in.vec_cols - 1) / in.vec_cols * in.vec_cols;
  in.workspace_bytes =
      in.splits > 1 ? sizeof(float) * static_cast<std::size_t>(p.total_q()) * p.heads * in.splits * (p.head_size + 2)
                    : 0;
  in.summary = (in.split_path ? "decode splits=" + std::to_string(in.splits) + " q_tile="
                              : std::string("prefill q_tile=")) +
               std::to_string(in.q_tile) + " kv_tile=" + std::to_string(in.kv_tile) +
               " threads=" + std::to_string(in.threads);
  return in;
}

}  // namespace

Resolution resolve(const AttentionProblem& p, const CpuKnobs& knobs, const CpuDevice& device,
                   const CpuUnifiedOptions& opts) {
  Resolution r;
  r.support = unified_support(p, knobs);
  if (r.ok()) r.instance = make_instance(p, device, opts);
  return r;
}

}  // namespace cpu

}  // namespace attnbench
