#include "cases/check_rows.hpp"

#include <algorithm>
#include <random>

namespace attnbench {

namespace {

// The rows chosen so far, with their reference cost; each (token, head) is taken once.
class RowPicker {
 public:
  RowPicker(const AttentionProblem& p, const std::vector<int64_t>& starts) : p_(p), starts_(starts) {
    taken_.assign(static_cast<std::size_t>(p.total_q()) * p.heads, 0);
  }
  void add(int s, int qi, int head) {
    const int64_t token = starts_[s] + qi;
    char& t = taken_[static_cast<std::size_t>(token * p_.heads + head)];
    if (t) return;
    t = 1;
    rows_.push_back({token, head});
    spent_ += 4.0 * visible_keys(s, qi) * p_.head_size;
  }
  bool taken(int s, int qi, int head) const {
    return taken_[static_cast<std::size_t>((starts_[s] + qi) * p_.heads + head)] != 0;
  }
  double spent() const { return spent_; }
  std::size_t size() const { return rows_.size(); }
  std::vector<reference::RowId> take() { return std::move(rows_); }

 private:
  // Keys row qi of sequence s sees (the causal mask and the window; the reference's own rule).
  int visible_keys(int s, int qi) const {
    const int q_len = p_.q_lens[s], kv_len = p_.kv_lens[s];
    const int pos = query_key_position(qi, q_len, kv_len, p_.top_left);
    int end = p_.causal ? std::clamp(causal_visible_end(qi, q_len, kv_len, p_.top_left), 0, kv_len) : kv_len;
    if (p_.features.window_right >= 0) end = std::clamp(pos + p_.features.window_right + 1, 0, end);
    const int begin = p_.features.window_left >= 0 ? std::clamp(pos - p_.features.window_left, 0, kv_len) : 0;
    return std::max(1, end - begin);
  }

  const AttentionProblem& p_;
  const std::vector<int64_t>& starts_;
  std::vector<char> taken_;
  std::vector<reference::RowId> rows_;
  double spent_ = 0;
};

std::vector<int64_t> sequence_starts(const AttentionProblem& p) {
  std::vector<int64_t> starts(p.num_seqs() + 1, 0);
  for (int s = 0; s < p.num_seqs(); ++s) starts[s + 1] = starts[s] + p.q_lens[s];
  return starts;
}

int tiles_of(int q_len) { return (q_len + kCoverageTile - 1) / kCoverageTile; }

}  // namespace

std::vector<reference::RowId> select_check_rows(const AttentionProblem& p, double budget_flops, uint64_t seed) {
  if (attention_work(p).flops <= budget_flops) {  // every row
    std::vector<reference::RowId> all;
    all.reserve(static_cast<std::size_t>(p.total_q()) * p.heads);
    for (int64_t t = 0; t < p.total_q(); ++t)
      for (int h = 0; h < p.heads; ++h) all.push_back({t, h});
    return all;
  }
  const std::vector<int64_t> starts = sequence_starts(p);
  RowPicker pick(p, starts);
  const int n = p.num_seqs();
  for (int s = 0; s < n; ++s)
    for (int h = 0; h < p.heads && p.q_lens[s] > 0; ++h) {
      pick.add(s, 0, h);
      pick.add(s, p.q_lens[s] - 1, h);
    }
  for (int s = 0; s < n; ++s)
    for (int b = kCoverageTile, k = 0; b < p.q_lens[s]; b += kCoverageTile, ++k) {
      const int h = (s + k) % p.heads;
      pick.add(s, b - 1, h);
      pick.add(s, b, h);
    }
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  // Head by head across every tile, so that a budget that runs out leaves each tile covered under as many heads.
  for (int round = 0; round < p.heads && pick.spent() < budget_flops; ++round)
    for (int s = 0; s < n && pick.spent() < budget_flops; ++s)
      for (int k = 0; k < tiles_of(p.q_lens[s]) && pick.spent() < budget_flops; ++k) {
        const int h = (s + k + round) % p.heads, first = k * kCoverageTile;
        const int last = std::min(p.q_lens[s], first + kCoverageTile) - 1;
        bool covered = false;
        for (int qi = first; qi <= last && !covered; ++qi) covered = pick.taken(s, qi, h);
        if (!covered) pick.add(s, std::uniform_int_distribution<int>(first, last)(rng), h);
      }
  const int64_t total = p.total_q() * p.heads;
  std::uniform_int_distribution<int64_t> any(0, total - 1);
  while (pick.spent() < budget_flops && static_cast<int64_t>(pick.size()) < total) {
    const int64_t r = any(rng), token = r / p.heads;
    const int s = static_cast<int>(std::upper_bound(starts.begin(), starts.end(), token) - starts.begin()) - 1;
    pick.add(s, static_cast<int>(token - starts[s]), static_cast<int>(r % p.heads));
  }
  return pick.take();
}

RowCoverage row_coverage(const AttentionProblem& p, const std::vector<int64_t>& flat_rows) {
  const std::vector<int64_t> starts = sequence_starts(p);
  std::vector<int64_t> tile_base(p.num_seqs() + 1, 0);  // the sequence's first tile among all
  for (int s = 0; s < p.num_seqs(); ++s) tile_base[s + 1] = tile_base[s] + tiles_of(p.q_lens[s]);
  std::vector<char> seq_head(static_cast<std::size_t>(p.num_seqs()) * p.heads, 0);
  std::vector<char> tile_head(static_cast<std::size_t>(tile_base.back()) * p.heads, 0);
  for (int64_t r : flat_rows) {
    const int64_t token = r / p.heads;
    const int h = static_cast<int>(r % p.heads);
    const int s = static_cast<int>(std::upper_bound(starts.begin(), starts.end(), token) - starts.begin()) - 1;
    const int64_t tile = tile_base[s] + (token - starts[s]) / kCoverageTile;
    seq_head[static_cast<std::size_t>(s) * p.heads + h] = 1;
    tile_head[static_cast<std::size_t>(tile) * p.heads + h] = 1;
  }
  RowCoverage c;
  c.sequence_heads = static_cast<int64_t>(seq_head.size());
  c.tile_heads = static_cast<int64_t>(tile_head.size());
  c.sequence_heads_covered = std::count(seq_head.begin(), seq_head.end(), 1);
  c.tile_heads_covered = std::count(tile_head.begin(), tile_head.end(), 1);
  return c;
}

}  // namespace attnbench
