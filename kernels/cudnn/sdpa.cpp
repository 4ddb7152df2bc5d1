// cudnn.sdpa: cuDNN's fused SDPA, built through the cuDNN frontend's graph API and run in-process on attnbench's
// paged inputs as they are: Q and O packed [total_q, heads, d] (ragged offsets when the query lengths differ), the
// K/V caches as cuDNN's paged containers read through the block table, seqused_k as seq_len_kv, the padding mask
// and, when causal, the bottom-right causal mask (top-left for the FP8 SDPA, the same there: plan_key.hpp).
// supports() builds (and caches) the graph, so a problem cuDNN refuses is declined with cuDNN's own message;
// run() enqueues the derived tables and the graph on the caller's stream (and, for the FP8 SDPA, the pass that
// dequantises cuDNN's e4m3 O), allocates nothing and captures into a CUDA graph. The knobs choose the candidates
// (the heuristics modes) and which one runs: the first that builds, one by index, or the fastest of all, timed in
// plan(). The graphs are built and cached in graph.cpp, timed in autotune.cpp; this file holds the declines, the
// plan and the call.
#include <cudnn_frontend.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnbench/backends.hpp"
#include "cuda/runtime.hpp"
#include "cudnn/derived.hpp"
#include "cudnn/graph.hpp"
#include "cudnn/plan_key.hpp"
#include "cudnn/sdpa.hpp"

