#include "hip/heuristics.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>


namespace attnbench::hip {

const char* regime_name(Regime r) {
  switch (r) {
    case Regime::narrow: return "narrow";
    case Regime::flash: return "flash";
    case Regime::decode: return "decode";
  }
  return "?";
}

const char* geometry_name(FlashGeometry g) {
  switch (g) {
    case FlashGeometry::l4: return "l4";
    case FlashGeometry::wide2: return "wide2";
    case FlashGeometry::wide4: return "wide4";
  }
  return "?";
}

int geometry_waves(FlashGeometry g) { return g == FlashGeometry::l4 ? 1 : g == FlashGeometry::wide2 ? 2 : 4; }

HipKnobs HipKnobs::parse(const KnobValues& knobs) {
  HipKnobs k;
  const std::string& path = knobs.get("ATTNBENCH_GFX942_PATH");
  k.path = path == "narrow" ? PathKnob::narrow : path == "flash" ? PathKnob::flash : PathKnob::automatic;
  if (path != "auto" && k.path == PathKnob::automatic)
    throw std::logic_error("knob ATTNBENCH_GFX942_PATH: value '" + path + "' has no typed value");
  const int wide = knobs.get_int("HIPDNN_GFX942_FLASH_WIDE");
  k.flash = wide == 0 ? FlashGeometry::l4 : wide == 2 ? FlashGeometry::wide2 : FlashGeometry::wide4;
  k.q_major = knobs.get_bool("ATTNBENCH_Q_MAJOR_GRID");
  k.splits_3d = knobs.get_int("ATTNBENCH_3D_SPLITS");
  k.graph_2d = knobs.get_bool("HIPDNN_GFX942_2D_GRAPH");
  k.graph_3d = knobs.get_bool("HIPDNN_GFX942_3D_GRAPH");
  return k;
}

std::string instance_name(const InstanceKey& k) {
  const std::string head = std::string(regime_name(k.regime)) + "/" + dtype_name(k.dtype) + "/d" +
                           std::to_string(k.head_size);
  switch (k.regime) {
    case Regime::narrow: return head + "/w" + std::to_string(k.waves);
    case Regime::flash:
      return head + "/" + (k.waves == 1 ? "l4" : k.waves == 2 ? "wide2" : k.waves == 4 ? "wide4" : "w?");
    case Regime::decode: return head;
  }
  return head;
}

std::string problem_conflict(const AttentionProblem& p) {
  if (const std::string types = sixteen_bit_storage_conflict(p); !types.empty()) return types;
  if (const std::string f = feature_conflict(p.features, "hip.unified"); !f.empty()) return f;
  if (const std::string l = lse_conflict(p, "hip.unified"); !l.empty()) return l;
  if (p.fusion.output_gate) return "the output gate (the gated block's fuse_gate) is not in hip.unified's epilogue";
  if (p.fusion.has_q_prologue()) return "the Q prologue (norm / RoPE of Q) is not in hip.unified";
  if (p.head_size != 64 && p.head_size != 128)
    return "head_size " + std::to_string(p.head_size) + " not in {64, 128} (hip.unified)";
  if (p.kv_heads <= 0 || p.heads % p.kv_heads != 0) return "heads not a multiple of kv_heads";
  if (p.num_seqs() > 65535) return "more than 65535 sequences (grid.z limit)";
  if (static_cast<int64_t>(p.max_seqlen_q()) * p.group_size() > INT_MAX)
    return "max_seqlen_q x group size past 2^31 - 1 packed rows";
  return "";
}

bool use_decode(const AttentionProblem& p) {
  // Few packed rows over a long KV: 2D workgroups would be mostly empty and the KV unsplit.
  const int64_t packed = static_cast<int64_t>(p.max_seqlen_q()) * p.group_size();
  return p.max_seqlen_q() == 1 || (packed <= 4 * kDecodeRows && p.max_seqlen_k() >= 512);
}

namespace {
bool flash_exists(const AttentionProblem& p) { return p.types.q == DType::f16; }  // the flash regime is fp16 only
}  // namespace

Regime prefill_regime(const AttentionProblem& p, const HipKnobs& knobs) {
  if (knobs.path == PathKnob::narrow) return Regime::narrow;
  return knobs.path == PathKnob::flash || flash_exists(p) ? Regime::flash : Regime::narrow;
}

std::string knob_conflict(const AttentionProblem& p, const HipKnobs& knobs) {
  if (use_decode(p)) return "";
  if (prefill_regime(p, knobs) == Regime::flash && !flash_exists(p))
    return "ATTNBENCH_GFX942_PATH=flash: the flash regime is fp16 only (bf16 runs the narrow kernel)";
  const int block_m = prefill_regime(p, knobs) == Regime::flash ? flash_block_m(geometry_waves(knobs.flash))
                                                                  : narrow_block_m(narrow_waves(p.head_size));
  const int64_t q_blocks = (static_cast<int64_t>(p.max_seqlen_q()) * p.group_size() + block_m - 1) / block_m;
  if (!knobs.q_major && q_blocks > 65535)
    return std::to_string(q_blocks) + " q blocks on grid.y (at most 65535); ATTNBENCH_Q_MAJOR_GRID=1 puts them on x";
  if (knobs.q_major && p.kv_heads > 65535) return "more than 65535 kv heads on grid.y";
  return "";
}

int decode_splits(const AttentionProblem& p, const HipKnobs& knobs, int cu_count) {
  const int n_tiles = std::max(1, (p.max_seqlen_k() + kBlockN - 1) / kBlockN);
  if (knobs.splits_3d > 0) return std::min({knobs.splits_3d, kMaxSplits, n_tiles});
  if (cu_count <= 0) cu_count = kDefaultCuCount;
  const int row_tiles = (p.max_seqlen_q() * p.group_size() + kDecodeRows - 1) / kDecodeRows;
  const int64_t wgs = static_cast<int64_t>(p.num_seqs()) * p.kv_heads * row_tiles;
  if (wgs >= cu_count) return 1;
  const int fill = static_cast<int>((cu_count + wgs - 1) / wgs);
  return std::max(1, std::min({fill, kMaxSplits, n_tiles / kMinTilesPerSplit}));
}

std::size_t decode_workspace_bytes(const AttentionProblem& p, int splits) {
  if (splits <= 1) return 0;
  const int64_t rows = p.total_q() * p.heads;
  return static_cast<std::size_t>(decode_lse_floats(splits, rows) + splits * rows * p.head_size) * sizeof(float);
}

bool recommend_graph_replay(const AttentionProblem& p, const HipKnobs& knobs, bool caller_capturing) {
  if (caller_capturing || p.features.any()) return false;
  if (use_decode(p)) return knobs.graph_3d;
  return p.max_seqlen_q() <= 768 && knobs.graph_2d;
}

namespace {

LaunchPlan decode_plan(const AttentionProblem& p, const HipKnobs& knobs, int cu_count) {
  LaunchPlan lp;
  lp.regime = Regime::decode;
  lp.waves = kDecodeWaves;
  lp.block_m = kDecodeRows;
  lp.q_blocks = (p.max_seqlen_q() * p.group_size() + kDecodeRows - 1) / kDecodeRows;
  lp.splits = decode_splits(p, knobs, cu_count);
  lp.grid_x = lp.splits;
  lp.grid_y = p.kv_heads * lp.q_blocks;
  lp.grid_z = p.num_seqs();
  lp.workspace_bytes = decode_workspace_bytes(p, lp.splits);
  if (lp.splits > 1)
    lp.combine_blocks = static_cast<int>((p.total_q() * p.heads + combine_rows_per_block(p.head_size) - 1) /
                                         combine_rows_per_block(p.head_size));
  lp.lds_bytes = decode_lds_bytes(p.head_size);
  lp.summary = "3d splits=" + std::to_string(lp.splits) + (knobs.splits_3d > 0 ? " (forced)" : "") +
               " rows/wg=" + std::to_string(kDecodeRows) + " row-tiles=" + std::to_string(lp.q_blocks) +
               (lp.splits > 1 ? " +combine" : "");
  return lp;
}

LaunchPlan prefill_plan(const AttentionProblem& p, const HipKnobs& knobs) {
  LaunchPlan lp;
  lp.regime = prefill_regime(p, knobs);
  if (lp.regime == Regime::flash) {
    lp.geometry = knobs.flash;
    lp.waves = geometry_waves(knobs.flash);
    lp.block_m = flash_block_m(lp.waves);
    lp.k_buffers = flash_k_buffers(lp.waves);
    lp.lds_bytes = flash_lds_bytes(p.head_size, lp.waves);
  } else {
    lp.waves = narrow_waves(p.head_size);
    lp.block_m = narrow_block_m(lp.waves);
    lp.lds_bytes = narrow_lds_bytes(p.head_size, lp.waves);
  }
  lp.q_major = knobs.q_major;
  lp.q_blocks = (p.max_seqlen_q() * p.group_size() + lp.block_m - 1) / lp.block_m;
  lp.grid_x = lp.q_major ? lp.q_blocks : p.kv_heads;
  lp.grid_y = lp.q_major ? p.kv_heads : lp.q_blocks;
  lp.grid_z = p.num_seqs();
  lp.summary = "2d " + std::string(regime_name(lp.regime)) +
               (lp.regime == Regime::flash ? std::string(" ") + geometry_name(lp.geometry) : std::string()) +
               " waves=" + std::to_string(lp.waves) + " tile=" + std::to_string(lp.block_m) + "x" +
               std::to_string(kBlockN) +
               (lp.regime == Regime::flash ? " k-buffers=" + std::to_string(lp.k_buffers) : std::string()) +
               (lp.q_major ? " q-major" : " head-major");
  return lp;
}

}  // namespace

LaunchPlan make_launch_plan(const AttentionProblem& p, const HipKnobs& knobs, int cu_count) {
  LaunchPlan lp = use_decode(p) ? decode_plan(p, knobs, cu_count) : prefill_plan(p, knobs);
  lp.threads = kWaveSize * lp.waves;
  lp.summary += " lds=" + std::to_string(lp.lds_bytes);
  return lp;
}

InstanceKey instance_key(const AttentionProblem& p, const LaunchPlan& lp) {
  InstanceKey k;
  k.regime = lp.regime;
  k.dtype = p.types.q;
  k.head_size = p.head_size;
  k.waves = lp.regime == Regime::decode ? 0 : lp.waves;
  return k;
}

}  // namespace attnbench::hip
