#include "cuda/heuristics.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/device/visibility.hpp"
#include "cuda/wide_walk.hpp"

namespace attnbench::cuda {

const char* path_name(UnifiedPath p) { return p == UnifiedPath::prefill_2d ? "2d" : "3d"; }

const char* path_knob_name(PathKnob k) {
  switch (k) {
    case PathKnob::automatic: return "auto";
    case PathKnob::narrow: return "narrow";
    case PathKnob::wide: return "wide";
  }
  return "?";
}

Support unified_supports(const AttentionProblem& p) {
  const AttentionTypes& t = p.types;
  if (const std::string types = unified_storage_conflict(p, "cuda.unified"); !types.empty()) return Support::no(types);
  if (p.head_size != 64 && p.head_size != 128 && p.head_size != 256)
    return Support::no("head_size " + std::to_string(p.head_size) + " not in {64, 128, 256}");
  if (!is_16bit(t.kv) && p.head_size != 128 && !(p.head_size == 256 && !is_16bit(t.q)))
    return Support::no(std::string("an 8-bit K/V cache (") + dtype_name(t.kv) + ") at head_size " +
                       std::to_string(p.head_size) + ": cuda.unified has 8-bit K/V kernels at head_size 128 only "
                       "(and the FP8 SDPA, an 8-bit Q too, at 256)");
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

bool wide_supports(const AttentionProblem& p) { return wide_block_n(p.head_size) > 0; }

std::string wide_knob_conflict(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  if (!wide_supports(p)) return "";
  const int wgs = wide_wgs(p, knobs);
  if (wgs > wide_max_wgs(p.head_size))
    return "ATTNBENCH_SM90_FLASH_WIDE=" + std::to_string(wgs) + ": head size " + std::to_string(p.head_size) +
           " fits at most " + std::to_string(wide_max_wgs(p.head_size)) +
           " consumer warpgroups in the register file";
  if (p.fusion.has_q_prologue() && wgs > kWideMaxWgsQPrologue)
    return "ATTNBENCH_SM90_FLASH_WIDE=" + std::to_string(wgs) + ": the Q prologue (norm / RoPE of Q) is in the " +
           "kernels of at most " + std::to_string(kWideMaxWgsQPrologue) + " consumer warpgroups";
  const int stages = knobs.stages;
  if (stages != 0 && stages < wide_min_stages(p))
    return "ATTNBENCH_SM90_STAGES=" + std::to_string(stages) + ": an 8-bit cache's producer widens tile t - 1 "
           "after claiming tile t's slots, which needs at least " + std::to_string(wide_min_stages(p)) + " slots";
  if (const int smem = wide_smem_bytes(p.head_size, wgs, stages, 1, wide_k8(p)); stages != 0 && smem > kWideSmemLimit)
    return "ATTNBENCH_SM90_STAGES=" + std::to_string(stages) + ": " + std::to_string(smem) +
           " bytes of shared memory at head size " + std::to_string(p.head_size) + " with " + std::to_string(wgs) +
           " consumer warpgroups (limit " + std::to_string(kWideSmemLimit) + ")";
  const int pack = knobs.gqa_pack;
  if (pack > kWidePackMax || (pack > 0 && p.group_size() % pack != 0))
    return "ATTNBENCH_SM90_GQA_PACK=" + std::to_string(pack) + ": a tile packs heads of one KV group, a divisor of " +
           "the group size " + std::to_string(p.group_size()) + " up to " + std::to_string(kWidePackMax);
  if (knobs.qo == QoKnob::tma) {
    if (!is_16bit(p.types.q))
      return std::string("ATTNBENCH_SM90_QO=tma: an 8-bit Q (") + dtype_name(p.types.q) + ") is copied by the threads";
    const int block_m = kWideRowsPerWg * wgs, pack_used = wide_pack(p, block_m, knobs), tq = block_m / pack_used;
    if (!wide_qo_boxes(tq))
      return "ATTNBENCH_SM90_QO=tma: a tile of " + std::to_string(tq) + " tokens per head (GQA pack " +
             std::to_string(pack_used) + ") puts a head change inside a warpgroup's 64 rows, which one TMA box "
             "cannot hold";
  }
  return "";
}

bool wide_qo_tma(const AttentionProblem& p, int tq, const UnifiedKnobs& knobs) {
  return knobs.qo != QoKnob::threads && is_16bit(p.types.q) && wide_qo_boxes(tq);
}

int64_t wide_pack_cost(const AttentionProblem& p, int block_m, int pack) {
  const int tq = block_m / pack, bn = wide_block_n(p.head_size);
  int64_t per_head_tile = 0;
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q = p.q_lens[s];
    const device::Visibility vis(q, p.kv_lens[s], p.causal, p.top_left, -1, -1);
    for (int m0 = 0; m0 < q; m0 += tq) {
      per_head_tile += vis.tiles_end(m0 + tq, bn) + 1;
    }
  }
  return per_head_tile * (p.heads / pack);
}

int wide_pack(const AttentionProblem& p, int block_m, const UnifiedKnobs& knobs) {
  if (knobs.gqa_pack > 0) return knobs.gqa_pack;
  int best = 1;
  int64_t best_cost = wide_pack_cost(p, block_m, 1);
  for (int pack = 2; pack <= std::min(kWidePackMax, p.group_size()); ++pack) {
    if (p.group_size() % pack != 0) continue;
    const int64_t c = wide_pack_cost(p, block_m, pack);
    if (c < best_cost) best = pack, best_cost = c;
  }
  return best;
}

std::string q_prologue_conflict(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  if (!p.fusion.has_q_prologue()) return "";
  if (choose_path(p) != UnifiedPath::prefill_2d)
    return "the Q prologue (norm / RoPE of Q) is in the wide 2D kernel; this problem runs the 3D decode kernel";
  if (!choose_wide(p, knobs) && wide_supports(p) && !wide_knob_conflict(p, knobs).empty())
    return "the Q prologue (norm / RoPE of Q) is in the wide 2D kernel, which cannot run this problem: " +
           wide_knob_conflict(p, knobs);
  if (!choose_wide(p, knobs))
    return "the Q prologue (norm / RoPE of Q) is in the wide 2D kernel; ATTNBENCH_SM90_PATH=" +
           std::string(path_knob_name(knobs.path)) + " runs the narrow kernel for this problem";
  if (p.fusion.q_rope_dim % 16 != 0)
    return "q_rope_dim " + std::to_string(p.fusion.q_rope_dim) + " is not a multiple of 16 (the Q prologue rotates "
           "16-byte chunks)";
  return "";
}

std::string q8_conflict(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  const AttentionTypes& t = p.types;
  if (is_16bit(t.q)) return "";
  if (t.q != t.kv)
    return "types " + t.name() + " (q-kv-o): the FP8 SDPA multiplies Q and K codes of one format (q_dtype = kv_dtype)";
  if (choose_path(p) == UnifiedPath::decode_3d)  // the decode kernel: any block size
    return p.head_size == 128 ? "" : "an 8-bit Q over a long KV runs on the decode kernel, which has 8-bit codes at "
                                     "head_size 128 only (head_size " + std::to_string(p.head_size) + ")";
  const std::string what = std::string("an 8-bit Q (") + dtype_name(t.q) + ") prefill runs on the wide 2D kernel only";
  if (knobs.path == PathKnob::narrow) return what + "; ATTNBENCH_SM90_PATH=narrow asks for the narrow one";
  if (!wide_kv_tma(p.block_size, true))
    return what + ", which lands 8-bit codes by TMA in pages of a multiple of 64 tokens (block_size " +
           std::to_string(p.block_size) + ")";
  if (const std::string c = wide_knob_conflict(p, knobs); !c.empty()) return what + ", which cannot run it: " + c;
  return "";
}

bool runs_features(const AttentionProblem& p) { return p.features.any() || !is_16bit(p.types.kv); }

std::string wide_feature_conflict(const AttentionProblem& p) {
  if (is_16bit(p.types.kv) || wide_kv_tma(p.block_size, true)) return "";
  return std::string("an 8-bit K/V cache (") + dtype_name(p.types.kv) + ") at block_size " +
         std::to_string(p.block_size) + ": the wide 2D kernel lands codes by TMA, in pages of a multiple of 64 "
         "tokens; ATTNBENCH_SM90_PATH=auto or narrow runs the narrow kernel, which has it";
}

bool choose_wide(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  if (knobs.path == PathKnob::narrow || !wide_supports(p) || !wide_feature_conflict(p).empty()) return false;
  if (knobs.path == PathKnob::wide || !is_16bit(p.types.q)) return true;
  // An 8-bit cache takes the same rule: its wide kernel beat its narrow one 1.4-1.5x at S512-4096 (kernels/NOTES.md,
  // features v5).
  return wide_auto(p) && wide_knob_conflict(p, knobs).empty();
}

bool wide_auto(const AttentionProblem& p) {
  // kernels/NOTES.md, wide v3/v4: with TMA K/V (block_size % 64 == 0) the wide kernel beat the narrow one on every
  // shape measured from max_seqlen_q 128 at d128 (1.07x at B16 S128, 2.1x at S8192) and d256 (2.7x at S8192); at
  // d64 it still loses at B32 S128 (17.3 vs 16.4 us, measured with Q and O by TMA) and wins from S256 on (1.17x at
  // B16 S256, 1.31x at H32/KV8 B8 S384 packed 4 x 48, 1.56x at S8192 with 3 warpgroups). Pages of 16 or 32 tokens
  // by TMA (a box per page) beat the narrow kernel on every small_pages row (0.52-0.89x its time; kernels/NOTES.md,
  // session 24). The cp.async gather (other block sizes) lost to it (237 vs 262 TFLOP/s at d128): narrow there.
  if (!wide_supports(p) || !wide_kv_tma(p.block_size, !is_16bit(p.types.kv))) return false;
  return p.max_seqlen_q() >= (p.head_size == 64 ? kWideShortD64 : 128);
}

int wide_wgs(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  if (knobs.flash_wide != 0) return knobs.flash_wide;
  const int wgs = wide_default_wgs(p.head_size, p.max_seqlen_q());
  return p.fusion.has_q_prologue() || runs_features(p) ? std::min(wgs, kWideMaxWgsQPrologue) : wgs;
}

int wide_stages(const AttentionProblem& p, int wgs, const UnifiedKnobs& knobs) {
  if (knobs.stages != 0) return knobs.stages;
  const bool k8 = wide_k8(p);
  const int s = wide_default_stages(p.head_size, wgs, wide_persistent(p, knobs), k8);
  if (is_16bit(p.types.kv)) return s;
  // An 8-bit cache: 3 slots where they fit (the measured FP8 SDPA at d128), else its minimum.
  const int deep = std::max(s, kWideMinStagesCodes);
  return wide_smem_bytes(p.head_size, wgs, deep, 1, k8) <= kWideSmemLimit ? deep : std::max(s, wide_min_stages(p));
}

bool wide_k8(const AttentionProblem& p) { return !is_16bit(p.types.q); }

int wide_min_stages(const AttentionProblem& p) {
  if (is_16bit(p.types.kv)) return 2;
  // The FP8 SDPA's K lands ready on its FULL barrier: the consumers never wait on tile t's claim, so 2 slots do.
  return is_16bit(p.types.q) ? kWideMinStagesCodes : 2;
}

bool wide_persistent(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  if (knobs.persistent != PersistentKnob::automatic) return knobs.persistent == PersistentKnob::on;
  const bool equal = std::all_of(p.q_lens.begin(), p.q_lens.end(), [&](int q) { return q == p.q_lens.front(); });
  return equal;
}

int wide_persistent_ctas(int64_t work_tiles, int num_sms) {
  if (num_sms <= 0) num_sms = kDefaultSmCount;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(work_tiles, num_sms)));
}

