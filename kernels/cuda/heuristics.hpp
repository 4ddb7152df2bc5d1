// cuda.unified host heuristics: which path (2D prefill or 3D split-KV decode), how many KV splits, whether to
// replay a graph, and the launch geometry + workspace of a problem. Pure host C++ (no CUDA headers): compiled
// into attnbench_kernels in every build, so it is unit-tested on machines without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnbench/attention.hpp"
#include "attnbench/kernel.hpp"
#include "attnbench/knobs.hpp"

namespace attnbench::cuda {

// Used when no device can be asked (unit tests, CPU-only builds): the H200's multiprocessor count.
constexpr int kDefaultSmCount = 132;

enum class UnifiedPath { prefill_2d, decode_3d };
const char* path_name(UnifiedPath p);

// ATTNBENCH_SM90_PATH, ATTNBENCH_SM90_PERSISTENT and ATTNBENCH_SM90_NARROW_WARPS as typed values.
enum class PathKnob { automatic, narrow, wide };
enum class PersistentKnob { automatic, off, on };
enum class NarrowWarps { w4, w8, w4x32 };  // 4 | 8 warps of 16 rows, or 4 of 32 where the head size has them
// How the 3D decode's splits are merged (ATTNBENCH_3D_MERGE): in the decode launch by the last split CTAs to
// finish (decode_merge.cuh), or by a second, programmatically dependent launch (decode_merge_kernel.cuh).
enum class DecodeMerge { fused, separate };
enum class MergeKnob { automatic, fused, separate };
// How the wide kernel moves a unit's Q in and its O out (ATTNBENCH_SM90_QO): TMA boxes where the tile's rows are
// one, else (or forced) the consumer threads' 16-byte copies.
enum class QoKnob { automatic, tma, threads };
// The persistent wide kernel's walk over its units (ATTNBENCH_SM90_WALK): the closed-form snake over the rank-major
// order, or the host's table over L2 sections (wide_walk.hpp).
enum class WalkKnob { automatic, rank, l2 };
const char* path_knob_name(PathKnob k);    // as the knob spells it: auto | narrow | wide

// cuda.unified's knobs, each parsed once from its string; the member defaults are the knob table's.
struct UnifiedKnobs {
  PathKnob path = PathKnob::automatic;                    // ATTNBENCH_SM90_PATH
  NarrowWarps narrow_warps = NarrowWarps::w4x32;          // ATTNBENCH_SM90_NARROW_WARPS
  int flash_wide = 0;                                     // ATTNBENCH_SM90_FLASH_WIDE; 0 = per head size
  int stages = 0;                                         // ATTNBENCH_SM90_STAGES; 0 = the deepest that fits
  PersistentKnob persistent = PersistentKnob::automatic;  // ATTNBENCH_SM90_PERSISTENT
  int gqa_pack = 0;                                       // ATTNBENCH_SM90_GQA_PACK; 0 = auto
  bool q_major_grid = false;                              // ATTNBENCH_Q_MAJOR_GRID
  int splits_3d = 0;                                      // ATTNBENCH_3D_SPLITS; 0 = heuristic
  int stages_3d = 0;                                      // ATTNBENCH_3D_STAGES; 0 = auto (kDecodeStages)
  MergeKnob merge_3d = MergeKnob::automatic;              // ATTNBENCH_3D_MERGE
  QoKnob qo = QoKnob::automatic;                          // ATTNBENCH_SM90_QO
  WalkKnob walk = WalkKnob::automatic;                    // ATTNBENCH_SM90_WALK
  int l2_section_kb = 0;                                  // ATTNBENCH_SM90_L2_SECTION_KB; 0 = kWideL2SectionBytes
  bool graph_2d = true;                                   // ATTNBENCH_2D_GRAPH
  bool graph_3d = true;                                   // ATTNBENCH_3D_GRAPH
  // The one reader of these knobs' strings (resolve.cpp); KnobValues::resolve has already checked them.
  static UnifiedKnobs parse(const KnobValues& knobs);
};

// Tile sizes: a constexpr function of the head size, shared by host plan and device kernels.
// 2D prefill: 16 or 32 query rows per warp (ATTNBENCH_SM90_NARROW_WARPS = 4|8 or 4x32); KV tile of
// prefill_block_n tokens, double-buffered. 32 rows per warp (two m16 tiles: every K/V ldmatrix feeds twice the
// mma's) exists at d <= 128 only: at d256 its fp32 output tile alone would fill the register file.
constexpr int prefill_block_n(int head_size) { return head_size <= 128 ? 64 : 32; }
constexpr int prefill_max_rows_per_warp(int head_size) { return head_size <= 128 ? 32 : 16; }
// 2D prefill, wide regime (wgmma, ATTNBENCH_SM90_PATH): consumer warpgroups of 64 query rows each
// (ATTNBENCH_SM90_FLASH_WIDE = 1|2|3), KV tiles of wide_block_n tokens in separate K and V rings of
// ATTNBENCH_SM90_STAGES slots. Head sizes 64, 128 (128-key tiles) and 256 (64-key tiles: the fp32 O tile of a
// warpgroup's 64 rows already takes 128 registers per thread).
constexpr int kWideRowsPerWg = 64;
constexpr int wide_block_n(int head_size) {
  return head_size == 256 ? 64 : (head_size == 64 || head_size == 128) ? 128 : 0;
}
// Consumer warpgroups that fit the register file (setmaxnreg budgets, prefill_wide.cuh): 3 only at d64; the
// default (ATTNBENCH_SM90_FLASH_WIDE=0) is the most that fit, the fastest measured (kernels/NOTES.md, wide v4),
// except d64 sequences of at most 256 tokens: 2 (a 192-row tile leaves a third of a 256-token sequence's second
// tile empty; measured 19.7 against 20.8 us at B16 S256, kernels/NOTES.md, Q and O by TMA).
constexpr int kWideMaxWgs = 3;
constexpr int wide_max_wgs(int head_size) { return head_size == 64 ? kWideMaxWgs : 2; }
constexpr int kWideShortD64 = 256;
constexpr int wide_default_wgs(int head_size, int max_seqlen_q = kWideShortD64 + 1) {
  return head_size == 64 && max_seqlen_q <= kWideShortD64 ? 2 : wide_max_wgs(head_size);
}
// The Q prologue (AttentionProblem::q_norm / q_rope_dim) is compiled into the kernels of up to 2 consumer
// warpgroups: beside 3 its code cost the d64 tile loop a register spill. A Q-prologue problem defaults to 2.
constexpr int kWideMaxWgsQPrologue = 2;
constexpr int kWideMaxStages = 4;
// An 8-bit cache's producer claims tile t's K and V slots before it widens and publishes tile t - 1; with 2 slots
// the claim of V(t) waits for P V(t - 2), which waits for K(t - 1): a deadlock (kernels/NOTES.md, features v4).
constexpr int kWideMinStagesCodes = 3;
constexpr int kWideSmemLimit = 227 * 1024;  // dynamic shared memory per CTA on sm_90
// Q (64 rows x d per consumer warpgroup; q_bufs copies) + K and V rings + 5 mbarriers per slot (FULL_K, FULL_V,
// EMPTY_K, EMPTY_V, and LANDED for an 8-bit cache's codes) + one mbarrier per Q tile (Q by TMA) + 8 scratch bytes
// per warp (a store that orders the softmax before a wgmma wait) + 1024 bytes to align the base for the 128-byte
// swizzle. A slot holds a 16-bit tile, except K's with k8 (the FP8 SDPA: the codes its wgmma reads, half that); an
// 8-bit cache's codes land in a slot's second half (widened in place, or transposed into V^T). Q's tile keeps
// 16-bit rows: the epilogue stages O there.
constexpr int kWideScratchBytes = 8 * 4 * (kWideMaxWgs + 1);
constexpr int wide_tile_bytes(int head_size) { return wide_block_n(head_size) * head_size * 2; }
constexpr int wide_k_slot_bytes(int head_size, bool k8) { return wide_tile_bytes(head_size) / (k8 ? 2 : 1); }
constexpr int wide_smem_bytes(int head_size, int wgs, int stages, int q_bufs = 1, bool k8 = false) {
  return kWideRowsPerWg * head_size * 2 * wgs * q_bufs +
         stages * (wide_k_slot_bytes(head_size, k8) + wide_tile_bytes(head_size)) +
         (5 * kWideMaxStages + 2 * kWideMaxWgs) * 8 + kWideScratchBytes + 1024;
}
// Q tiles per consumer warpgroup: a persistent CTA loads the next unit's Q into a second tile while it computes
// the current one, when the second tile fits beside the ring; otherwise (and one unit per CTA) one tile.
constexpr int wide_q_bufs(int head_size, int wgs, int stages, bool persistent, bool k8 = false) {
  return persistent && wide_smem_bytes(head_size, wgs, stages, 2, k8) <= kWideSmemLimit ? 2 : 1;
}
// Default ring depth: the deepest of 2..min(kWideMaxStages, 3 at d >= 128) that fits (d64 4, d128 3, d256 2; with
// k8's sized K slots d256 3);
// persistent CTAs first keep room for the second Q tile (d64 4, d128 2, d256 2 with one Q tile at 2 warpgroups):
// at d128, 2 slots with Q loaded ahead measured as fast as 3 on long sequences and 7-12% faster on short ones
// (kernels/NOTES.md, wide v5).
constexpr int wide_default_stages(int head_size, int wgs, bool persistent = false, bool k8 = false) {
  const int q_bufs = wide_q_bufs(head_size, wgs, 2, persistent, k8);
  int s = head_size >= 128 ? 3 : kWideMaxStages;
  while (s > 2 && wide_smem_bytes(head_size, wgs, s, q_bufs, k8) > kWideSmemLimit) --s;
  return s;
}
// GQA packing (ATTNBENCH_SM90_GQA_PACK): a wide tile of BM rows holds `pack` query heads of one KV group (pack
// divides the group size, at most kWidePackMax), tq = BM / pack tokens each (row r: token r % tq of the tile's
// head r / tq; rows from pack * tq on idle), so the short q-tiles of the heads that share K/V fill one tile and
// read each K/V tile once. The kernel divides a row by tq as (r * wide_pack_magic(tq)) >> 16: exact for every
// row r < 256 and 1 <= tq < 256 (host-tested).
constexpr int kWidePackMax = 16;
constexpr uint32_t wide_pack_magic(int tq) { return 65536u / static_cast<uint32_t>(tq) + 1u; }
// KV-tile steps plus one per unit (a unit's fixed cost: Q load, pipeline fill, epilogue) of the whole problem
// when each tile packs `pack` heads: the quantity the auto rule minimises.
int64_t wide_pack_cost(const AttentionProblem& p, int block_m, int pack);
// ATTNBENCH_SM90_GQA_PACK, 0 = auto: the pack (a divisor of the group size up to kWidePackMax) of least
// wide_pack_cost, the smaller on a tie. Packing only ever wins where a sequence's q-tiles are short of BM rows.
int wide_pack(const AttentionProblem& p, int block_m, const UnifiedKnobs& knobs);
// Wide K/V by TMA when its boxes never cross a page: 64-token boxes where block_size % 64 == 0, and for a 16-bit
// cache one box per page of 16 or 32 tokens (codes land in 64-token boxes only); else a cp.async gather.
constexpr bool wide_kv_tma(int block_size, bool codes) {
  return block_size % 64 == 0 || (!codes && (block_size == 16 || block_size == 32));
}
// The token rows of one K/V TMA box where wide_kv_tma holds: a 16-bit page of 16 or 32 tokens, else 64 (tensor_map.cpp
// and the producer's tma_kv_tile agree on it).
constexpr int wide_kv_box_tokens(int block_size) { return block_size == 16 || block_size == 32 ? block_size : 64; }
// A consumer warpgroup's 64 rows are one TMA box over (d, token, head) when a row's head changes only at a multiple
// of 64 rows (tq % 64 == 0: 64 tokens of one head) or every 64 rows hold whole heads (64 % tq == 0).
constexpr bool wide_qo_boxes(int tq) { return tq > 0 && (tq % kWideRowsPerWg == 0 || kWideRowsPerWg % tq == 0); }
// Q in and O out by TMA (ATTNBENCH_SM90_QO): a 16-bit Q whose warpgroup rows are boxes, unless the knob says threads.
bool wide_qo_tma(const AttentionProblem& p, int tq, const UnifiedKnobs& knobs);
// 3D decode: 16 packed (query token x group head) rows per CTA; key warps each take a slice of a K/V tile. A
// 16-bit cache: 4 key warps, and at d >= 128 two warps share each key slice, one per half of the head (P.V and O
// split by columns; both compute the slice's scores), so a CTA has 8 warps to hide the latency of its dependent
// mma / softmax chain at no extra K/V bytes. An 8-bit cache: 8 key warps over the whole head, so no two warps widen
// and multiply the same K codes (the loop, not HBM, sets that kernel's rate).
constexpr int kDecodeRowsPerCta = 16;
// cp.async ring slots of K and V tiles: 3 (ATTNBENCH_3D_STAGES=auto, the ring every decode row was measured with),
// or 6 where they fit (d64, d128): a grid of at most one CTA per SM then keeps twice the bytes in flight per SM.
constexpr int kDecodeStages = 3;
constexpr int kDecodeDeepStages = 6;
constexpr int decode_key_warps(int kv_bytes = 2) { return kv_bytes == 1 ? 8 : 4; }
// Keys per K/V tile: 64 of 16-bit codes, 128 of 8-bit ones (the same bytes, so the loop's fixed costs, its
// barriers and softmax reductions, are paid once per as many bytes).
constexpr int decode_block_n(int kv_bytes = 2) { return 128 / kv_bytes; }
constexpr int decode_d_split(int head_size, int kv_bytes = 2) { return kv_bytes == 2 && head_size >= 128 ? 2 : 1; }
constexpr int decode_warps(int head_size, int kv_bytes = 2) {
  return decode_key_warps(kv_bytes) * decode_d_split(head_size, kv_bytes);
}
// Q + the K/V ring.
constexpr int decode_smem_bytes(int head_size, int kv_bytes = 2, int stages = kDecodeStages) {
  return kDecodeRowsPerCta * head_size * 2 + stages * 2 * decode_block_n(kv_bytes) * head_size * kv_bytes;
}
// Whether a ring of `stages` slots fits a CTA's shared memory (the deep ring: d64 98 KB, d128 196 KB; not d256).
constexpr bool decode_ring_fits(int head_size, int kv_bytes, int stages) {
  return decode_smem_bytes(head_size, kv_bytes, stages) <= kWideSmemLimit;
}
constexpr int kMaxSplits = 128;
// Resident 3D CTAs per SM by shared memory (3 slots: d64 50 KB: 4, d128 100 KB: 2, d256 200 KB: 1; 6 slots: d64 2,
// d128 1); the split heuristic fills these slots.
constexpr int decode_ctas_per_sm(int head_size, int kv_bytes = 2, int stages = kDecodeStages) {
  const int by_smem = kWideSmemLimit / decode_smem_bytes(head_size, kv_bytes, stages);
  return by_smem < 4 ? by_smem : 4;
}

// Whether the wide (wgmma) prefill kernel exists for this problem's head size (64, 128, 256).
bool wide_supports(const AttentionProblem& p);
// Why the wide kernel cannot run this problem with these knobs (consumer warpgroups beyond wide_max_wgs, a ring
// that does not fit shared memory, a GQA pack that does not divide the group); empty when it can. A decline of
// resolve() where the knobs force the wide path.
std::string wide_knob_conflict(const AttentionProblem& p, const UnifiedKnobs& knobs);
// Why cuda.unified cannot apply this problem's Q prologue (q_norm / q_rope_dim): only the wide kernel has it, and
// it rotates 16-byte chunks (q_rope_dim % 16 == 0); empty when it can or there is none.
std::string q_prologue_conflict(const AttentionProblem& p, const UnifiedKnobs& knobs);
// Why cuda.unified cannot run this problem's 8-bit Q (the FP8 SDPA: Q and K in one 8-bit format, on the decode
// kernel where choose_path says decode, else on the wide kernel, whose TMA lands the codes: block_size % 64 == 0;
// choose_wide sends every such prefill there); empty when it can or Q is 16-bit.
std::string q8_conflict(const AttentionProblem& p, const UnifiedKnobs& knobs);
// Whether the problem needs a features instance: an attention feature or an 8-bit K/V cache.
bool runs_features(const AttentionProblem& p);
// Why the wide kernel cannot take this problem's K/V cache ("" when it can: 16-bit, or 8-bit codes in pages of a
// multiple of 64 tokens, which it lands by TMA): a decline where the knobs force the wide path; under auto such a
// problem runs the narrow kernel.
std::string wide_feature_conflict(const AttentionProblem& p);
// 2D prefill regime under ATTNBENCH_SM90_PATH: narrow forces mma.sync; wide takes wgmma where wide_supports
// (else narrow); auto takes wide only where it measured faster and passed the GPU gate (wide_auto, kernels/NOTES.md).
bool choose_wide(const AttentionProblem& p, const UnifiedKnobs& knobs);
// The auto rule alone (kernels/NOTES.md, wide v3/v4): wide where it passed the GPU gate and measured faster.
bool wide_auto(const AttentionProblem& p);
// Consumer warpgroups under ATTNBENCH_SM90_FLASH_WIDE (0 = wide_default_wgs, at most kWideMaxWgsQPrologue with
// a Q prologue or an attention feature: their code beside 3 warpgroups would spill).
int wide_wgs(const AttentionProblem& p, const UnifiedKnobs& knobs);
// The wide kernel's K slots hold 8-bit codes (the FP8 SDPA: Q in codes too; wide_k_slot_bytes).
bool wide_k8(const AttentionProblem& p);
// Ring slots under ATTNBENCH_SM90_STAGES (0 = wide_default_stages).
int wide_stages(const AttentionProblem& p, int wgs, const UnifiedKnobs& knobs);
// The fewest ring slots a problem's wide kernel runs with: kWideMinStagesCodes for an 8-bit cache under a 16-bit
// Q (widened by the producer), 2 otherwise (the FP8 SDPA's K lands by TMA, ready).
int wide_min_stages(const AttentionProblem& p);
// ATTNBENCH_SM90_PERSISTENT: 0 / 1, or auto: persistent for equal-length batches (slower on a ragged short batch,
// wide v4/v5; faster at B4 S2048 since the Q loads ahead and the L2 walk, kernels/NOTES.md).
bool wide_persistent(const AttentionProblem& p, const UnifiedKnobs& knobs);
// Persistent CTAs (ATTNBENCH_SM90_PERSISTENT=1): one per SM, each walking the q-tiles heaviest first.
int wide_persistent_ctas(int64_t work_tiles, int num_sms);

// Shapes the CUDA kernels serve: head_size 64/128/256, block_size a multiple of 16, Q and O in one of fp16/bf16,
// K/V in it or (d128 only) 8-bit e4m3/e5m2 codes; every attention feature on every kernel, the 8-bit caches on
// every kernel but the wide one at pages of other than a multiple of 64 tokens (its TMA landing; a forced decline).
Support unified_supports(const AttentionProblem& p);

// The dispatcher's choice. Decode (max_seqlen_q == 1) and short-q/long-KV problems whose packed rows
// (q_len * group) fit the 3D kernel's few row tiles go 3D; everything else 2D.
UnifiedPath choose_path(const AttentionProblem& p);

// The 3D split count from a model of the busiest SM's time (kernels/NOTES.md, decode v2, fitted to split sweeps
// on the H200): each SM streams its CTAs' K/V tiles no faster than its resident CTAs' own rate (a CTA's few tiles
// in flight cap it) and than its share of the read bandwidth among the SMs that have work, where the row tiles of
// one (sequence, kv head) share their K/V reads through L2; a wave past the resident CTA slots adds a CTA's fixed
// cost (launch, Q, pipeline fill, epilogue); each merge level adds a fixed cost and the partials it reads.
struct DecodeSplitCost {
  int sms = kDefaultSmCount;
  int ctas_per_sm = 2;          // resident slots per SM (decode_ctas_per_sm)
  double tile_bytes = 0;        // K + V bytes of one tile (decode_block_n keys) of one kv head
  double partial_bytes = 0;     // one split's published partial: packed rows x head_size x 4
  double cta_bytes_per_us = 0;  // one CTA's streaming rate (decode_cta_bytes_per_us)
  int row_tiles = 1;            // CTAs reading the same K/V (decode_row_tiles)
  int64_t ctas_unsplit = 0;     // the grid without splits: sequences x kv heads x row tiles
  int n_tiles = 0;              // KV tiles of the longest sequence's visible span (a sliding window's)
  int64_t column_tiles = 0;     // KV tiles over every CTA column with work (ragged batches: below ctas x n_tiles)
};
constexpr double kDecodeReadBytesPerUs = 4.4e6;    // the H200's streaming read, 4.4 TB/s
constexpr double kDecodeCtaFixedUs = 4.0;          // per wave
constexpr double kDecodeMergeLevelUs = 2.0;        // per merge level: fence, atomic, LSE reads (call 4)
constexpr double kDecodeMergeBytesPerUs = 1.0e5;   // one CTA's read of the partials (L2)
// A CTA's K/V rate, set by the bytes of its two tiles in flight (32 KB at d64, 64 KB at d128, 128 KB at d256) and
// its dependent mma / softmax chain per tile. Sweeps (kernels/NOTES.md, decode v2; features v6): the 16-bit d128
// kernel ~40 KB/us; with features (the score mods, 128 registers) 26; d64 (features) 25; d256 31; an 8-bit cache's
// tile (twice the keys in the bytes) 17. Measured with 3 ring slots, and taken for any ring until a deeper one is
// measured: the model then counts a deep ring by its CTAs per SM only.
constexpr double decode_cta_bytes_per_us(int head_size, int kv_bytes = 2, bool features = false) {
  if (kv_bytes == 1) return 1.7e4;
  if (head_size >= 256) return 3.1e4;
  if (head_size <= 64) return 2.5e4;
  return features ? 2.6e4 : 4.0e4;
}
// The cost model of a ring of `stages` slots (decode_stages).
DecodeSplitCost decode_split_cost(const AttentionProblem& p, int num_sms, int stages);
// ATTNBENCH_3D_STAGES: the ring the knob names, else kDecodeStages (resolve declines a ring that does not fit).
int decode_stages(const UnifiedKnobs& knobs);
// KV tiles (decode_block_n keys, tile-aligned) sequence s's rows see: all of them, or a sliding window's span.
int decode_visible_tiles(const AttentionProblem& p, int s);
// Modelled time in microseconds of the problem's CTA columns cut into `splits`: the busiest SM streams its share
// of every column's tiles, and at least one whole split of the longest sequence.
double decode_split_time_us(const DecodeSplitCost& c, int splits);
// The kernel cuts a column's n_tiles into splits of ceil(n_tiles / splits): some counts leave the last split
// nothing (256 tiles in 33 splits of 8), a CTA that costs its launch and merge and streams no bytes.
constexpr bool decode_splits_leave_one_empty(int n_tiles, int splits) {
  return splits > 1 && static_cast<int64_t>(splits - 1) * ((n_tiles + splits - 1) / splits) >= n_tiles;
}
// The split count of least modelled time, 1..min(kMaxSplits, n_tiles), among those whose longest column leaves no
// split empty; the fewest splits within 1% of the best (a split adds partial writes and merge work the model
// counts only roughly).
int decode_splits(const DecodeSplitCost& c);
// ATTNBENCH_3D_MERGE=auto: the separate merge from kDecodeSeparateMergeSplits splits on. The merge sweep
// (kernels/NOTES.md, decode v3): the fused merge's last CTA reads every split of its column, the separate one
// pays a second launch's release; separate won at 8 splits and up (d256 B1 64 splits 36.8 -> 28.9 us, d128 B1 16
// splits 11.2 -> 10.5), tied at 8 on the ragged row, and lost by 0.3-1.1 us at 2-4 splits.
constexpr int kDecodeSeparateMergeSplits = 8;
constexpr DecodeMerge decode_auto_merge(int splits) {
  return splits >= kDecodeSeparateMergeSplits ? DecodeMerge::separate : DecodeMerge::fused;
}

// recommend_graph_replay: decode yes, max_seqlen_q <= 768 yes, longer no, never while the caller is
// capturing nor for a problem with an attention feature (graph mode is still measured); ATTNBENCH_3D_GRAPH gates
// the 3D path, ATTNBENCH_2D_GRAPH the 2D path.
bool recommend_graph_replay(const AttentionProblem& p, const UnifiedKnobs& knobs, bool caller_capturing);

// Everything plan() derives once: path, tile and grid geometry, splits, workspace.
struct UnifiedLaunchPlan {
  UnifiedPath path = UnifiedPath::prefill_2d;
  int warps = 8;          // 2D: warps per CTA (ATTNBENCH_SM90_NARROW_WARPS); 3D: decode_warps
  int wide_wgs = 0;       // 2D: consumer warpgroups of the wide (wgmma) kernel; 0 = narrow (mma.sync) kernel
  bool wide_kv_tma = false;  // 2D wide: K/V tiles by TMA (the function wide_kv_tma), else the cp.async gather
  bool wide_qo_tma = false;  // 2D wide: Q by TMA, and O by a TMA store where a warpgroup's rows are all in its sequence
  int wide_stages = 0;       // 2D wide: K and V ring slots
  int wide_q_bufs = 1;       // 2D wide: Q tiles per consumer warpgroup (2: the next unit's Q loads ahead)
  bool persistent = false;   // 2D wide: grid_x persistent CTAs walk work_tiles (q-tile rank, sequence, head)
  int64_t work_tiles = 0;    // 2D wide persistent: m_tiles x sequences x heads / wide_pack
  int64_t wide_walk_section_bytes = 0;  // 2D wide persistent: the L2 walk's K/V bytes per section (0: the snake)
  int wide_pack = 1;         // 2D wide: query heads per tile (GQA packing), wide_tq tokens of each
  int wide_tq = 0;
  int rows_per_warp = 16; // 2D: query rows per warp (16, or 32 for ATTNBENCH_SM90_NARROW_WARPS=4x32 at d <= 128)
  int block_m = 128;      // 2D: query rows per CTA; 3D: packed rows per CTA
  int block_n = 64;       // keys per KV tile
  bool q_major = false;   // 2D: q-tile index on grid.x
  int m_tiles = 0;        // 2D: q-tiles of the longest sequence; 3D: packed-row tiles of the longest sequence
  int splits = 1;         // 3D: KV splits per (sequence, kv head, row tile)
  int decode_stages = 0;  // 3D: K/V ring slots (decode_stages)
  int merge_group = 1;    // 3D fused merge: splits merged per group (decode_merge_group; >= splits: one level)
  DecodeMerge merge = DecodeMerge::fused;  // 3D with splits > 1: where the splits are merged
  int grid_x = 0, grid_y = 0, grid_z = 0;
  // 3D with splits > 1: per-split fp32 LSE + partial O + arrival counters; 2D wide with the L2 walk: its table
  std::size_t workspace_bytes = 0;
  std::string summary;
};

// The geometry of a problem resolve() accepts (resolve.hpp: it checks the problem and the knobs first).
UnifiedLaunchPlan make_unified_launch_plan(const AttentionProblem& p, const UnifiedKnobs& knobs, int num_sms);
// The same from knob strings, for callers that hold KnobValues (the GPU tests).
inline UnifiedLaunchPlan make_unified_launch_plan(const AttentionProblem& p, const KnobValues& knobs, int num_sms) {
  return make_unified_launch_plan(p, UnifiedKnobs::parse(knobs), num_sms);
}

// A kernel instance (one explicit instantiation, listed in instances.cmake): the template arguments a plan needs.
// narrow: launch_prefill<dtype, head_size, warps, rows_per_warp, kv, features>; wide: launch_prefill_wide<dtype,
// head_size, wgs, kv, features, q8>; decode: launch_decode<dtype, head_size, kv, features>. Fields a variant does
// not use stay 0.
// A problem with any attention feature or an 8-bit K/V cache runs a features instance.
enum class InstanceVariant { narrow, wide, decode };
struct InstanceKey {
  InstanceVariant variant = InstanceVariant::narrow;
  DType dtype = DType::bf16;
  int head_size = 0;
  int warps = 0;          // narrow
  int rows_per_warp = 0;  // narrow
  int wgs = 0;            // wide: consumer warpgroups
  DType kv = DType::bf16;  // K/V storage: dtype, or an 8-bit code (with features)
  bool features = false;   // the attention features compiled in (feature_tile.cuh): narrow and decode
  bool q8 = false;         // Q in the cache's 8-bit codes (the FP8 SDPA; wide only): dtype is then O's
  bool operator==(const InstanceKey& o) const {
    return variant == o.variant && dtype == o.dtype && head_size == o.head_size && warps == o.warps &&
           rows_per_warp == o.rows_per_warp && wgs == o.wgs && kv == o.kv && features == o.features && q8 == o.q8;
  }
  bool operator!=(const InstanceKey& o) const { return !(*this == o); }
};
// The instance a launch plan runs.
InstanceKey instance_key(const AttentionProblem& p, const UnifiedLaunchPlan& lp);
// The key as instances.cmake spells it: narrow/bf16/d64/w4r16, wide/fp16/d128/wgs2, decode/bf16/d256, and with
// features decode/bf16/d128/feat, decode/bf16-e4m3/d128/feat (Q/O dtype - K/V dtype), and with Q in the cache's
// codes wide/bf16-e4m3/d128/wgs2/feat/q8 (O dtype - Q and K/V dtype).
std::string instance_name(const InstanceKey& k);
// The decline of a key the build has no instance of (DeclineKind::no_instance, the key named in the reason).
Support no_instance(const InstanceKey& k);
// The entry of `key` in [begin, end) (entries with an InstanceKey `key` member); nullptr when there is none.
// Looked up once per plan, so a scan of the few dozen entries is enough.
template <class Entry>
const Entry* find_instance(const Entry* begin, const Entry* end, const InstanceKey& key) {
  for (const Entry* e = begin; e != end; ++e)
    if (e->key == key) return e;
  return nullptr;
}

// Workspace layout of the 3D path with splits > 1: lse[splits][total_q * heads] (padded to decode_lse_floats, so
// the partials that follow stay 16-byte aligned for their float4 stores) then
// o[splits][total_q * heads][head_size], fp32, then, for the fused merge only, decode_merge_counters(splits,
// merge_group) int32 arrival counters per (sequence, kv head, row tile) (decode_counter_count): one per group of
// merge_group splits, and one for the groups when there is more than one. The last CTA to arrive at a counter resets
// it to 0, so the counters are zero between calls; the launcher zeroes them (cudaMemsetAsync) when another plan (or
// none) ran on the workspace since the plan's last call (common/workspace_owners.hpp).
constexpr int kDecodeMergeGroup = 8;  // the group of a two-level merge
constexpr int decode_merge_groups(int splits, int group) { return (splits + group - 1) / group; }
constexpr int decode_merge_counters(int splits, int group) {
  return decode_merge_groups(splits, group) + (decode_merge_groups(splits, group) > 1 ? 1 : 0);
}
// Modelled merge time of `splits` partials of partial_bytes each in groups of `group` (group >= splits: one level).
double decode_merge_us(int splits, int group, double partial_bytes);
// The merge's group: all splits in one level, or kDecodeMergeGroup and a second level, whichever decode_merge_us
// says is faster (d128 B1: 16 partials of 2 KB, one level; d256 B1: 64 of 16 KB, two).
int decode_merge_group(int splits, double partial_bytes);
std::size_t decode_workspace_bytes(const AttentionProblem& p, int splits, int merge_group, DecodeMerge merge);
constexpr int64_t decode_lse_floats(int64_t splits, int64_t rows) { return (splits * rows + 3) / 4 * 4; }
int64_t decode_counter_count(const AttentionProblem& p, int splits, int merge_group, DecodeMerge merge);
// The separate merge's block (decode_merge_kernel.cuh): head_size / 4 column threads (four columns each) x
// split_threads (thread y merges splits y, y + split_threads, ..., kDecodeMergeLoads of them loaded at once) x
// rows (packed rows of one CTA column), kDecodeMergeThreads in all.
constexpr int kDecodeMergeThreads = 256;
constexpr int kDecodeMergeLoads = 16;
struct DecodeMergeBlock {
  int split_threads = 1, rows = 1;
};
constexpr DecodeMergeBlock decode_merge_block(int head_size, int splits) {
  const int tc = head_size / 4;
  int ts = 1;
  while (ts * kDecodeMergeLoads < splits && 2 * ts * tc <= kDecodeMergeThreads) ts *= 2;
  const int rows = kDecodeMergeThreads / (tc * ts);
  return {ts, rows < kDecodeRowsPerCta ? rows : kDecodeRowsPerCta};
}
// Packed-row tiles (kDecodeRowsPerCta rows) of the longest sequence.
int decode_row_tiles(const AttentionProblem& p);

}  // namespace attnbench::cuda
