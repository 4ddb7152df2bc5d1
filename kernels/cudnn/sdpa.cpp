// cudnn.sdpa: cuDNN's fused SDPA, built through the cuDNN frontend's graph API and run in-process on attnbench's
// paged inputs as they are: Q and O packed [total_q, heads, d] (ragged offsets when the query lengths differ), the
// K/V caches as cuDNN's paged containers read through the block table, seqused_k as seq_len_kv, the padding mask
// and, when causal, the bottom-right causal mask. supports() builds (and caches) the graph, so a problem cuDNN
// refuses is declined with cuDNN's own message; run() enqueues the derived tables and the graph on the caller's
// stream, allocates nothing and captures into a CUDA graph. The knobs choose the candidates (the heuristics modes)
// and which one runs: the first that builds, one by index, or the fastest of all, timed in plan().
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
#include "cudnn/plan_key.hpp"
#include "cudnn/sdpa.hpp"

namespace attnbench {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

constexpr const char* kName = "cudnn.sdpa";
constexpr std::size_t kCachedGraphs = 16;
enum Uid : int64_t { kQ = 1, kK, kV, kO, kSeqLenQ, kSeqLenKv, kTableK, kTableV, kQOffsets, kOOffsets };

using cudnn::container_blocks;
using cudnn::Layout;
using cudnn::layout_of;
using cudnn::PlanChoice;
using cudnn::planned_layout;
using cudnn::ragged_q;

constexpr int kWarmups = 3, kTimed = 10;  // autotune's executions per candidate
constexpr int kHoldMs = 200;              // the hold while autotune queues one candidate's timed executions

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

// One built plan of a graph: its place in the heuristics' list, its engine, cuDNN's workspace bytes.
struct Candidate {
  int64_t index = 0;
  std::string engine;
  std::size_t workspace = 0;
};

// Autotune's pick: a position in the graph's candidates, and every candidate's time as the plan summary says it.
struct Tuning {
  std::size_t chosen = 0;
  std::string text;
};

// One built graph: the SDPA of a problem's dims on one layout with its plans, shared by every plan with that key.
struct BuiltGraph {
  fe::graph::Graph graph;
  Layout layout;
  bool ragged = false;
  std::string implementation;  // the frontend's SDPA node for these attributes: composite or unified
  std::string fallback;        // under auto: why the frontend's pick was not kept ("" when it was)
  PlanChoice choice;
  std::vector<Candidate> candidates;  // first and N: the one plan; autotune: each engine that built, once
  mutable std::mutex mu;              // one execute() on the graph at a time
  mutable std::mutex tune_mu;
  mutable std::optional<Tuning> tuning;  // autotune's, timed by the first plan() that needs it
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

// Whether the graph needs the bottom-right causal mask: with one query per sequence it hides no key (the query sits
// on the last position), and a graph without a diagonal band is one more engines take.
bool masked(const AttentionProblem& p) { return p.causal && p.max_seqlen_q() > 1; }

// The SDPA node of p on layout l: paged K/V containers {blocks, kv_heads, block_size, d} by the cache's strides,
// the block table as both page tables {B, 1, blocks per sequence, 1}, the padding mask's lengths, causal
// bottom-right where masked(p).
void declare_sdpa(fe::graph::Graph& g, const AttentionProblem& p, const Layout& l, bool ragged,
                  cudnn::Implementation impl) {
  const int64_t b = p.num_seqs(), pages = p.max_blocks_per_seq(), ts = l.table_stride;
  auto q = token_tensor("Q", kQ, p, l.q_token, l.q_head);
  if (ragged) q.set_ragged_offset(index_tensor(g, "q_offsets", kQOffsets, {b + 1, 1, 1, 1}, {1, 1, 1, 1}));
  const auto cache = [&](const char* name, Uid uid) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
                        .set_dim({container_blocks(p, l), p.kv_heads, p.block_size, p.head_size})
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
  if (masked(p)) options.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT).set_diagonal_band_right_bound(0);
  if (impl != cudnn::Implementation::automatic)
    options.set_implementation(impl == cudnn::Implementation::unified ? fe::AttentionImplementation_t::UNIFIED
                                                                      : fe::AttentionImplementation_t::COMPOSITE);
  auto [o, stats] = g.sdpa(g.tensor(q), cache("k_cache", kK), cache("v_cache", kV), options);
  (void)stats;  // none: generate_stats(false)
  o->set_output(true).set_uid(kO).set_dim({b, p.heads, p.max_seqlen_q(), p.head_size})
      .set_stride({p.max_seqlen_q() * l.o_token, l.o_head, l.o_token, 1});
  if (ragged) o->set_ragged_offset(index_tensor(g, "o_offsets", kOOffsets, {b + 1, 1, 1, 1}, {1, 1, 1, 1}));
}

fe::HeurMode_t heur_mode(cudnn::Heuristic h) {
  switch (h) {
    case cudnn::Heuristic::a:
      return fe::HeurMode_t::A;
    case cudnn::Heuristic::b:
      return fe::HeurMode_t::B;
    case cudnn::Heuristic::fallback:
      return fe::HeurMode_t::FALLBACK;
  }
  return fe::HeurMode_t::A;
}

std::vector<fe::HeurMode_t> heur_modes(const PlanChoice& c) {
  std::vector<fe::HeurMode_t> modes;
  for (cudnn::Heuristic h : c.heuristics) modes.push_back(heur_mode(h));
  return modes;
}

std::string engine_name(const fe::graph::Graph& g, int64_t index) {
  std::string name;
  if (g.get_plan_name_at_index(index, name).is_bad() || name.empty()) return "?";
  return name;
}

// The SDPA implementation the frontend picked for the graph's attributes, from its serialised nodes.
std::string implementation_of(const fe::graph::Graph& g) {
  try {
    nlohmann::json j;
    g.serialize(j);
    for (const auto& node : j["nodes"])
      if (node.contains("implementation")) {
        std::string name = node["implementation"].get<std::string>();
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
        return name;
      }
  } catch (const std::exception&) {
  }
  return "unknown";
}

// Builds the plans the choice needs: the first that builds, candidate N, or all. "" or why not.
std::string build_plans(fe::graph::Graph& g, cudnnHandle_t h, const PlanChoice& c) {
  fe::error_t e;
  switch (c.pick) {
    case PlanChoice::Pick::first:
      e = g.build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
      break;
    case PlanChoice::Pick::index:
      if (const int64_t n = g.get_execution_plan_count(); c.index >= n)
        return std::string(cudnn::kPlanKnob) + "=" + std::to_string(c.index) + ": heuristics " +
               cudnn::heuristics_text(c.heuristics) + " gave " + std::to_string(n) + " candidate(s), 0.." +
               std::to_string(n - 1);
      e = g.build_plan_at_index(h, c.index);
      if (e.is_bad())
        return "cuDNN: build_plan_at_index(" + std::to_string(c.index) + ", " + engine_name(g, c.index) +
               "): " + e.err_msg;
      return "";
    case PlanChoice::Pick::autotune:
      e = g.build_plans(h, fe::BuildPlanPolicy_t::ALL);
      break;
  }
  return e.is_bad() ? "cuDNN: build_plans: " + e.err_msg : "";
}

// The built plans in the heuristics' order (a plan that did not build has no workspace size), each engine once:
// joined modes' lists repeat engines.
std::vector<Candidate> built_candidates(const fe::graph::Graph& g, const PlanChoice& c) {
  std::vector<Candidate> out;
  for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
    if (c.pick == PlanChoice::Pick::index && i != c.index) continue;
    int64_t ws = 0;
    if (g.get_workspace_size_plan_at_index(i, ws).is_bad()) continue;
    const std::string name = engine_name(g, i);
    if (std::any_of(out.begin(), out.end(), [&](const Candidate& o) { return o.engine == name; })) continue;
    out.push_back({i, name, static_cast<std::size_t>(ws)});
    if (c.pick == PlanChoice::Pick::first) break;
  }
  return out;
}

