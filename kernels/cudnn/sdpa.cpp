// cudnn.sdpa: cuDNN's fused SDPA, built through the cuDNN frontend's graph API and run in-process on attnbench's
// paged inputs as they are: Q and O packed [total_q, heads, d] (ragged offsets when the query lengths differ), the
// K/V caches as cuDNN's paged containers read through the block table, seqused_k as seq_len_kv, the padding mask
// and, when causal, the bottom-right causal mask. supports() builds (and caches) the graph, so a problem cuDNN
// refuses is declined with cuDNN's own message; run() enqueues the derived tables and the graph on the caller's
// stream, allocates nothing and captures into a CUDA graph.
#include <cudnn_frontend.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnbench/backends.hpp"
#include "cuda/runtime.hpp"
#include "cudnn/derived.hpp"
#include "cudnn/sdpa.hpp"

namespace attnbench {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

constexpr const char* kName = "cudnn.sdpa";
constexpr std::size_t kCachedGraphs = 16;
enum Uid : int64_t { kQ = 1, kK, kV, kO, kSeqLenQ, kSeqLenKv, kTableK, kTableV, kQOffsets, kOOffsets };

// The memory layout a graph is built for: the params' strides (elements) and the block table's row stride.
struct Layout {
  int64_t q_token = 0, q_head = 0, o_token = 0, o_head = 0, kv_block = 0, kv_token = 0, kv_head = 0;
  int64_t table_stride = 0;
  auto tie() const { return std::tie(q_token, q_head, o_token, o_head, kv_block, kv_token, kv_head, table_stride); }
  bool operator==(const Layout& o) const { return tie() == o.tie(); }
};

Layout layout_of(const AttentionParams& a) {
  return {a.q_stride_token, a.q_stride_head, a.o_stride_token,  a.o_stride_head,
          a.kv_stride_block, a.kv_stride_token, a.kv_stride_head, a.block_table_stride};
}

// The layout plan() builds for unless the kernel was given one (make_cudnn_sdpa_on): make_attention_params' dense
// strides and a block table with one slot more than the longest sequence needs (the harness's inputs,
// build_inputs). Params on another layout get their graph in run().
Layout planned_layout(const AttentionProblem& p) {
  AttentionParams a = make_attention_params(p);
  a.block_table_stride = p.max_blocks_per_seq() + 1;
  return layout_of(a);
}

// Ragged Q and O (per-sequence offsets) when the query lengths differ; else sequence b starts at token b * q_len.
bool ragged_q(const AttentionProblem& p) {
  for (int q : p.q_lens)
    if (q != p.q_lens.front()) return true;
  return false;
}

// Blocks of the paged containers cuDNN is told of: the problem's own plus one spare (the block that unused table
// slots name in the harness's inputs). Every block id in a used table slot must be below it.
int64_t container_blocks(const AttentionProblem& p) { return p.num_blocks() + 1; }

std::string version_text(int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

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
  if (std::string s = sixteen_bit_storage_conflict(p); !s.empty()) return s;
  if (std::string f = feature_conflict(p.features, kName); !f.empty()) return f;
  if (p.fusion.output_gate) return "output_gate: cudnn.sdpa has no gate epilogue";
  if (p.fusion.has_q_prologue()) return "Q prologue (q_norm / q_rope_dim): cudnn.sdpa has none";
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return layout_conflict(p, l);
}

// A cuDNN handle, created on the current device.
struct Handle {
  cudnnHandle_t h = nullptr;
  Handle() {
    const cudnnStatus_t s = cudnnCreate(&h);
    if (s != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string("cudnnCreate: ") + cudnnGetErrorString(s));
  }
  ~Handle() {
    if (h) cudnnDestroy(h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// One built graph: the SDPA of a problem's dims on one layout, shared by every plan with that key.
struct BuiltGraph {
  fe::graph::Graph graph;
  Layout layout;
  bool ragged = false;
  std::size_t workspace = 0;  // cuDNN's bytes
  mutable std::mutex mu;      // one execute() on the graph at a time
};

TensorPtr index_tensor(fe::graph::Graph& g, const char* name, Uid uid, std::vector<int64_t> dim,
                       std::vector<int64_t> stride) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(std::move(dim))
                      .set_stride(std::move(stride)).set_data_type(fe::DataType_t::INT32));
}

// Q or O over the packed tokens: [num_seqs, heads, max_seqlen_q, d].
fe::graph::Tensor_attributes token_tensor(const char* name, Uid uid, const AttentionProblem& p, int64_t st_token,
                                          int64_t st_head) {
  const int64_t s = p.max_seqlen_q();
  return fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
      .set_dim({p.num_seqs(), p.heads, s, p.head_size}).set_stride({s * st_token, st_head, st_token, 1});
}

// The SDPA node of p on layout l: paged K/V containers {blocks, kv_heads, block_size, d} by the cache's strides,
// the block table as both page tables {B, 1, blocks per sequence, 1}, the padding mask's lengths, causal
// bottom-right.
void declare_sdpa(fe::graph::Graph& g, const AttentionProblem& p, const Layout& l, bool ragged) {
  const int64_t b = p.num_seqs(), pages = p.max_blocks_per_seq(), ts = l.table_stride;
  auto q = token_tensor("Q", kQ, p, l.q_token, l.q_head);
  if (ragged) q.set_ragged_offset(index_tensor(g, "q_offsets", kQOffsets, {b + 1, 1, 1, 1}, {1, 1, 1, 1}));
  const auto cache = [&](const char* name, Uid uid) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
                        .set_dim({container_blocks(p), p.kv_heads, p.block_size, p.head_size})
                        .set_stride({l.kv_block, l.kv_head, l.kv_token, 1}));
  };
  auto options = fe::graph::SDPA_attributes()
                     .set_name(kName)
                     .set_generate_stats(false)
                     .set_attn_scale(p.softmax_scale())
                     .set_padding_mask(true)
                     .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqLenQ, {b, 1, 1, 1}, {1, 1, 1, 1}))
                     .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqLenKv, {b, 1, 1, 1}, {1, 1, 1, 1}))
                     .set_paged_attention_k_table(index_tensor(g, "table_k", kTableK, {b, 1, pages, 1}, {ts, ts, 1, 1}))
                     .set_paged_attention_v_table(index_tensor(g, "table_v", kTableV, {b, 1, pages, 1}, {ts, ts, 1, 1}))
                     .set_paged_attention_max_seq_len_kv(p.max_seqlen_k());
  if (p.causal) options.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT).set_diagonal_band_right_bound(0);
  auto [o, stats] = g.sdpa(g.tensor(q), cache("k_cache", kK), cache("v_cache", kV), options);
  (void)stats;  // none: generate_stats(false)
  o->set_output(true).set_uid(kO).set_dim({b, p.heads, p.max_seqlen_q(), p.head_size})
      .set_stride({p.max_seqlen_q() * l.o_token, l.o_head, l.o_token, 1});
  if (ragged) o->set_ragged_offset(index_tensor(g, "o_offsets", kOOffsets, {b + 1, 1, 1, 1}, {1, 1, 1, 1}));
}