DecodeSplitCost decode_split_cost(const AttentionProblem& p, int num_sms, int stages) {
  DecodeSplitCost c;
  c.sms = num_sms > 0 ? num_sms : kDefaultSmCount;
  const int kvb = static_cast<int>(dtype_bytes(p.types.kv));
  c.ctas_per_sm = decode_ctas_per_sm(p.head_size, kvb, stages);
  c.tile_bytes = 2.0 * decode_block_n(kvb) * p.head_size * kvb;
  const int rows = std::min<int64_t>(static_cast<int64_t>(p.max_seqlen_q()) * p.group_size(), kDecodeRowsPerCta);
  c.partial_bytes = 4.0 * rows * p.head_size;
  c.cta_bytes_per_us = decode_cta_bytes_per_us(p.head_size, kvb, runs_features(p));
  c.row_tiles = decode_row_tiles(p);
  c.ctas_unsplit = static_cast<int64_t>(p.num_seqs()) * p.kv_heads * c.row_tiles;
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int64_t rt = (static_cast<int64_t>(p.q_lens[s]) * p.group_size() + kDecodeRowsPerCta - 1) / kDecodeRowsPerCta;
    const int tiles = decode_visible_tiles(p, s);
    c.n_tiles = std::max(c.n_tiles, tiles);
    c.column_tiles += p.kv_heads * rt * tiles;
  }
  return c;
}

