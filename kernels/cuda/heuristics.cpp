#include "cuda/heuristics.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace attnbench::cuda {

const char* path_name(UnifiedPath p) { return p == UnifiedPath::prefill_2d ? "2d" : "3d"; }

Support unified_supports(const AttentionProblem& p) {
  if (p.head_size != 64 && p.head_size != 128 && p.head_size != 256)
    return Support::no("head_size " + std::to_string(p.head_size) + " not in {64, 128, 256}");
  if (p.block_size <= 0 || p.block_size % 16 != 0)
    return Support::no("block_size " + std::to_string(p.block_size) + " is not a multiple of 16");
  if (p.kv_heads <= 0 || p.heads % p.kv_heads != 0) return Support::no("heads not a multiple of kv_heads");
  if (p.num_seqs() > 65535) return Support::no("more than 65535 sequences (grid.z limit)");
  return Support::yes();
}

UnifiedPath choose_path(const AttentionProblem& p) {
  if (p.max_seqlen_q() == 1) return UnifiedPath::decode_3d;
  // Few packed rows over a long KV: the 2D grid would hold a handful of mostly-empty q-tiles per head and
  // read each K/V byte group-size times; the 3D kernel reads it once per row tile and splits the KV.
  const int64_t packed_rows = static_cast<int64_t>(p.max_seqlen_q()) * p.group_size();
  if (packed_rows <= 4 * kDecodeRowsPerCta && p.max_seqlen_k() >= 512) return UnifiedPath::decode_3d;
  return UnifiedPath::prefill_2d;
}

int num_splits_heuristic(int64_t ctas_unsplit, int num_sms, int num_n_tiles) {
  if (num_sms <= 0) num_sms = kDefaultSmCount;
  if (ctas_unsplit >= static_cast<int64_t>(0.8 * num_sms) || num_n_tiles <= 4) return 1;
  const int max_splits = std::max(1, std::min({kMaxSplits, num_sms, num_n_tiles}));
  std::vector<double> eff(max_splits + 1, 0.0);
  double best = 0.0;
  for (int s = 1; s <= max_splits; ++s) {
    const double waves = static_cast<double>(ctas_unsplit) * s / num_sms;
    eff[s] = waves / std::ceil(waves);
    best = std::max(best, eff[s]);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (eff[s] >= 0.85 * best) return s;
  return 1;
}

bool recommend_graph_replay(const AttentionProblem& p, const KnobValues& knobs, bool caller_capturing) {
  if (caller_capturing) return false;
  if (choose_path(p) == UnifiedPath::decode_3d) return knobs.get_bool("ATTNBENCH_3D_GRAPH");
  if (p.max_seqlen_q() > 768) return false;
  return knobs.get_bool("ATTNBENCH_2D_GRAPH");
}

std::size_t decode_workspace_bytes(const AttentionProblem& p, int splits) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(p.total_q()) * p.heads;
  return static_cast<std::size_t>(splits) * rows * (1 + static_cast<std::size_t>(p.head_size)) * sizeof(float);
}

UnifiedLaunchPlan make_unified_launch_plan(const AttentionProblem& p, const KnobValues& knobs, int num_sms) {
  const Support s = unified_supports(p);
  if (!s.ok) throw std::invalid_argument("cuda.unified: " + s.reason);
  UnifiedLaunchPlan lp;
  lp.path = choose_path(p);
  if (lp.path == UnifiedPath::prefill_2d) {
    lp.warps = knobs.get_int("ATTNBENCH_SM90_NARROW_WARPS");
    lp.block_m = 16 * lp.warps;
    lp.block_n = prefill_block_n(p.head_size);
    lp.q_major = knobs.get_bool("ATTNBENCH_Q_MAJOR_GRID");
    lp.m_tiles = (p.max_seqlen_q() + lp.block_m - 1) / lp.block_m;
    lp.grid_x = lp.q_major ? lp.m_tiles : p.heads;
    lp.grid_y = lp.q_major ? p.heads : lp.m_tiles;
    lp.grid_z = p.num_seqs();
    lp.summary = "2d warps=" + std::to_string(lp.warps) + " tile=" + std::to_string(lp.block_m) + "x" +
                 std::to_string(lp.block_n) + (lp.q_major ? " q-major" : " head-major");
  } else {
    lp.warps = kDecodeWarps;
    lp.block_m = kDecodeRowsPerCta;
    lp.block_n = kDecodeBlockN;
    const int64_t packed_rows = static_cast<int64_t>(p.max_seqlen_q()) * p.group_size();
    lp.m_tiles = static_cast<int>((packed_rows + lp.block_m - 1) / lp.block_m);
    const int64_t ctas = static_cast<int64_t>(p.num_seqs()) * p.kv_heads * lp.m_tiles;
    const int n_tiles = (p.max_seqlen_k() + lp.block_n - 1) / lp.block_n;
    const int forced = knobs.get_int("ATTNBENCH_3D_SPLITS");
    lp.splits = forced > 0 ? std::min({forced, kMaxSplits, std::max(1, n_tiles)})
                           : num_splits_heuristic(ctas, num_sms * decode_ctas_per_sm(p.head_size), n_tiles);
    lp.grid_x = lp.splits;
    lp.grid_y = p.kv_heads * lp.m_tiles;
    lp.grid_z = p.num_seqs();
    lp.workspace_bytes = decode_workspace_bytes(p, lp.splits);
    lp.summary = "3d splits=" + std::to_string(lp.splits) + (forced > 0 ? " (forced)" : "") +
                 " rows/cta=" + std::to_string(lp.block_m) + " row-tiles=" + std::to_string(lp.m_tiles) +
                 (lp.splits > 1 ? " +combine" : "");
  }
  return lp;
}

}  // namespace attnbench::cuda
