#include "check_rows.hpp"

#include <algorithm>
#include <random>
#include <set>

namespace attnbench {

std::vector<reference::RowId> select_check_rows(const AttentionProblem& p, double budget_flops, uint64_t seed) {
  std::vector<reference::RowId> rows;
  const WorkModel w = attention_work(p);
  const double full = w.flops;
  if (full <= budget_flops) {
    rows.reserve(static_cast<std::size_t>(p.total_q()) * p.heads);
    for (int64_t t = 0; t < p.total_q(); ++t)
      for (int h = 0; h < p.heads; ++h) rows.push_back({t, h});
    return rows;
  }
  // Tokens: first and last of each sequence, rows on both sides of 64- and 128-row tile boundaries, then seeded
  // random tokens until the budget is spent. Heads rotate so every head (and every kv head) is covered.
  std::set<int64_t> tokens;
  int64_t start = 0;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q = p.q_lens[s];
    tokens.insert(start);
    tokens.insert(start + q - 1);
    for (int b = 64; b < q; b += 64 * std::max(1, q / 512)) {
      tokens.insert(start + b - 1);
      tokens.insert(start + b);
    }
    start += q;
  }
  const double row_cost = std::max(1.0, full / (static_cast<double>(p.total_q()) * p.heads));
  const int64_t max_rows = std::max<int64_t>(static_cast<int64_t>(budget_flops / row_cost), 2 * p.heads);
  const int heads_per_token = std::min(p.heads, 8);
  std::uniform_int_distribution<int64_t> pick(0, p.total_q() - 1);
  while (static_cast<int64_t>(tokens.size()) * heads_per_token < max_rows &&
         static_cast<int64_t>(tokens.size()) < p.total_q())
    tokens.insert(pick(rng));
  int rot = 0;
  for (int64_t t : tokens) {
    for (int j = 0; j < heads_per_token; ++j) {
      // spread over the whole head range: one head of each stride class, rotating between tokens
      const int h = (rot + j * std::max(1, p.heads / heads_per_token)) % p.heads;
      rows.push_back({t, h});
    }
    rot = (rot + 1) % p.heads;
  }
  return rows;
}

}  // namespace attnbench