int decode_stages(const UnifiedKnobs& knobs) { return knobs.stages_3d > 0 ? knobs.stages_3d : kDecodeStages; }

int decode_visible_tiles(const AttentionProblem& p, int s) {
  const device::Visibility vis(p.q_lens[s], p.kv_lens[s], p.causal, p.top_left, p.features.window_left,
                               p.features.window_right);
  const int bn = decode_block_n(static_cast<int>(dtype_bytes(p.types.kv)));
  const int end = vis.rows_end(p.q_lens[s]), begin = vis.first_visible(0) / bn * bn;
  return end > begin ? (end - begin + bn - 1) / bn : 0;
}

double decode_split_time_us(const DecodeSplitCost& c, int splits) {
  const int64_t ctas = c.ctas_unsplit * splits;
  const int64_t slots = static_cast<int64_t>(c.sms) * c.ctas_per_sm;
  const int64_t waves = (ctas + slots - 1) / slots;
  const int64_t per_sm = (ctas + c.sms - 1) / c.sms;  // CTAs the busiest SM runs, over all waves
  const int64_t resident = std::min<int64_t>(per_sm, c.ctas_per_sm);
  const double active = static_cast<double>(std::min<int64_t>(ctas, c.sms));
  const int split_tiles = (c.n_tiles + splits - 1) / splits;  // the longest sequence's split
  const double mean_tiles = std::min<double>(split_tiles, static_cast<double>(c.column_tiles) / ctas);
  const double tiles = std::max<double>(per_sm * mean_tiles, split_tiles);
  const double bytes = tiles * c.tile_bytes;  // the busiest SM's, L2 hits included
  const double stream = std::max(bytes / (resident * c.cta_bytes_per_us),
                                 bytes / c.row_tiles / (kDecodeReadBytesPerUs / active));
  double t = stream + waves * kDecodeCtaFixedUs;
  if (splits > 1) t += decode_merge_us(splits, decode_merge_group(splits, c.partial_bytes), c.partial_bytes);
  return t;
}