// Builds the graph of (p, l) on one SDPA node and the plans the choice needs: validate, operation graph, the
// heuristics modes' candidates, support check, plans. The graph (its node known once validated) and, when a step
// fails, "cuDNN: <step>: <cuDNN's message>" in *why.
std::shared_ptr<BuiltGraph> build_on(cudnnHandle_t h, const AttentionProblem& p, const Layout& l,
                                     const PlanChoice& choice, cudnn::Implementation node, std::string* why) {
  auto built = std::make_shared<BuiltGraph>();
  built->layout = l;
  built->ragged = ragged_q(p);
  built->choice = choice;
  fe::graph::Graph& g = built->graph;
  g.set_io_data_type(p.types.q == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  declare_sdpa(g, p, l, built->ragged, node);
  const std::pair<const char*, std::function<fe::error_t()>> steps[] = {
      {"validate", [&] { return g.validate(); }},
      {"build_operation_graph", [&] { return g.build_operation_graph(h); }},
      {"create_execution_plans", [&] { return g.create_execution_plans(heur_modes(choice)); }},
      {"check_support", [&] { return g.check_support(h); }},
  };
  for (const auto& [step, run] : steps) {
    const fe::error_t e = run();
    if (e.is_bad()) {
      *why = std::string("cuDNN: ") + step + ": " + e.err_msg;
      return built;
    }
    if (built->implementation.empty()) built->implementation = implementation_of(g);
  }
  if (*why = build_plans(g, h, choice); !why->empty()) return built;
  built->candidates = built_candidates(g, choice);
  if (built->candidates.empty()) *why = "cuDNN: no plan reports its workspace size after build_plans";
  return built;
}

// The graph of (p, l) under the choice, or nullptr and why not. Under auto the frontend picks the node from the
// attributes alone; where the unified one it picks gives no plan, the composite one is built instead.
std::shared_ptr<const BuiltGraph> build_graph(cudnnHandle_t h, const AttentionProblem& p, const Layout& l,
                                              const PlanChoice& choice, std::string* why) {
  std::shared_ptr<BuiltGraph> g = build_on(h, p, l, choice, choice.implementation, why);
  if (why->empty()) return g;
  if (choice.implementation != cudnn::Implementation::automatic || g->implementation != "unified") return nullptr;
  std::string composite_why;
  std::shared_ptr<BuiltGraph> c = build_on(h, p, l, choice, cudnn::Implementation::composite, &composite_why);
  if (!composite_why.empty()) return nullptr;  // *why: the unified node's refusal, the frontend's own pick
  c->fallback = "the unified node gave no plan: " + why->substr(0, 160);
  why->clear();
  return c;
}

// Built graphs (and cuDNN's refusals, so a declined problem is asked once) by key, most recent first, the last
// kCachedGraphs kept; plans hold their own. Never destroyed: it and its build handle outlive the kernels at exit.
class GraphCache {
 public:
  std::shared_ptr<const BuiltGraph> get(const AttentionProblem& p, const Layout& l, const PlanChoice& c,
                                        std::string* why) {
    const std::string key = cudnn::graph_key(p, l, c);
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
      e.graph = build_graph(handle_->h, p, l, c, &e.why);
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

// The device pointers of one execution, as cuDNN's variant pack by uid.
struct Pointers {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* o = nullptr;
  int32_t* seq_len_q = nullptr;
  const int32_t *seq_len_kv = nullptr, *table = nullptr;
  int32_t *q_offsets = nullptr, *o_offsets = nullptr;  // ragged only
};

std::unordered_map<int64_t, void*> variant_pack(const Pointers& x, bool ragged) {
  auto* table = const_cast<int32_t*>(x.table);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(x.q)}, {kK, const_cast<void*>(x.k)},
      {kV, const_cast<void*>(x.v)}, {kO, x.o},
      {kSeqLenQ, x.seq_len_q},      {kSeqLenKv, const_cast<int32_t*>(x.seq_len_kv)},
      {kTableK, table},             {kTableV, table}};
  if (ragged) {
    pack[kQOffsets] = x.q_offsets;
    pack[kOOffsets] = x.o_offsets;
  }
  return pack;
}

void set_stream(cudnnHandle_t h, cudaStream_t s) {
  if (const cudnnStatus_t st = cudnnSetStream(h, s); st != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cudnn.sdpa: cudnnSetStream: ") + cudnnGetErrorString(st));
}

// Elements from a tensor's first to its last, by its strides: what a buffer on layout l must hold.
int64_t span(std::initializer_list<std::pair<int64_t, int64_t>> extent_stride) {
  int64_t last = 0;
  for (const auto& [n, st] : extent_stride) last += (n - 1) * st;
  return last + 1;
}

// Device inputs of p's shape on layout l for autotune: the lengths and a contiguous block table (unused slots on
// the spare block) as the harness makes them; the values are a constant, since the engines' speed does not depend
// on them.
struct TimingInputs {
  cuda::DeviceBuffer q, k, v, o, seq_len_q, seq_len_kv, table, q_offsets, o_offsets, workspace;
  std::unordered_map<int64_t, void*> pack;

  TimingInputs(const AttentionProblem& p, const Layout& l, bool ragged, std::size_t workspace_bytes) {
    const int64_t d = p.head_size, n = p.num_seqs();
    const int64_t q_elems = span({{p.total_q(), l.q_token}, {p.heads, l.q_head}, {d, 1}});
    const int64_t o_elems = span({{p.total_q(), l.o_token}, {p.heads, l.o_head}, {d, 1}});
    const int64_t kv_elems =
        span({{container_blocks(p, l), l.kv_block}, {p.block_size, l.kv_token}, {p.kv_heads, l.kv_head}, {d, 1}});
    using Fill = std::pair<cuda::DeviceBuffer*, int64_t>;
    for (const Fill& f : {Fill{&q, q_elems}, Fill{&k, kv_elems}, Fill{&v, kv_elems}, Fill{&o, o_elems}}) {
      *f.first = cuda::DeviceBuffer(static_cast<std::size_t>(f.second) * 2);
      f.first->fill_byte(0x3C);  // 1.06 in fp16, 0.0115 in bf16: finite, the same for every candidate
    }
    std::vector<int32_t> cu(static_cast<std::size_t>(n) + 1, 0), kv(p.kv_lens.begin(), p.kv_lens.end());
    std::vector<int32_t> slots(static_cast<std::size_t>(n * l.table_stride), static_cast<int32_t>(p.num_blocks()));
    int32_t next = 0;
    for (int64_t s = 0; s < n; ++s) {
      cu[s + 1] = cu[s] + p.q_lens[s];
      const int64_t blocks = (p.kv_lens[s] + p.block_size - 1) / p.block_size;
      for (int64_t b = 0; b < blocks; ++b) slots[s * l.table_stride + b] = next++;
    }
    std::vector<int32_t> lens(n), qo(n + 1), oo(n + 1);
    const cudnn::DerivedTables host{lens.data(), ragged ? qo.data() : nullptr, ragged ? oo.data() : nullptr};
    for (int i = 0; i <= n; ++i) cudnn::derive_entry(cu.data(), static_cast<int>(n), i, l.q_token, l.o_token, host);
    const auto up = [](cuda::DeviceBuffer& b, const std::vector<int32_t>& src) {
      b = cuda::DeviceBuffer(src.size() * sizeof(int32_t));
      b.upload(src.data(), b.bytes());
    };
    up(seq_len_q, lens);
    up(seq_len_kv, kv);
    up(table, slots);
    if (ragged) {
      up(q_offsets, qo);
      up(o_offsets, oo);
    }
    workspace = cuda::DeviceBuffer(std::max<std::size_t>(workspace_bytes, 256));
    pack = variant_pack({q.data(), k.data(), v.data(), o.data(), static_cast<int32_t*>(seq_len_q.data()),
                         static_cast<const int32_t*>(seq_len_kv.data()), static_cast<const int32_t*>(table.data()),
                         static_cast<int32_t*>(q_offsets.data()), static_cast<int32_t*>(o_offsets.data())},
                        ragged);
  }
};

// Median device time (us) of kTimed executions of candidate c, queued behind a held stream so that the events
// bracket only cuDNN's kernels; "" in *why, or cuDNN's message.
double time_candidate(const BuiltGraph& g, const Candidate& c, cudnnHandle_t h, TimingInputs& in, cudaStream_t s,
                      std::string* why) {
  const auto execute = [&] {
    const fe::error_t e = g.graph.execute_plan_at_index(h, in.pack, in.workspace.data(), c.index);
    return e.is_bad() ? e.err_msg : std::string();
  };
  for (int i = 0; i < kWarmups && why->empty(); ++i) *why = execute();
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!why->empty()) return 0;
  gpu::MappedHostMemory flag(sizeof(int));
  auto* release = static_cast<volatile int*>(flag.host());
  *release = 0;
  std::unique_ptr<cuda::Event[]> events(new cuda::Event[kTimed + 1]);
  gpu::launch_hold_stream(static_cast<const volatile int*>(flag.device()), kHoldMs, s);
  events[0].record(s);
  for (int i = 0; i < kTimed && why->empty(); ++i) {
    *why = execute();
    events[i + 1].record(s);
  }
  *release = 1;
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!why->empty()) return 0;
  std::vector<double> us(kTimed);
  for (int i = 0; i < kTimed; ++i) us[i] = 1e3 * cuda::Event::elapsed_ms(events[i], events[i + 1]);
  std::nth_element(us.begin(), us.begin() + kTimed / 2, us.end());
  return us[kTimed / 2];
}

