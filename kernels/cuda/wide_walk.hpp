// The persistent wide kernel's walk over its units (ATTNBENCH_SM90_WALK). The snake hands every round the heaviest
// remaining q-tiles of every (sequence, head tile) pair, so all pairs' K/V are read at once; past L2 each round reads
// them from HBM again (a d128 S8192 H32 causal prefill read 4.5x its K/V). The L2 walk takes the pairs in sections
// whose K/V fit a share of L2, heaviest q-tiles first within a section, and gives each unit to the CTA with the
// least modelled work (list scheduling): a table the host builds once per plan and uploads into the workspace.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnbench/attention.hpp"
#include "cuda/heuristics.hpp"

namespace attnbench::cuda {

// K/V bytes one section keeps live: about a quarter of the H200's 60 MiB L2, so the next section's first reads and
// the stream of Q and O fit beside it (16 MiB read 1-3% faster than 32 MiB on the long rows: kernels/NOTES.md).
constexpr int64_t kWideL2SectionBytes = int64_t{16} << 20;
// A unit's fixed cost in KV-tile steps (its Q, epilogue and walk: ~2.5 tiles of a short d128 unit, NOTES session 14).
constexpr int kWideUnitOverheadTiles = 2;

// K and V bytes of one kv head of sequence s.
int64_t wide_kv_head_bytes(const AttentionProblem& p, int s);
// The section size the knobs ask for, in bytes; 0 when the walk is the snake: not persistent, or auto where the
// problem's K/V fit one section.
int64_t wide_walk_section_bytes(const AttentionProblem& p, const UnifiedKnobs& knobs, bool persistent);
// The table's int32 entries: per CTA its first unit (grid_x + 1 offsets), then every unit in CTA order.
std::size_t wide_walk_table_entries(const UnifiedLaunchPlan& lp);

// One unit of the walk: its index in the rank-major numbering (rank x sequences x head tiles + sequence x head
// tiles + head tile, wide_work.cuh) and its modelled cost in KV-tile steps.
struct WalkUnit {
  int32_t index = 0;
  int cost = 0;
};
// Each (sequence, head tile) pair's section: the pairs of whole kv heads in order, in as many sections as packing
// them into section_bytes takes, under the smallest limit that keeps that count (a small last section would end
// the walk on a few pairs' units).
std::vector<int> wide_walk_sections(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int64_t section_bytes);
// Every unit (rank < m_tiles of every pair: the table then serves any lengths up to the plan's longest; a rank a
// sequence lacks costs 1, the kernel's skip) in the L2 walk's order: section by section (wide_walk_sections), each
// rank-major (heaviest first); the last two rounds' units (2 x grid_x) then sorted heaviest first.
std::vector<WalkUnit> wide_walk_order(const AttentionProblem& p, const UnifiedLaunchPlan& lp, int64_t section_bytes);
// The table (wide_walk_table_entries long): each unit of wide_walk_order to the CTA with the least cost so far
// (the lowest index on a tie), each CTA's units in the order it got them.
std::vector<int32_t> wide_walk_table(const AttentionProblem& p, const UnifiedLaunchPlan& lp);

}  // namespace attnbench::cuda