double decode_merge_us(int splits, int group, double partial_bytes) {
  if (splits <= 1) return 0;
  const int groups = decode_merge_groups(splits, group);
  const int reads = std::min(splits, group) + (groups > 1 ? groups : 0);  // the busiest merging CTA's
  return (groups > 1 ? 2 : 1) * kDecodeMergeLevelUs + reads * partial_bytes / kDecodeMergeBytesPerUs;
}

int decode_merge_group(int splits, double partial_bytes) {
  if (splits <= kDecodeMergeGroup) return std::max(splits, 1);
  return decode_merge_us(splits, splits, partial_bytes) <= decode_merge_us(splits, kDecodeMergeGroup, partial_bytes)
             ? splits
             : kDecodeMergeGroup;
}

int decode_splits(const DecodeSplitCost& c) {
  const int max_splits = std::max(1, std::min(kMaxSplits, c.n_tiles));
  std::vector<double> t(max_splits + 1);
  double best = 0;
  for (int s = 1; s <= max_splits; ++s) {
    if (decode_splits_leave_one_empty(c.n_tiles, s)) continue;
    t[s] = decode_split_time_us(c, s);
    if (s == 1 || t[s] < best) best = t[s];
  }
  for (int s = 1; s <= max_splits; ++s)
    if (!decode_splits_leave_one_empty(c.n_tiles, s) && t[s] <= 1.01 * best) return s;
  return 1;
}

