#include "cuda/wide_walk.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "common/device/visibility.hpp"

namespace attnbench::cuda {

int64_t wide_kv_head_bytes(const AttentionProblem& p, int s) {
  return int64_t{2} * p.kv_lens[static_cast<std::size_t>(s)] * p.head_size * static_cast<int64_t>(dtype_bytes(p.types.kv));
}

int64_t wide_walk_section_bytes(const AttentionProblem& p, const UnifiedKnobs& knobs, bool persistent) {
  if (!persistent || knobs.walk == WalkKnob::rank) return 0;
  const int64_t section = knobs.l2_section_kb > 0 ? int64_t{knobs.l2_section_kb} << 10 : kWideL2SectionBytes;
  if (knobs.walk == WalkKnob::l2) return section;
  int64_t total = 0;
  for (int s = 0; s < p.num_seqs(); ++s) total += wide_kv_head_bytes(p, s) * p.kv_heads;
  return total > section ? section : 0;
}

std::size_t wide_walk_table_entries(const UnifiedLaunchPlan& lp) {
  return static_cast<std::size_t>(lp.grid_x) + 1 + static_cast<std::size_t>(lp.work_tiles);
}

namespace {

// KV-tile steps of q-tile `rank` of sequence s (as the kernel's WideGeom and wide_first_tile count them), plus the
// unit's fixed cost; 0 when the sequence has no q-tile at that rank.
int unit_cost(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int s, int rank) {
  const int q_len = p.q_lens[static_cast<std::size_t>(s)], kv_len = p.kv_lens[static_cast<std::size_t>(s)];
  const int n_m = (q_len + lp.wide_tq - 1) / lp.wide_tq;
  if (rank >= n_m) return 0;
  const int m0 = (n_m - 1 - rank) * lp.wide_tq;
  const device::Visibility v(q_len, kv_len, p.causal, p.top_left, -1, -1);
  const int n_tiles = (std::max(0, v.rows_end(m0 + lp.wide_tq)) + lp.block_n - 1) / lp.block_n;
  const device::Visibility fv(q_len, kv_len, p.causal, p.top_left, p.features.window_left, p.features.window_right);
  const int t0 = std::min(n_tiles, fv.first_visible(m0) / lp.block_n);
  return n_tiles - t0 + kWideUnitOverheadTiles;
}

}  // namespace

std::vector<WalkUnit> wide_walk_order(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int64_t section_bytes) {
  const int head_tiles = p.heads / lp.wide_pack, group = p.heads / p.kv_heads;
  const int pairs = p.num_seqs() * head_tiles;
  // The pairs by the kv head they read (consecutive pairs of one kv head: its GQA group), with its K/V bytes.
  struct KvRun {
    int first, end;
    int64_t bytes;
  };
  std::vector<KvRun> runs;
  for (int pr = 0, last = -1; pr < pairs; ++pr) {
    const int s = pr / head_tiles, kv = s * p.kv_heads + (pr % head_tiles) * lp.wide_pack / group;
    if (kv != last) runs.push_back({pr, pr, wide_kv_head_bytes(p, s)});
    runs.back().end = pr + 1;
    last = kv;
  }
  // As many sections as packing the runs into section_bytes takes, then the runs spread over them evenly by bytes
  // (equal sections: a small last one would end the walk on a few pairs' units).
  int sections = 1;
  int64_t total = 0, filled = 0;
  for (const KvRun& r : runs) {
    if (filled > 0 && filled + r.bytes > section_bytes) {
      ++sections;
      filled = 0;
    }
    filled += r.bytes;
    total += r.bytes;
  }
  std::vector<int> section_of(runs.size());
  int64_t before = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {  // by the run's middle byte
    section_of[i] = static_cast<int>(std::min<int64_t>(sections - 1, (2 * before + runs[i].bytes) * sections / (2 * total)));
    before += runs[i].bytes;
  }
  std::vector<WalkUnit> order;
  order.reserve(static_cast<std::size_t>(lp.work_tiles));
  for (std::size_t i = 0; i < runs.size();) {
    std::size_t j = i;
    while (j < runs.size() && section_of[j] == section_of[i]) ++j;
    for (int rank = 0; rank < lp.m_tiles; ++rank)
      for (int pr = runs[i].first; pr < runs[j - 1].end; ++pr) {
        const int cost = unit_cost(p, lp, pr / head_tiles, rank);
        if (cost > 0) order.push_back({static_cast<int32_t>(rank * pairs + pr), cost});
      }
    i = j;
  }
  // The last two rounds heaviest first, so the lightest units even out the CTAs' ends.
  const auto tail = order.end() - std::min<std::ptrdiff_t>(order.size(), 2 * static_cast<std::ptrdiff_t>(lp.grid_x));
  std::stable_sort(tail, order.end(), [](const WalkUnit& a, const WalkUnit& b) { return a.cost > b.cost; });
  return order;
}

std::vector<int32_t> wide_walk_table(const AttentionProblem& p, const UnifiedLaunchPlan& lp) {
  const int g = lp.grid_x;
  std::vector<std::vector<int32_t>> lists(static_cast<std::size_t>(g));
  using Load = std::pair<int64_t, int>;  // (modelled cost so far, CTA)
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> least;
  for (int b = 0; b < g; ++b) least.push({0, b});
  for (const WalkUnit& u : wide_walk_order(p, lp, lp.wide_walk_section_bytes)) {
    const Load l = least.top();
    least.pop();
    lists[static_cast<std::size_t>(l.second)].push_back(u.index);
    least.push({l.first + u.cost, l.second});
  }
  std::vector<int32_t> table(wide_walk_table_entries(lp), 0);
  int32_t at = 0;
  for (int b = 0; b < g; ++b) {
    table[static_cast<std::size_t>(b)] = at;
    for (int32_t idx : lists[static_cast<std::size_t>(b)]) table[static_cast<std::size_t>(g + 1 + at++)] = idx;
  }
  table[static_cast<std::size_t>(g)] = at;
  return table;
}

}  // namespace attnbench::cuda