// Builds the graph of (p, l): validate, operation graph, heuristics mode A, support check, plans. nullptr and
// "cuDNN: <step>: <cuDNN's message>" in *why when a step fails.
std::shared_ptr<const BuiltGraph> build_graph(cudnnHandle_t h, const AttentionProblem& p, const Layout& l,
                                              std::string* why) {
  auto built = std::make_shared<BuiltGraph>();
  built->layout = l;
  built->ragged = ragged_q(p);
  fe::graph::Graph& g = built->graph;
  g.set_io_data_type(p.types.q == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  declare_sdpa(g, p, l, built->ragged);
  const std::pair<const char*, std::function<fe::error_t()>> steps[] = {
      {"validate", [&] { return g.validate(); }},
      {"build_operation_graph", [&] { return g.build_operation_graph(h); }},
      {"create_execution_plans", [&] { return g.create_execution_plans({fe::HeurMode_t::A}); }},
      {"check_support", [&] { return g.check_support(h); }},
      {"build_plans", [&] { return g.build_plans(h); }},
  };
  for (const auto& [step, run] : steps) {
    const fe::error_t e = run();
    if (e.is_bad()) {
      *why = std::string("cuDNN: ") + step + ": " + e.err_msg;
      return nullptr;
    }
  }
  int64_t ws = 0;
  if (const fe::error_t e = g.get_workspace_size(ws); e.is_bad()) {
    *why = "cuDNN: get_workspace_size: " + e.err_msg;
    return nullptr;
  }
  built->workspace = static_cast<std::size_t>(ws);
  return built;
}

std::string graph_key(const AttentionProblem& p, const Layout& l) {
  std::ostringstream k;
  k << dtype_name(p.types.q) << ' ' << p.num_seqs() << ' ' << p.heads << ' ' << p.kv_heads << ' ' << p.head_size
    << ' ' << p.block_size << ' ' << p.max_seqlen_q() << ' ' << p.max_seqlen_k() << ' ' << container_blocks(p) << ' '
    << ragged_q(p) << ' ' << p.causal << ' ' << std::hexfloat << p.softmax_scale();
  for (int64_t v : {l.q_token, l.q_head, l.o_token, l.o_head, l.kv_block, l.kv_token, l.kv_head, l.table_stride})
    k << ' ' << v;
  return k.str();
}

// Built graphs (and cuDNN's refusals, so a declined problem is asked once) by key, most recent first, the last
// kCachedGraphs kept; plans hold their own. Never destroyed: it and its build handle outlive the kernels at exit.
class GraphCache {
 public:
  std::shared_ptr<const BuiltGraph> get(const AttentionProblem& p, const Layout& l, std::string* why) {
    const std::string key = graph_key(p, l);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key != key) continue;
      entries_.splice(entries_.begin(), entries_, it);
      *why = it->why;
      return it->graph;
    }
    Entry e{key, nullptr, ""};
    try {
      if (!handle_) handle_ = new Handle();
      e.graph = build_graph(handle_->h, p, l, &e.why);
    } catch (const std::exception& ex) {
      *why = std::string("cuDNN: ") + ex.what();  // not kept: a failure outside cuDNN's answer
      return nullptr;
    }
    entries_.push_front(e);
    if (entries_.size() > kCachedGraphs) entries_.pop_back();
    *why = e.why;
    return e.graph;
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const BuiltGraph> graph;  // nullptr: cuDNN refused, `why` says so
    std::string why;
  };
  std::mutex mu_;
  std::list<Entry> entries_;
  Handle* handle_ = nullptr;
};