bool recommend_graph_replay(const AttentionProblem& p, const UnifiedKnobs& knobs, bool caller_capturing) {
  if (caller_capturing) return false;
  if (p.features.any()) return false;  // a feature-flagged problem launches eagerly (graph mode still measures it)
  if (choose_path(p) == UnifiedPath::decode_3d) return knobs.graph_3d;
  if (p.max_seqlen_q() > 768) return false;
  return knobs.graph_2d;
}

int decode_row_tiles(const AttentionProblem& p) {
  const int64_t packed_rows = static_cast<int64_t>(p.max_seqlen_q()) * p.group_size();
  return static_cast<int>((packed_rows + kDecodeRowsPerCta - 1) / kDecodeRowsPerCta);
}

int64_t decode_counter_count(const AttentionProblem& p, int splits, int merge_group, DecodeMerge merge) {
  if (merge == DecodeMerge::separate) return 0;
  return static_cast<int64_t>(p.num_seqs()) * p.kv_heads * decode_row_tiles(p) *
         decode_merge_counters(splits, merge_group);
}

std::size_t decode_workspace_bytes(const AttentionProblem& p, int splits, int merge_group, DecodeMerge merge) {
  if (splits <= 1) return 0;
  const std::size_t rows = static_cast<std::size_t>(p.total_q()) * p.heads;
  const std::size_t floats = static_cast<std::size_t>(decode_lse_floats(splits, static_cast<int64_t>(rows))) +
                             static_cast<std::size_t>(splits) * rows * static_cast<std::size_t>(p.head_size);
  return floats * sizeof(float) +
         static_cast<std::size_t>(decode_counter_count(p, splits, merge_group, merge)) * sizeof(int32_t);
}

InstanceKey instance_key(const AttentionProblem& p, const UnifiedLaunchPlan& lp) {
  InstanceKey k;
  k.dtype = p.types.o;  // O's dtype, Q's too unless Q is in the cache's 8-bit codes (resolve declines the rest)
  k.kv = p.types.kv;
  k.q8 = !is_16bit(p.types.q);
  k.head_size = p.head_size;
  k.features = runs_features(p);
  if (lp.path == UnifiedPath::decode_3d) {
    k.variant = InstanceVariant::decode;
  } else if (lp.wide_wgs > 0) {
    k.variant = InstanceVariant::wide;
    k.wgs = lp.wide_wgs;
  } else {
    k.variant = InstanceVariant::narrow;
    k.warps = lp.warps;
    k.rows_per_warp = lp.rows_per_warp;
  }
  return k;
}

std::string instance_name(const InstanceKey& k) {
  const std::string types =
      k.kv == k.dtype ? dtype_name(k.dtype) : std::string(dtype_name(k.dtype)) + "-" + dtype_name(k.kv);
  const std::string head = types + "/d" + std::to_string(k.head_size);
  const std::string feat = std::string(k.features ? "/feat" : "") + (k.q8 ? "/q8" : "");
  switch (k.variant) {
    case InstanceVariant::narrow:
      return "narrow/" + head + "/w" + std::to_string(k.warps) + "r" + std::to_string(k.rows_per_warp) + feat;
    case InstanceVariant::wide: return "wide/" + head + "/wgs" + std::to_string(k.wgs) + feat;
    case InstanceVariant::decode: return "decode/" + head + feat;
  }
  return "?/" + head + feat;
}

Support no_instance(const InstanceKey& k) {
  return Support::no_instance("no instance for " + instance_name(k) + " in this build");
}