namespace attnbench {
namespace {

namespace fe = cudnn_frontend;

constexpr const char* kName = "cudnn.sdpa";

using cudnn::BuiltGraph;
using cudnn::Candidate;
using cudnn::Handle;
using cudnn::Layout;
using cudnn::layout_of;
using cudnn::band_of;
using cudnn::masked;
using cudnn::PlanChoice;
using cudnn::planned_layout;
using cudnn::ragged_q;
using cudnn::set_stream;
using cudnn::Tuning;
using cudnn::tuned;
using cudnn::variant_pack;
using cudnn::version_text;

// Why the graph of p cannot take layout l ("" when it can).
std::string layout_conflict(const AttentionProblem& p, const Layout& l) {
  if (l.table_stride < p.max_blocks_per_seq())
    return "block_table_stride " + std::to_string(l.table_stride) + " is below the " +
           std::to_string(p.max_blocks_per_seq()) + " blocks the longest sequence needs";
  const int64_t stride = std::max(l.q_token, l.o_token);
  if (ragged_q(p) && p.total_q() * stride > std::numeric_limits<int32_t>::max())
    return "ragged Q/O offsets are int32 elements: total_q " + std::to_string(p.total_q()) + " x token stride " +
           std::to_string(stride) + " does not fit";
  return "";
}

// The declines that need no device: types, features, the gate epilogue, the Q prologue, the problem's own rules,
// the planned layout l.
std::string problem_conflict(const AttentionProblem& p, const Layout& l) {
  if (!cudnn::fp8_graph(p))
    if (std::string s = sixteen_bit_storage_conflict(p); !s.empty())
      return s + " (or Q and K/V in one 8-bit format, e4m3 or e5m2, with O in 16 bits: its FP8 SDPA)";
  if (cudnn::fp8_graph(p) && p.head_size % 16 != 0)
    return "head_size " + std::to_string(p.head_size) + ": cuDNN's FP8 SDPA needs a multiple of 16";
  if (std::string f = cudnn::feature_conflict(p); !f.empty()) return f;
  if (std::string l = lse_conflict(p, kName); !l.empty()) return l;
  if (p.fusion.output_gate) return "output_gate: cudnn.sdpa has no gate epilogue";
  if (p.fusion.has_q_prologue()) return "Q prologue (q_norm / q_rope_dim): cudnn.sdpa has none";
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return layout_conflict(p, l);
}


// A graph and the candidate of it that runs.
struct Bound {
  std::shared_ptr<const BuiltGraph> graph;
  Candidate candidate;
};

// The candidate of g with this engine (a graph on another layout runs what the plan's own runs), else its first.
Candidate candidate_like(const BuiltGraph& g, const std::string& engine) {
  for (const Candidate& c : g.candidates)
    if (c.engine == engine) return c;
  return g.candidates.front();
}

struct CudnnSdpaPlan : AttentionPlan {
  AttentionProblem problem;
  Bound main;                      // on the kernel's planned layout
  cudnn::WorkspaceLayout ws;       // cuDNN's bytes first, then the derived tables
  cudnn::Fp8Scalars fp8;           // the FP8 graph's input scalars, which run()'s table kernel writes
  std::unique_ptr<Handle> handle;  // this plan's: run() sets its stream
  mutable std::mutex mu;
  mutable std::list<Bound> other_layouts;  // built in run() for params on another (a list: run() keeps references)
};

// The mask and the features as the graph has them: ", bottom-right causal", ", band top-left left 4097 right 0,
// ALiBi", ", sinks".
std::string mask_text(const AttentionProblem& p, cudnn::Diagonal d) {
  std::string out = cudnn::band_text(p, d);
  if (!p.features.alibi_slopes.empty()) out += ", ALiBi";
  if (!p.features.sinks.empty()) out += ", sinks";
  return out;
}

// What ran: versions, the frontend's node, the mask and tables, the knobs' choice and the candidate with its engine.
std::string summary_of(const AttentionProblem& p, const BuiltGraph& g, const Candidate& c, const Tuning* t) {
  const PlanChoice& k = g.choice;
  const std::string mask = mask_text(p, k.diagonal);
  const std::string fp8 = g.fp8 ? " fp8 (" + std::string(dtype_name(p.types.q)) +
                                      " Q/K/V, P at 2^8, e4m3 O at 1/v_scale dequantised by a pass in run())"
                                : "";
  return "cudnn " + version_text(static_cast<int64_t>(cudnnGetVersion())) + " sdpa" + fp8 + " paged (frontend " +
         version_text(CUDNN_FRONTEND_VERSION) + "), " + g.implementation + " node" +
         (g.fallback.empty() ? "" : " (" + g.fallback + ")") + mask + ", padding mask" +
         (g.ragged ? ", ragged q/o; seq_len_q and offsets" : "; seq_len_q") + " by a kernel in run(); node " +
         cudnn::implementation_text(k.implementation) + ", heuristics " + cudnn::heuristics_text(k.heuristics) +
         ", plan " + cudnn::pick_text(k) + ": candidate " + std::to_string(c.index) + " " + c.engine +
         (t ? "; " + t->text : "");
}

void check_params(const CudnnSdpaPlan& cp, const AttentionParams& a) {
  const AttentionProblem& p = cp.problem;
  if (a.num_seqs != p.num_seqs() || a.heads != p.heads || a.kv_heads != p.kv_heads || a.head_size != p.head_size ||
      a.block_size != p.block_size || a.max_seqlen_q != p.max_seqlen_q() || a.max_seqlen_k != p.max_seqlen_k() ||
      a.total_q != p.total_q() || a.causal != p.causal || a.top_left != p.top_left || a.scale != p.softmax_scale() || a.types != p.types)
    throw std::invalid_argument("cudnn.sdpa: params do not match the plan (dims, causal, alignment, scale or types)");
  if (!a.q || !a.k_cache || !a.v_cache || !a.out || !a.cu_seqlens_q || !a.seqused_k || !a.block_table || !a.workspace)
    throw std::invalid_argument(
        "cudnn.sdpa: params need q, k_cache, v_cache, out, cu_seqlens_q, seqused_k, block_table and workspace");
  const AttentionFeatures& f = p.features;
  const AttentionFeatureParams& fp = a.features;
  if (fp.window_left != f.window_left || fp.window_right != f.window_right || (fp.sinks != nullptr) != !f.sinks.empty())
    throw std::invalid_argument("cudnn.sdpa: params.features do not match the plan's (window bounds, sinks)");
  if (a.epilogue.gate)
    throw std::invalid_argument("cudnn.sdpa: params.epilogue.gate set, and cudnn.sdpa has no gate epilogue");
  const bool o16 = (a.o_stride_token | a.o_stride_head) % 8 == 0 && reinterpret_cast<uintptr_t>(a.out) % 16 == 0;
  if (cudnn::fp8_graph(p) && !o16)
    throw std::invalid_argument("cudnn.sdpa: the FP8 graph's O pass stores 16 bytes: out 16-byte aligned and O strides "
                                "multiples of 8 elements, not " + std::to_string(a.o_stride_token) + " / " +
                                std::to_string(a.o_stride_head));
  check_q_prologue_params(kName, AttentionFusion{}, a.prologue);
  check_lse_params(kName, p.return_lse, a);
}

// The plan's graph for the params' layout; another layout's is built on its first (eager) call.
const Bound& graph_for(const CudnnSdpaPlan& cp, const AttentionParams& a, cudaStream_t s) {
  const Layout l = layout_of(a);
  if (l == cp.main.graph->layout) return cp.main;
  std::lock_guard<std::mutex> lock(cp.mu);
  for (const Bound& b : cp.other_layouts)
    if (b.graph->layout == l) return b;
  if (const std::string bad = layout_conflict(cp.problem, l); !bad.empty())
    throw std::invalid_argument(std::string("cudnn.sdpa: ") + bad);
  if (cuda::stream_is_capturing(s))
    throw std::invalid_argument("cudnn.sdpa: params on a layout the plan has no graph for while capturing "
                                "(make one eager call with them first)");
  std::string why;
  std::shared_ptr<const BuiltGraph> g = cudnn::cached_graph(cp.problem, l, cp.main.graph->choice, &why);
  if (!g) throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
  const Candidate c = candidate_like(*g, cp.main.candidate.engine);
  if (c.workspace > cp.main.candidate.workspace)
    throw std::invalid_argument("cudnn.sdpa: the params' layout needs " + std::to_string(c.workspace) +
                                " cuDNN workspace bytes, the plan has " + std::to_string(cp.main.candidate.workspace));
  cp.other_layouts.push_back({g, c});
  return cp.other_layouts.back();
}

class CudnnSdpa final : public AttentionKernel {
 public:
  explicit CudnnSdpa(std::optional<Layout> fixed = std::nullopt) : fixed_(fixed) {}
  std::string name() const override { return kName; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    try {
      const PlanChoice choice = cudnn::plan_choice(knobs);
      if (const std::string why = problem_conflict(p, planned(p)); !why.empty()) return Support::no(why);
      if (cuda::device_count() == 0) return Support::no("no CUDA device");
      std::string why;
      if (!cudnn::cached_graph(p, planned(p), choice, &why)) return Support::no(why);
      return Support::yes();
    } catch (const std::exception& e) {
      return Support::no(std::string("cudnn.sdpa: ") + e.what());
    } catch (...) {
      return Support::no("cudnn.sdpa: unknown exception while building the cuDNN graph");
    }
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const PlanChoice choice = cudnn::plan_choice(knobs);
    if (const std::string why = problem_conflict(p, planned(p)); !why.empty())
      throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
    if (cuda::device_count() == 0) throw std::invalid_argument("cudnn.sdpa: no CUDA device");
    auto plan = std::make_unique<CudnnSdpaPlan>();
    std::string why;
    plan->main.graph = cudnn::cached_graph(p, planned(p), choice, &why);
    if (!plan->main.graph) throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
    const BuiltGraph& g = *plan->main.graph;
    plan->problem = p;
    plan->handle = std::make_unique<Handle>();
    const Tuning* t = choice.builds_all() ? &tuned(g, p, plan->handle->h) : nullptr;
    plan->main.candidate = g.candidates[t ? t->chosen : 0];
    plan->fp8 = cudnn::fp8_scalars_of(p);
    plan->ws = cudnn::workspace_layout(plan->main.candidate.workspace, p.num_seqs(), g.ragged,
                                       g.fp8 ? static_cast<std::size_t>(p.total_q() * cudnn::fp8_o_token_stride(p)) : 0);
    plan->workspace_bytes = plan->ws.total;
    plan->graph_replay = true;
    plan->summary = summary_of(p, g, plan->main.candidate, t);
    return plan;
  }

  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    const auto* cp = dynamic_cast<const CudnnSdpaPlan*>(&plan);
    if (!cp) throw std::invalid_argument("cudnn.sdpa: plan was not made by cudnn.sdpa");
    check_params(*cp, a);
    const auto s = static_cast<cudaStream_t>(stream);
    const Bound& b = graph_for(*cp, a, s);
    const BuiltGraph& g = *b.graph;
    // The derived tables: made here on the stream from params.cu_seqlens_q, so a call needs no host data.
    const cudnn::DerivedTables t = cudnn::tables_in(a.workspace, cp->ws, g.ragged);
    const int64_t o_code_token = cudnn::fp8_o_token_stride(cp->problem);
    cudnn::launch_derive_tables(a.cu_seqlens_q, a.num_seqs, a.q_stride_token, g.fp8 ? o_code_token : a.o_stride_token,
                                t, s, cp->fp8);
    auto pack = variant_pack({a.q, a.k_cache, a.v_cache, g.fp8 ? static_cast<void*>(t.o_codes) : a.out, t.seq_len_q,
                              a.seqused_k, a.block_table, t.q_offsets, t.o_offsets, a.features.sinks, t.fp8},
                             g.ragged);
    {
      std::lock_guard<std::mutex> lock(g.mu);
      set_stream(cp->handle->h, s);
      if (const fe::error_t e = g.graph.execute_plan_at_index(cp->handle->h, pack, a.workspace, b.candidate.index);
          e.is_bad())
        throw std::runtime_error("cudnn.sdpa: cuDNN execute: " + e.err_msg);
    }
    if (g.fp8)
      cudnn::launch_dequantize_o(t.o_codes, a.total_q, a.heads, a.head_size, 1.f / cp->fp8.scale_o, a.types.o, a.out,
                                 a.o_stride_token, a.o_stride_head, s);
  }

 private:
  Layout planned(const AttentionProblem& p) const { return fixed_ ? *fixed_ : planned_layout(p); }

  std::optional<Layout> fixed_;  // the caller's params layout, when it said which
};

}  // namespace

std::unique_ptr<AttentionKernel> make_cudnn_sdpa() { return std::make_unique<CudnnSdpa>(); }

std::unique_ptr<AttentionKernel> make_cudnn_sdpa_on(const AttentionParams& layout) {
  return std::make_unique<CudnnSdpa>(layout_of(layout));
}

}  // namespace attnbench
