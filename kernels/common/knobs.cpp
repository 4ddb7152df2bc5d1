#include "attnbench/knobs.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

extern char** environ;

namespace attnbench {

const std::vector<KnobSpec>& knob_table() {
  static const std::vector<KnobSpec> table = {
      {"ATTNBENCH_CPU_MAX_GFLOP", {}, "64", "cpu.*",
       "cpu.*: decline problems whose declared work exceeds this many GFLOP (0 = no limit)"},
      {"ATTNBENCH_SM90_NARROW_WARPS", {"4", "8", "4x32"}, "4x32", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill: warps per CTA of the mma.sync kernel, 16 query rows per warp (4 | 8), or 4x32: "
       "4 warps x 32 query rows (two m16 tiles per warp; d256 falls back to 8 x 16)"},
      {"ATTNBENCH_SM90_PATH", {"auto", "narrow", "wide"}, "auto", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill: narrow = mma.sync kernel; wide = wgmma + TMA kernel (head sizes 64, 128, 256); "
       "auto = wide only where measured faster (kernels/NOTES.md)"},
      {"ATTNBENCH_SM90_FLASH_WIDE", {"0", "1", "2", "3"}, "0", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime: consumer warpgroups per CTA (64 query rows each); 0 = per head size "
       "(d64 3, else 2); 3 fits the register file at head size 64 only (declined elsewhere)"},
      {"ATTNBENCH_SM90_STAGES", {"0", "2", "3", "4"}, "0", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime: K and V ring slots; 0 = the deepest that fits (d64 4, d128 3, d256 2; "
       "the FP8 SDPA's K slots hold 8-bit codes, half a 16-bit tile: d256 3); a depth that does not fit shared "
       "memory is declined"},
      {"ATTNBENCH_SM90_PERSISTENT", {"auto", "0", "1"}, "auto", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime: 1 = one CTA per SM walking the q-tiles heaviest first (a snake, or "
       "the L2 walk: ATTNBENCH_SM90_WALK); 0 = one CTA per q-tile, heaviest first in launch order; auto = 1 for "
       "equal-length batches (kernels/NOTES.md, wide v4/v5 and the L2 walk)"},
      {"ATTNBENCH_SM90_GQA_PACK", {}, "0", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime: query heads of one KV group per 64*wgs-row tile (a divisor of the "
       "group size up to 16, each head 64*wgs/pack tokens), so short q-tiles share their K/V tile loads; 0 = auto: "
       "the pack with the fewest KV-tile steps + units (kernels/NOTES.md, wide v6); a value that does not divide the "
       "group keeps the problem off the wide kernel (declined where ATTNBENCH_SM90_PATH=wide)"},
      {"ATTNBENCH_SM90_QO", {"auto", "tma", "threads"}, "auto", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime: how a unit's Q comes in and its O goes out: tma = one TMA box per "
       "64-column slab of a warpgroup's rows (O by a TMA store where the rows are all in their sequence and there is "
       "no output gate; the threads' copies otherwise); threads = the consumer threads' 16-byte copies; auto = tma "
       "where the rows are boxes (a 16-bit Q, and a GQA pack whose tokens per head divide 64 or are a multiple of it)"},
      {"ATTNBENCH_SM90_WALK", {"auto", "rank", "l2"}, "auto", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime, persistent CTAs: the order they take their q-tiles in: rank = every "
       "head's heaviest q-tiles first, in a snake over the CTAs; l2 = the (sequence, head) pairs in sections whose "
       "K/V fit a share of L2 (ATTNBENCH_SM90_L2_SECTION_KB), heaviest first within a section, each q-tile to the "
       "CTA with the least work (a table the host builds); auto = l2 where the problem's K/V exceed one section "
       "(kernels/NOTES.md, the L2 walk)"},
      {"ATTNBENCH_SM90_L2_SECTION_KB", {}, "0", "cuda.unified,cuda.gated_block",
       "cuda.unified 2D prefill, wide regime, the L2 walk: K/V bytes of one section in KiB; 0 = 16384 (16 MiB)"},
      {"ATTNBENCH_SM90_BWD_PATH", {"auto", "mma", "wgmma"}, "auto", "cuda.unified_bwd,cuda.gated_block_bwd",
       "cuda.unified_bwd (and the CUDA gated block's SDPA backward): mma = FlashAttention-2's structure on mma.sync "
       "(head sizes 64, 128, 256); wgmma = the wgmma + TMA kernels, a producer and two consumer warpgroups per key "
       "tile (128 keys at 64 and 128; 64 at 256, one warpgroup's dV and the other's dK); auto = wgmma"},
      {"ATTNBENCH_SM90_BWD_SPLITS", {}, "0", "cuda.unified_bwd,cuda.gated_block_bwd",
       "cuda.unified_bwd (and the CUDA gated block's SDPA backward), GQA: the CTAs a key tile's group of query heads "
       "is split over, each walking group / N heads and adding its dK, dV partials in fp32; 0 = the smallest divisor "
       "of the group that gives the grid 2048 CTAs on the wgmma path, 1024 on mma (kernels/NOTES.md, backward v6); "
       "a count that does not divide the group is declined"},
      {"ATTNBENCH_Q_MAJOR_GRID", {"0", "1"}, "0", "cuda.unified,cuda.gated_block,hip.unified",
       "cuda.unified and hip.unified 2D prefill: 1 puts the q-tile index on grid.x (q-major order), 0 puts heads "
       "(hip: kv heads) first"},
      {"ATTNBENCH_3D_SPLITS", {}, "0", "cuda.unified,cuda.gated_block,hip.unified",
       "cuda.unified and hip.unified 3D decode: KV splits per (sequence, kv head, 16-row tile); 0 = heuristic; "
       "capped at 128 and at the 64-key tiles"},
      {"ATTNBENCH_3D_STAGES", {"auto", "3", "6"}, "auto", "cuda.unified,cuda.gated_block",
       "cuda.unified 3D decode: K/V ring slots per CTA; auto = 3, the ring the decode rows were measured with; 6 "
       "(head sizes 64 and 128; declined at 256, whose tiles do not fit) holds twice the bytes in flight, for grids "
       "of at most one CTA per SM; the split count is modelled for the ring"},
      {"ATTNBENCH_3D_MERGE", {"auto", "fused", "separate"}, "auto", "cuda.unified,cuda.gated_block",
       "cuda.unified 3D decode with more than one split: fused = the last split CTAs to finish merge the partials in "
       "the decode launch (in groups where they are large); separate = a merge kernel, launched as a programmatic "
       "dependent of the decode kernel, reads every row's partials with many CTAs at once; auto = separate from 8 "
       "splits on, where the merge sweep measured it faster (kernels/NOTES.md, decode v3)"},
      {"ATTNBENCH_2D_GRAPH", {"0", "1"}, "1", "cuda.unified,cuda.gated_block",
       "cuda.unified: allow recommend_graph_replay() to say yes for 2D prefill problems"},
      {"ATTNBENCH_3D_GRAPH", {"0", "1"}, "1", "cuda.unified,cuda.gated_block",
       "cuda.unified: allow recommend_graph_replay() to say yes for 3D decode problems"},
      {"ATTNBENCH_GFX942_PATH", {"auto", "narrow", "flash"}, "auto", "hip.unified",
       "hip.unified 2D prefill: narrow = mfma 16x16x16 kernel (fp16, bf16); flash = transposed-x8 mfma 32x32x8 "
       "kernel (fp16 only, declined for bf16); auto = flash for fp16, narrow for bf16"},
      {"HIPDNN_GFX942_FLASH_WIDE", {"0", "1", "2"}, "1", "hip.unified",
       "hip.unified 2D prefill, flash regime: waves per workgroup, 32 query rows each: 1 (the default) = wide4 "
       "(4 waves, 256 threads), 0 = L4 (1 wave), 2 = wide2 (2 waves)"},
      {"HIPDNN_GFX942_2D_GRAPH", {"0", "1"}, "1", "hip.unified",
       "hip.unified: allow recommend_graph_replay() to say yes for 2D prefill problems"},
      {"HIPDNN_GFX942_3D_GRAPH", {"0", "1"}, "1", "hip.unified",
       "hip.unified: allow recommend_graph_replay() to say yes for 3D decode problems"},
      {"ATTNBENCH_GATED_FUSE_GATE", {"auto", "0", "1"}, "auto", "*.gated_block",
       "*.gated_block: 1 applies O * sigmoid(GATE) in the SDPA epilogue, under fp8 in the O quantisation pass (declined "
       "where the SDPA kernel has none); auto: 0 for the plain 16-bit block, 1 under fp8 or mx"},
      {"ATTNBENCH_GATED_FUSE_NORM_ROPE", {"auto", "0", "1"}, "auto", "*.gated_block",
       "*.gated_block: 1 moves Q's RMSNorm + RoPE into the SDPA's Q load (its Q prologue; K keeps a separate pass), "
       "under fp8 the Q, K and V quantisation into the norm + RoPE pass; declined where the SDPA kernel has no Q "
       "prologue for the problem; auto: 1 under fp8, else 0"},
      {"ATTNBENCH_GATED_QGATE_LAYOUT", {"flat", "interleaved"}, "flat", "*.gated_block,cudnn.gated_chain",
       "*.gated_block: W_qkvg column blocks Q | GATE | K | V (flat) or per-head [q_h | g_h] then K | V (interleaved)"},
      {"ATTNBENCH_CUDNN_HEURISTICS", {"a", "b", "fallback"}, "a", "cudnn.sdpa,cudnn.gated_chain",
       "cudnn.sdpa: the cuDNN heuristics modes whose engine configs are the plan candidates, their lists joined in "
       "the order given (a comma list, e.g. a,fallback; a sweep's --knob splits on commas, so there each value is "
       "one mode)",
       KnobSyntax::list},
      {"ATTNBENCH_CUDNN_PLAN", {"first", "autotune"}, "first", "cudnn.sdpa,cudnn.gated_chain",
       "cudnn.sdpa: the candidate that runs: first = the first that builds (cuDNN's order); N = candidate N "
       "(0-based) of the heuristics' list; autotune = every candidate built and timed at plan time (median of 10 "
       "executions after 3 warm-ups), the fastest kept; the plan summary names the engine and the times",
       KnobSyntax::one_or_integer},
      {"ATTNBENCH_CUDNN_DIAGONAL", {"auto", "declared"}, "auto",
       "cudnn.sdpa,cudnn.sdpa_backward,cudnn.gated_chain,cudnn.gated_chain_bwd",
       "cudnn.*: the causal band's alignment cuDNN is given: declared = the problem's (bottom-right unless top-left); "
       "auto = top-left wherever every sequence has as many queries as keys, where the two are the same mask (cuDNN's "
       "backward took 2x as long on causal rows bottom-right, its forward up to 1.7%: kernels/NOTES.md)"},
      {"ATTNBENCH_CUDNN_BWD_LAYOUT", {"auto", "ragged"}, "auto", "cudnn.sdpa_backward,cudnn.gated_chain_bwd",
       "cudnn.sdpa_backward: ragged = every tensor with ragged offsets and a padding mask; auto = a batch whose "
       "sequences all have one q length and one kv length goes to cuDNN as dense [B, S, H, d] tensors without a "
       "padding mask (the same memory; 7% faster, measured), others ragged"},
      {"ATTNBENCH_CUDNN_IMPL", {"auto", "composite", "unified"}, "auto", "cudnn.sdpa,cudnn.gated_chain",
       "cudnn.sdpa: the frontend's SDPA node: auto = the frontend's pick (unified where its support surface takes "
       "the graph: cuDNN >= 9.15 for paged caches, no causal band; composite where that unified node gives no "
       "plan), or one forced (a graph it cannot take is declined with the frontend's "
       "message)"},
  };
  return table;
}

const KnobSpec* find_knob(const std::string& name) {
  for (const auto& k : knob_table())
    if (k.name == name) return &k;
  return nullptr;
}

namespace {
bool is_count(const std::string& v) {
  bool digits = !v.empty() && v.size() < 10;
  for (char c : v) digits = digits && c >= '0' && c <= '9';
  return digits;
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : "|") + v;
  return out;
}

bool allowed(const KnobSpec& k, const std::string& v) {
  return std::find(k.values.begin(), k.values.end(), v) != k.values.end();
}

// Why `value` is not a comma list of k's values, each at most once ("" when it is).
std::string list_error(const KnobSpec& k, const std::string& value) {
  std::vector<std::string> seen;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = value.find(',', start);
    const std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) return "has an empty item";
    if (!allowed(k, item)) return "has '" + item + "', not in " + joined(k.values);
    if (std::find(seen.begin(), seen.end(), item) != seen.end()) return "lists '" + item + "' twice";
    seen.push_back(item);
    if (comma == std::string::npos) return "";
    start = comma + 1;
  }
}
}  // namespace

std::string check_knob(const std::string& name, const std::string& value) {
  const KnobSpec* k = find_knob(name);
  if (!k) {
    std::string known;
    for (const auto& s : knob_table()) known += (known.empty() ? "" : ", ") + s.name;
    return "unknown knob '" + name + "' (known: " + known + ")";
  }
  const std::string bad = "knob " + name + ": value '" + value + "' ";
  switch (k->syntax) {
    case KnobSyntax::list: {
      const std::string why = list_error(*k, value);
      return why.empty() ? "" : bad + why + " (a comma list of " + joined(k->values) + ")";
    }
    case KnobSyntax::one_or_integer:
      if (allowed(*k, value) || is_count(value)) return "";
      return bad + "is neither " + joined(k->values) + " nor a non-negative integer";
    case KnobSyntax::one:
      break;
  }
  if (k->values.empty()) return is_count(value) ? "" : bad + "is not a non-negative integer";
  return allowed(*k, value) ? "" : bad + "not in " + joined(k->values);
}

std::string knob_values_text(const KnobSpec& k) {
  switch (k.syntax) {
    case KnobSyntax::list:
      return joined(k.values) + "[,...]";
    case KnobSyntax::one_or_integer:
      return joined(k.values) + "|N";
    case KnobSyntax::one:
      break;
  }
  return k.values.empty() ? "integer" : joined(k.values);
}

const std::vector<std::string>& known_non_knob_variables() {
  static const std::vector<std::string> names = {
      "ATTNBENCH_SHAPES_DIR",       // the shape groups' folder (src/cases/shapes.cpp)
      "ATTNBENCH_PLUGINS",          // plugin files to load, ':'-separated (src/plugins/plugin.cpp)
      "ATTNBENCH_BIN",              // scripts/ci and scripts/device: the binary to run
      "ATTNBENCH_GPU_TESTS",        // scripts/device/gate-stats.sh: the GPU test binary to run
      "ATTNBENCH_CUDA",             // scripts/build.sh: ON/OFF for the CUDA backend
      "ATTNBENCH_CUDNN",            // scripts/build.sh, scripts/install-deps.sh: AUTO/ON/OFF for cudnn.sdpa
      "ATTNBENCH_HIP",              // scripts/build.sh, scripts/install-deps.sh: AUTO/ON/OFF for the HIP backend
      "ATTNBENCH_ROCM_ROOT",        // scripts/build.sh, scripts/device/hip-report.sh: the ROCm install to build with
      "ATTNBENCH_TESTS",            // scripts/build.sh: ON/OFF for the tests
      "ATTNBENCH_TARGETS",          // scripts/build.sh: the targets to build
      "ATTNBENCH_CUDA_INSTANCES",   // scripts/build.sh, .ci/run: the cuda.unified instances to build
      "ATTNBENCH_KEEP_TEST_FILES",  // tests: keep a test process's temp folder
      "ATTNBENCH_TEST_VERBOSE",     // tests: print per-case errors
  };
  return names;
}

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::vector<std::string> unknown_environment_warnings(const std::vector<std::string>& environment) {
  std::vector<std::string> known = known_non_knob_variables();
  for (const auto& k : knob_table()) known.push_back(k.name);
  std::vector<std::string> out;
  for (const auto& entry : environment) {
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("ATTNBENCH_", 0) != 0 || std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string* nearest = &known.front();
    for (const auto& k : known)
      if (edit_distance(name, k) < edit_distance(name, *nearest)) nearest = &k;
    out.push_back("environment variable " + name + " is not an attnbench knob or setting and is ignored; did you mean " +
                  *nearest + "? (attnbench list --knobs)");
  }
  return out;
}

std::vector<std::string> unknown_environment_warnings() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return unknown_environment_warnings(env);
}

KnobValues KnobValues::resolve(const std::map<std::string, std::string>& overrides, bool read_env) {
  KnobValues kv;
  for (const auto& k : knob_table()) {
    std::string v = k.default_value;
    if (read_env) {
      if (const char* e = std::getenv(k.name.c_str())) {
        const std::string err = check_knob(k.name, e);
        if (!err.empty()) throw std::invalid_argument("environment: " + err);
        v = e;
      }
    }
    kv.values_[k.name] = v;
  }
  for (const auto& [name, value] : overrides) {
    const std::string err = check_knob(name, value);
    if (!err.empty()) throw std::invalid_argument(err);
    kv.values_[name] = value;
  }
  return kv;
}

const std::string& KnobValues::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("knob not in table: " + name);
  return it->second;
}

int KnobValues::get_int(const std::string& name) const { return std::stoi(get(name)); }

}  // namespace attnbench
