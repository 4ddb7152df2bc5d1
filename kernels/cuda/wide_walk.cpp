#include "cuda/wide_walk.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "common/device/visibility.hpp"

namespace attnbench::cuda {

int64_t wide_kv_head_bytes(const AttentionProblem& p, int s) {
  const int64_t kv_len = p.kv_lens[static_cast<std::size_t>(s)];
  return 2 * kv_len * p.head_size * static_cast<int64_t>(dtype_bytes(p.types.kv));
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
// unit's fixed cost; 1 when the sequence has no q-tile at that rank (the kernel's skip).
int unit_cost(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int s, int rank) {
  const int q_len = p.q_lens[static_cast<std::size_t>(s)], kv_len = p.kv_lens[static_cast<std::size_t>(s)];
  const int n_m = (q_len + lp.wide_tq - 1) / lp.wide_tq;
  if (rank >= n_m) return 1;
  const int m0 = (n_m - 1 - rank) * lp.wide_tq;
  const device::Visibility v(q_len, kv_len, p.causal, p.top_left, -1, -1);
  const int n_tiles = v.tiles_end(m0 + lp.wide_tq, lp.block_n);
  const device::Visibility fv(q_len, kv_len, p.causal, p.top_left, p.features.window_left, p.features.window_right);
  const int t0 = fv.first_tile(m0, lp.block_n, n_tiles);
  return n_tiles - t0 + kWideUnitOverheadTiles;
}

// The pairs by the kv head they read (consecutive pairs of one kv head: its GQA group), with its K/V bytes.
struct KvRun {
  int first, end;
  int64_t bytes;
};
std::vector<KvRun> kv_runs(const AttentionProblem& p, const UnifiedLaunchPlan& lp) {
  const int head_tiles = p.heads / lp.wide_pack, group = p.heads / p.kv_heads;
  std::vector<KvRun> runs;
  for (int pr = 0, last = -1; pr < p.num_seqs() * head_tiles; ++pr) {
    const int s = pr / head_tiles, kv = s * p.kv_heads + (pr % head_tiles) * lp.wide_pack / group;
    if (kv != last) runs.push_back({pr, pr, wide_kv_head_bytes(p, s)});
    runs.back().end = pr + 1;
    last = kv;
  }
  return runs;
}

// Each run's section when runs are packed in order under `limit` bytes (a run never splits).
std::vector<int> pack_runs(const std::vector<KvRun>& runs, int64_t limit) {
  std::vector<int> section_of(runs.size());
  int64_t filled = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const bool next = i > 0 && filled + runs[i].bytes > limit;
    section_of[i] = i == 0 ? 0 : section_of[i - 1] + (next ? 1 : 0);
    filled = (next ? 0 : filled) + runs[i].bytes;
  }
  return section_of;
}

}  // namespace

std::vector<int> wide_walk_sections(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int64_t section_bytes) {
  const std::vector<KvRun> runs = kv_runs(p, lp);
  int64_t total = 0;
  for (const KvRun& r : runs) total += r.bytes;
  const int sections = pack_runs(runs, section_bytes).back() + 1;
  // The smallest limit that packs the runs into as many sections: the most even split of that count.
  int64_t lo = (total + sections - 1) / sections, hi = std::max(section_bytes, lo);
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (pack_runs(runs, mid).back() + 1 <= sections) hi = mid;
    else lo = mid + 1;
  }
  const std::vector<int> of_run = pack_runs(runs, lo);
  std::vector<int> of_pair;
  for (std::size_t i = 0; i < runs.size(); ++i) of_pair.insert(of_pair.end(), runs[i].end - runs[i].first, of_run[i]);
  return of_pair;
}

std::vector<WalkUnit> wide_walk_order(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int64_t section_bytes) {
  const int head_tiles = p.heads / lp.wide_pack, pairs = p.num_seqs() * head_tiles;
  const std::vector<int> section_of = wide_walk_sections(p, lp, section_bytes);
  std::vector<WalkUnit> order;
  order.reserve(static_cast<std::size_t>(lp.work_tiles));
  for (int first = 0; first < pairs;) {
    int end = first;
    while (end < pairs && section_of[end] == section_of[first]) ++end;
    for (int rank = 0; rank < lp.m_tiles; ++rank)
      for (int pr = first; pr < end; ++pr)
        order.push_back({static_cast<int32_t>(rank * pairs + pr), unit_cost(p, lp, pr / head_tiles, rank)});
    first = end;
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