std::string us_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f us", us);
  return buf;
}

// Times every candidate of g on inputs of p's shape, on a stream of its own, and keeps the fastest.
Tuning autotune(const BuiltGraph& g, const AttentionProblem& p, cudnnHandle_t h) {
  std::size_t ws = 0;
  for (const Candidate& c : g.candidates) ws = std::max(ws, c.workspace);
  TimingInputs in(p, g.layout, g.ragged, ws);
  cuda::Stream stream;
  set_stream(h, stream.get());
  struct DefaultStream {  // the handle must not keep the stream this function destroys
    cudnnHandle_t h;
    ~DefaultStream() { cudnnSetStream(h, nullptr); }
  } restore{h};
  std::lock_guard<std::mutex> lock(g.mu);
  Tuning t;
  double best = std::numeric_limits<double>::infinity();
  std::string times;
  for (std::size_t i = 0; i < g.candidates.size(); ++i) {
    const Candidate& c = g.candidates[i];
    std::string why;
    const double us = time_candidate(g, c, h, in, stream.get(), &why);
    times += (times.empty() ? "" : ", ") + std::to_string(c.index) + " " + c.engine + " " +
             (why.empty() ? us_text(us) : "failed (" + why.substr(0, 120) + ")");
    if (why.empty() && us < best) {
      best = us;
      t.chosen = i;
    }
  }
  if (best == std::numeric_limits<double>::infinity())
    throw std::invalid_argument("cudnn.sdpa: autotune: no candidate ran: " + times);
  t.text = "autotune of " + std::to_string(g.candidates.size()) + " (median of " + std::to_string(kTimed) +
           "): " + times;
  return t;
}