namespace {

std::string wide_summary(const UnifiedLaunchPlan& lp) {
  return "2d wide wgmma consumer-wgs=" + std::to_string(lp.wide_wgs) + " tile=" + std::to_string(lp.block_m) + "x" +
         std::to_string(lp.block_n) +
         (lp.wide_pack > 1 ? " gqa-pack=" + std::to_string(lp.wide_pack) + "x" + std::to_string(lp.wide_tq)
                           : std::string()) +
         (lp.wide_kv_tma ? " kv=tma" : " kv=cp.async") + (lp.wide_qo_tma ? " qo=tma" : " qo=threads") +
         " stages=" + std::to_string(lp.wide_stages) +
         (lp.persistent ? " persistent ctas=" + std::to_string(lp.grid_x) + (lp.wide_q_bufs == 2 ? " q-ahead" : "") +
                              (lp.wide_walk_section_bytes > 0
                                   ? " walk=l2:" + std::to_string(lp.wide_walk_section_bytes >> 10) + "KiB"
                                   : std::string())
                        : std::string(lp.q_major ? " q-major" : " head-major"));
}

// 2D wide (wgmma): consumer warpgroups, K/V ring and GQA pack, then a grid of tiles or the persistent CTAs.
UnifiedLaunchPlan wide_launch_plan(const AttentionProblem& p, const UnifiedKnobs& knobs, int num_sms) {
  UnifiedLaunchPlan lp;
  lp.wide_wgs = wide_wgs(p, knobs);
  lp.warps = 4 * (lp.wide_wgs + 1);
  lp.rows_per_warp = 16;
  lp.block_m = kWideRowsPerWg * lp.wide_wgs;
  lp.block_n = wide_block_n(p.head_size);
  lp.wide_kv_tma = wide_kv_tma(p.block_size, !is_16bit(p.types.kv));
  lp.wide_stages = wide_stages(p, lp.wide_wgs, knobs);
  lp.q_major = knobs.q_major_grid;
  lp.wide_pack = wide_pack(p, lp.block_m, knobs);
  lp.wide_tq = lp.block_m / lp.wide_pack;
  lp.wide_qo_tma = wide_qo_tma(p, lp.wide_tq, knobs);
  const int head_tiles = p.heads / lp.wide_pack;
  lp.m_tiles = (p.max_seqlen_q() + lp.wide_tq - 1) / lp.wide_tq;
  // One CTA per tile puts the m-tiles on grid.y (at most 65535) unless q-major; beyond, the CTAs walk them.
  lp.persistent = wide_persistent(p, knobs) || (!lp.q_major && lp.m_tiles > 65535);
  lp.work_tiles = static_cast<int64_t>(lp.m_tiles) * p.num_seqs() * head_tiles;  // resolve() bounds it
  lp.wide_q_bufs = wide_q_bufs(p.head_size, lp.wide_wgs, lp.wide_stages, lp.persistent, wide_k8(p));
  if (lp.persistent) {
    lp.grid_x = wide_persistent_ctas(lp.work_tiles, num_sms);
    lp.grid_y = lp.grid_z = 1;
    lp.wide_walk_section_bytes = wide_walk_section_bytes(p, knobs, true);
    if (lp.wide_walk_section_bytes > 0) lp.workspace_bytes = wide_walk_table_entries(lp) * sizeof(int32_t);
  } else {
    lp.grid_x = lp.q_major ? lp.m_tiles : head_tiles;
    lp.grid_y = lp.q_major ? head_tiles : lp.m_tiles;
    lp.grid_z = p.num_seqs();
  }
  lp.summary = wide_summary(lp);
  return lp;
}

// 2D narrow (mma.sync): warps x rows per warp under ATTNBENCH_SM90_NARROW_WARPS, one CTA per (head, q-tile).
UnifiedLaunchPlan narrow_launch_plan(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  UnifiedLaunchPlan lp;
  if (knobs.narrow_warps == NarrowWarps::w4x32) {  // d256 has no 32-row kernel: the same 128-row tile as 8 x 16
    lp.rows_per_warp = prefill_max_rows_per_warp(p.head_size);
    lp.warps = 128 / lp.rows_per_warp;
  } else {
    lp.warps = knobs.narrow_warps == NarrowWarps::w4 ? 4 : 8;
    lp.rows_per_warp = 16;
  }
  lp.block_m = lp.rows_per_warp * lp.warps;
  lp.block_n = prefill_block_n(p.head_size);
  lp.q_major = knobs.q_major_grid;
  lp.m_tiles = (p.max_seqlen_q() + lp.block_m - 1) / lp.block_m;
  lp.grid_x = lp.q_major ? lp.m_tiles : p.heads;
  lp.grid_y = lp.q_major ? p.heads : lp.m_tiles;
  lp.grid_z = p.num_seqs();
  lp.summary = "2d warps=" + std::to_string(lp.warps) +
               (lp.rows_per_warp != 16 ? " rows/warp=" + std::to_string(lp.rows_per_warp) : std::string()) +
               " tile=" + std::to_string(lp.block_m) + "x" + std::to_string(lp.block_n) +
               (lp.q_major ? " q-major" : " head-major");
  return lp;
}

std::string decode_merge_summary(const UnifiedLaunchPlan& lp) {
  if (lp.splits <= 1) return "";
  if (lp.merge == DecodeMerge::separate) return " +merge(separate kernel)";
  if (lp.merge_group < lp.splits) return " +merge(last CTAs, groups of " + std::to_string(lp.merge_group) + ")";
  return " +merge(last CTA)";
}

// 3D split-KV decode: packed-row tiles per (sequence, kv head), KV splits and merge forced or from the model.
UnifiedLaunchPlan decode_launch_plan(const AttentionProblem& p, const UnifiedKnobs& knobs, int num_sms) {
  UnifiedLaunchPlan lp;
  lp.path = UnifiedPath::decode_3d;
  lp.warps = decode_warps(p.head_size, static_cast<int>(dtype_bytes(p.types.kv)));
  lp.block_m = kDecodeRowsPerCta;
  lp.block_n = decode_block_n(static_cast<int>(dtype_bytes(p.types.kv)));
  lp.m_tiles = decode_row_tiles(p);
  lp.decode_stages = decode_stages(knobs);
  const DecodeSplitCost cost = decode_split_cost(p, num_sms, lp.decode_stages);
  const int forced = knobs.splits_3d;
  lp.splits = forced > 0 ? std::min({forced, kMaxSplits, std::max(1, cost.n_tiles)}) : decode_splits(cost);
  lp.merge = knobs.merge_3d == MergeKnob::automatic ? decode_auto_merge(lp.splits)
             : knobs.merge_3d == MergeKnob::separate ? DecodeMerge::separate
                                                      : DecodeMerge::fused;
  if (lp.splits <= 1) lp.merge = DecodeMerge::fused;  // nothing to merge
  lp.grid_x = lp.splits;
  lp.grid_y = p.kv_heads * lp.m_tiles;
  lp.grid_z = p.num_seqs();
  lp.merge_group = decode_merge_group(lp.splits, cost.partial_bytes);
  lp.workspace_bytes = decode_workspace_bytes(p, lp.splits, lp.merge_group, lp.merge);
  lp.summary = "3d splits=" + std::to_string(lp.splits) + (forced > 0 ? " (forced)" : "") +
               " rows/cta=" + std::to_string(lp.block_m) + " row-tiles=" + std::to_string(lp.m_tiles) +
               (lp.decode_stages != kDecodeStages ? " ring=" + std::to_string(lp.decode_stages) : std::string()) +
               decode_merge_summary(lp);
  return lp;
}

}  // namespace

UnifiedLaunchPlan make_unified_launch_plan(const AttentionProblem& p, const UnifiedKnobs& knobs, int num_sms) {
  if (choose_path(p) == UnifiedPath::decode_3d) return decode_launch_plan(p, knobs, num_sms);
  return choose_wide(p, knobs) ? wide_launch_plan(p, knobs, num_sms) : narrow_launch_plan(p, knobs);
}

}  // namespace attnbench::cuda