GraphCache& graph_cache() {
  static GraphCache* cache = new GraphCache();
  return *cache;
}

struct CudnnSdpaPlan : AttentionPlan {
  AttentionProblem problem;
  std::shared_ptr<const BuiltGraph> graph;  // on the kernel's planned layout
  cudnn::WorkspaceLayout ws;                // cuDNN's bytes first, then the derived tables
  std::unique_ptr<Handle> handle;           // this plan's: run() sets its stream
  mutable std::mutex mu;
  mutable std::vector<std::shared_ptr<const BuiltGraph>> other_layouts;  // built in run() for params on another
};

std::string summary_of(const AttentionProblem& p, bool ragged) {
  return "cudnn " + version_text(static_cast<int64_t>(cudnnGetVersion())) + " sdpa paged (frontend " +
         version_text(CUDNN_FRONTEND_VERSION) + ")" + (p.causal ? ", bottom-right causal" : ", non-causal") +
         ", padding mask" + (ragged ? ", ragged q/o; seq_len_q and offsets" : "; seq_len_q") +
         " by a kernel in run()";
}

void check_params(const CudnnSdpaPlan& cp, const AttentionParams& a) {
  const AttentionProblem& p = cp.problem;
  if (a.num_seqs != p.num_seqs() || a.heads != p.heads || a.kv_heads != p.kv_heads || a.head_size != p.head_size ||
      a.block_size != p.block_size || a.max_seqlen_q != p.max_seqlen_q() || a.max_seqlen_k != p.max_seqlen_k() ||
      a.total_q != p.total_q() || a.causal != p.causal || a.scale != p.softmax_scale() || a.types != p.types)
    throw std::invalid_argument("cudnn.sdpa: params do not match the plan (dims, causal, scale or types)");
  if (!a.q || !a.k_cache || !a.v_cache || !a.out || !a.cu_seqlens_q || !a.seqused_k || !a.block_table || !a.workspace)
    throw std::invalid_argument(
        "cudnn.sdpa: params need q, k_cache, v_cache, out, cu_seqlens_q, seqused_k, block_table and workspace");
  if (a.epilogue.gate)
    throw std::invalid_argument("cudnn.sdpa: params.epilogue.gate set, and cudnn.sdpa has no gate epilogue");
  check_q_prologue_params(kName, AttentionFusion{}, a.prologue);
}