const Tuning& tuned(const BuiltGraph& g, const AttentionProblem& p, cudnnHandle_t h) {
  std::lock_guard<std::mutex> lock(g.tune_mu);
  if (!g.tuning) g.tuning = autotune(g, p, h);
  return *g.tuning;
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
  std::unique_ptr<Handle> handle;  // this plan's: run() sets its stream
  mutable std::mutex mu;
  mutable std::list<Bound> other_layouts;  // built in run() for params on another (a list: run() keeps references)
};

// What ran: versions, the frontend's node, the mask and tables, the knobs' choice and the candidate with its engine.
std::string summary_of(const AttentionProblem& p, const BuiltGraph& g, const Candidate& c, const Tuning* t) {
  const char* mask = masked(p) ? ", bottom-right causal" : p.causal ? ", causal at q_len 1 (no mask)" : ", non-causal";
  const PlanChoice& k = g.choice;
  return "cudnn " + version_text(static_cast<int64_t>(cudnnGetVersion())) + " sdpa paged (frontend " +
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
  std::shared_ptr<const BuiltGraph> g = graph_cache().get(cp.problem, l, cp.main.graph->choice, &why);
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
      if (!graph_cache().get(p, planned(p), choice, &why)) return Support::no(why);
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
    plan->main.graph = graph_cache().get(p, planned(p), choice, &why);
    if (!plan->main.graph) throw std::invalid_argument(std::string("cudnn.sdpa: ") + why);
    const BuiltGraph& g = *plan->main.graph;
    plan->problem = p;
    plan->handle = std::make_unique<Handle>();
    const Tuning* t = choice.builds_all() ? &tuned(g, p, plan->handle->h) : nullptr;
    plan->main.candidate = g.candidates[t ? t->chosen : 0];
    plan->ws = cudnn::workspace_layout(plan->main.candidate.workspace, p.num_seqs(), g.ragged);
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
    cudnn::launch_derive_tables(a.cu_seqlens_q, a.num_seqs, a.q_stride_token, a.o_stride_token, t, s);
    auto pack = variant_pack({a.q, a.k_cache, a.v_cache, a.out, t.seq_len_q, a.seqused_k, a.block_table,
                              t.q_offsets, t.o_offsets},
                             g.ragged);
    std::lock_guard<std::mutex> lock(g.mu);
    set_stream(cp->handle->h, s);
    if (const fe::error_t e = g.graph.execute_plan_at_index(cp->handle->h, pack, a.workspace, b.candidate.index);
        e.is_bad())
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
