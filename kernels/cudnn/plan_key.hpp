// What a cudnn.sdpa graph is built for, without cuDNN: the memory layout, the plan choice its knobs make
// (ATTNBENCH_CUDNN_HEURISTICS, ATTNBENCH_CUDNN_PLAN) and the graph cache's key over both and the problem. Host
// code, so the tests check the parsing and the key without a device.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/knobs.hpp"
#include "cudnn/derived.hpp"

namespace attnbench::cudnn {

constexpr const char* kHeuristicsKnob = "ATTNBENCH_CUDNN_HEURISTICS";
constexpr const char* kPlanKnob = "ATTNBENCH_CUDNN_PLAN";
constexpr const char* kImplKnob = "ATTNBENCH_CUDNN_IMPL";

// The memory layout a graph is built for: the params' strides (elements) and the block table's row stride.
struct Layout {
  int64_t q_token = 0, q_head = 0, o_token = 0, o_head = 0, kv_block = 0, kv_token = 0, kv_head = 0;
  int64_t table_stride = 0;
  auto tie() const { return std::tie(q_token, q_head, o_token, o_head, kv_block, kv_token, kv_head, table_stride); }
  bool operator==(const Layout& o) const { return tie() == o.tie(); }
};

Layout layout_of(const AttentionParams& a);
// The layout plan() builds for unless the kernel was given one (make_cudnn_sdpa_on): make_attention_params' dense
// strides and a block table with one slot more than the longest sequence needs (the harness's inputs,
// build_inputs). Params on another layout get their graph in run().
Layout planned_layout(const AttentionProblem& p);

// Every sequence's q_len equals its kv_len (prefill): the top-left and the bottom-right diagonal are one.
bool q_is_kv(const AttentionProblem& p);
// Ragged Q and O (per-sequence offsets) when the query lengths differ; else sequence b starts at token b * q_len.
bool ragged_q(const AttentionProblem& p);
// Blocks of the paged containers cuDNN is told of on layout l: the problem's own, plus one spare where the table
// has a slot no token needs (the block such slots name in the harness's inputs). A table whose every slot is used
// (the gated block's view of its projection) gets none: every block cuDNN is told of is the caller's memory.
int64_t container_blocks(const AttentionProblem& p, const Layout& l);

enum class Heuristic { a, b, fallback };
// The causal band's alignment cuDNN is given (ATTNBENCH_CUDNN_DIAGONAL): the problem's, or top-left where that is
// the same mask (every q_len == kv_len).
enum class Diagonal { automatic, declared };
constexpr const char* kDiagonalKnob = "ATTNBENCH_CUDNN_DIAGONAL";
Diagonal diagonal_choice(const KnobValues& knobs);
enum class Implementation { automatic, composite, unified };  // the frontend's SDPA node

// Which SDPA node, which engine configs are the candidates (the heuristics modes' lists, joined in order) and
// which one runs.
struct PlanChoice {
  enum class Pick { first, index, autotune };
  Implementation implementation = Implementation::automatic;
  std::vector<Heuristic> heuristics = {Heuristic::a};
  Pick pick = Pick::first;
  int64_t index = 0;  // the candidate when pick == index
  Diagonal diagonal = Diagonal::automatic;
  bool builds_all() const { return pick == Pick::autotune; }
};

// The knobs' values as a choice; std::invalid_argument naming the knob and the value for one the table refuses.
std::vector<Heuristic> parse_heuristics(const std::string& value);
PlanChoice parse_plan_choice(const std::string& heuristics, const std::string& plan,
                             const std::string& implementation = "auto");
PlanChoice plan_choice(const KnobValues& knobs);

std::string heuristics_text(const std::vector<Heuristic>& h);  // "a,fallback"
std::string pick_text(const PlanChoice& c);                     // "first", "3", "autotune"
std::string implementation_text(Implementation i);              // "auto", "composite", "unified"

// Whether p is cudnn.sdpa's FP8 SDPA: Q and K/V in one 8-bit format (e4m3 or e5m2), O in 16 bits. cuDNN on SM90
// writes an 8-bit O only, so the graph's O is e4m3 codes at fp8_scalars_of(p).scale_o, dequantised by run().
bool fp8_graph(const AttentionProblem& p);
// The FP8 graph's input scalars: the problem's descales, P quantised at 2^8 (cudnn.sdpa's P rule: P <= 1 lands
// under e4m3's 448 with its 3 mantissa bits, as cuda.unified's does), O at 1 / v_scale (O's codes of V's size).
Fp8Scalars fp8_scalars_of(const AttentionProblem& p);
// The FP8 graph's e4m3 O in the workspace: [total_q, heads, head_size] dense, this token stride (elements = bytes).
inline int64_t fp8_o_token_stride(const AttentionProblem& p) { return static_cast<int64_t>(p.heads) * p.head_size; }

// Whether the graph needs the causal mask: bottom-right with one query per sequence it hides no key (the query
// sits on the last position), and a graph without a diagonal band is one more engines take.
inline bool masked(const AttentionProblem& p) { return p.causal && (p.max_seqlen_q() > 1 || p.top_left); }

// The attention features cuDNN's SDPA node takes, and how: a sliding window as its diagonal band (it keeps
// j > i' - left bound, so the bound is window_left + 1), ALiBi as its own mask (its slopes 2^(-8 (h + 1) / H)
// only, causal, every q_len == kv_len: its mask is top-left aligned), a sink per head as its sink token (cuDNN
// 9.13 on; not where a sequence has one query: cuDNN 9.19 computes it wrong there, measured). Why the problem's
// features cannot be taken ("" when they can).
std::string feature_conflict(const AttentionProblem& p);
// Whether the slopes are cuDNN's ALiBi slopes for that many heads (within 0.1%: cuDNN computes with its own).
bool cudnn_alibi_slopes(const std::vector<float>& slopes);
// The diagonal band of p: bottom-right, except top-left when p is, under ALiBi, for an FP8 graph where q_is_kv
// (cuDNN's FP8 SDPA on SM90 has the top-left diagonal only), and under Diagonal::automatic wherever q_is_kv (the
// same mask); right bound 0 when causal (and the rows see past the diagonal nowhere else), window_right when not;
// left bound window_left + 1. nullopt: no bound.
struct Band {
  bool top_left = false;
  std::optional<int64_t> left, right;
};
Band band_of(const AttentionProblem& p, Diagonal d = Diagonal::declared);
// The band as a plan summary says it: ", bottom-right causal", ", top-left causal", ", band top-left left 4097
// right 0", ", non-causal".
std::string band_text(const AttentionProblem& p, Diagonal d = Diagonal::declared);
// A cuDNN or frontend version number (MAJOR * 10000 + MINOR * 100 + PATCH) as "9.19.0".
std::string version_text(int64_t v);

// The graph cache's key: everything the graph and its plan depend on.
std::string graph_key(const AttentionProblem& p, const Layout& l, const PlanChoice& c);

}  // namespace attnbench::cudnn