// The plan's graph for the params' layout; another layout's is built on its first (eager) call.
const BuiltGraph& graph_for(const CudnnSdpaPlan& cp, const AttentionParams& a, cudaStream_t s) {
  const Layout l = layout_of(a);
  if (l == cp.graph->layout) return *cp.graph;
  std::lock_guard<std::mutex> lock(cp.mu);
  for (const auto& g : cp.other_layouts)
    if (g->layout == l) return *g;
  if (const std::string bad = layout_conflict(cp.problem, l); !bad.empty())
    throw std::invalid_argument(std::string("cudnn.sdpa: ") + bad);
  if (cuda::stream_is_capturing(s))
    throw std::invalid_argument("cudnn.sdpa: params on a layout the plan has no graph for while capturing "
                                "(make one eager call with them first)");
  std::string why;
  std::shared_ptr<const BuiltGraph> g = graph_cache().get(cp.problem, l, &why);
  if (!g) throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
  if (g->workspace > cp.graph->workspace)
    throw std::invalid_argument("cudnn.sdpa: the params' layout needs " + std::to_string(g->workspace) +
                                " cuDNN workspace bytes, the plan has " + std::to_string(cp.graph->workspace));
  cp.other_layouts.push_back(g);
  return *g;
}

class CudnnSdpa final : public AttentionKernel {
 public:
  explicit CudnnSdpa(std::optional<Layout> fixed = std::nullopt) : fixed_(fixed) {}
  std::string name() const override { return kName; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const AttentionProblem& p, const KnobValues& /*knobs*/) const override {
    try {
      if (const std::string why = problem_conflict(p, planned(p)); !why.empty()) return Support::no(why);
      if (cuda::device_count() == 0) return Support::no("no CUDA device");
      std::string why;
      if (!graph_cache().get(p, planned(p), &why)) return Support::no(why);
      return Support::yes();
    } catch (const std::exception& e) {
      return Support::no(std::string("cudnn.sdpa: ") + e.what());
    } catch (...) {
      return Support::no("cudnn.sdpa: unknown exception while building the cuDNN graph");
    }
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& /*knobs*/) const override {
    if (const std::string why = problem_conflict(p, planned(p)); !why.empty())
      throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
    if (cuda::device_count() == 0) throw std::invalid_argument("cudnn.sdpa: no CUDA device");
    auto plan = std::make_unique<CudnnSdpaPlan>();
    std::string why;
    plan->graph = graph_cache().get(p, planned(p), &why);
    if (!plan->graph) throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
    plan->problem = p;
    plan->handle = std::make_unique<Handle>();
    plan->ws = cudnn::workspace_layout(plan->graph->workspace, p.num_seqs(), plan->graph->ragged);
    plan->workspace_bytes = plan->ws.total;
    plan->graph_replay = true;
    plan->summary = summary_of(p, plan->graph->ragged);
    return plan;
  }

  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    const auto* cp = dynamic_cast<const CudnnSdpaPlan*>(&plan);
    if (!cp) throw std::invalid_argument("cudnn.sdpa: plan was not made by cudnn.sdpa");
    check_params(*cp, a);
    const auto s = static_cast<cudaStream_t>(stream);
    const BuiltGraph& g = graph_for(*cp, a, s);
    // The derived tables: made here on the stream from params.cu_seqlens_q, so a call needs no host data.
    const cudnn::DerivedTables t = cudnn::tables_in(a.workspace, cp->ws, g.ragged);
    cudnn::launch_derive_tables(a.cu_seqlens_q, a.num_seqs, a.q_stride_token, a.o_stride_token, t, s);
    auto* table = const_cast<int32_t*>(a.block_table);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, const_cast<void*>(a.q)},       {kK, const_cast<void*>(a.k_cache)},
        {kV, const_cast<void*>(a.v_cache)}, {kO, a.out},
        {kSeqLenQ, t.seq_len_q},            {kSeqLenKv, const_cast<int32_t*>(a.seqused_k)},
        {kTableK, table},                   {kTableV, table}};
    if (g.ragged) {
      pack[kQOffsets] = t.q_offsets;
      pack[kOOffsets] = t.o_offsets;
    }
    std::lock_guard<std::mutex> lock(g.mu);
    if (const cudnnStatus_t st = cudnnSetStream(cp->handle->h, s); st != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("cudnn.sdpa: cudnnSetStream: ") + cudnnGetErrorString(st));
    if (const fe::error_t e = g.graph.execute(cp->handle->h, pack, a.workspace); e.is_bad())
      throw std::runtime_error("cudnn.sdpa: cuDNN execute: " + e.err_msg);
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
