#include "cudnn/graph.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attnbench::cudnn {
namespace {

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;
constexpr const char* kNodeName = "cudnn.sdpa";
constexpr std::size_t kCachedGraphs = 16;

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


fe::DataType_t fp8_type(DType d) { return d == DType::e5m2 ? fe::DataType_t::FP8_E5M2 : fe::DataType_t::FP8_E4M3; }

// The FP8 SDPA node: Q and the caches in p's 8-bit format, the scalars as [1, 1, 1, 1] fp32 tensors by uid
// (Fp8Scalars' order), the amaxes as outputs; O in e4m3 (the caller sets its dims, strides and uid).
TensorPtr declare_fp8_sdpa(fe::graph::Graph& g, fe::graph::Tensor_attributes q, TensorPtr k, TensorPtr v,
                           fe::graph::SDPA_attributes options, const AttentionProblem& p) {
  const fe::DataType_t t = fp8_type(p.types.q);
  k->set_data_type(t);
  v->set_data_type(t);
  const auto scalar = [&](const char* name, int field) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(kFp8First + field).set_dim({1, 1, 1, 1})
                        .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT));
  };
  auto [o, stats, amax_s, amax_o] =
      g.sdpa_fp8(g.tensor(q.set_data_type(t)), k, v, scalar("descale_q", 0), scalar("descale_k", 1),
                 scalar("descale_v", 2), scalar("descale_s", 3), scalar("scale_s", 4), scalar("scale_o", 5), options);
  (void)stats;  // none: generate_stats(false)
  int field = 6;
  for (const TensorPtr& amax : {amax_s, amax_o})
    amax->set_output(true).set_uid(kFp8First + field++).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  o->set_data_type(fe::DataType_t::FP8_E4M3);
  return o;
}

// The SDPA node of p on layout l: paged K/V containers {blocks, kv_heads, block_size, d} by the cache's strides,
// the block table as both page tables {B, 1, blocks per sequence, 1}, the padding mask's lengths, the diagonal
// band of band_of(p, diag) (causal where masked(p), a sliding window), ALiBi, the sinks as a [1, H, 1, 1] fp32
// input.
void declare_sdpa(fe::graph::Graph& g, const AttentionProblem& p, const Layout& l, bool ragged,
                  cudnn::Implementation impl, cudnn::Diagonal diag) {
  const int64_t b = p.num_seqs(), pages = p.max_blocks_per_seq(), ts = l.table_stride;
  auto q = token_tensor("Q", kQ, p, l.q_token, l.q_head);
  if (ragged) q.set_ragged_offset(index_tensor(g, "q_offsets", kQOffsets, {b + 1, 1, 1, 1}, {1, 1, 1, 1}));
  const auto cache = [&](const char* name, Uid uid) {
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
                        .set_dim({container_blocks(p, l), p.kv_heads, p.block_size, p.head_size})
                        .set_stride({l.kv_block, l.kv_head, l.kv_token, 1}));
  };
  auto options = fe::graph::SDPA_attributes()
                     .set_name(kNodeName)
                     .set_generate_stats(false)
                     .set_attn_scale(p.softmax_scale())
                     .set_padding_mask(true)
                     .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqLenQ, {b, 1, 1, 1}, {1, 1, 1, 1}))
                     .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqLenKv, {b, 1, 1, 1}, {1, 1, 1, 1}))
                     .set_paged_attention_k_table(index_tensor(g, "table_k", kTableK, {b, 1, pages, 1}, {ts, ts, 1, 1}))
                     .set_paged_attention_v_table(index_tensor(g, "table_v", kTableV, {b, 1, pages, 1}, {ts, ts, 1, 1}))
                     .set_paged_attention_max_seq_len_kv(p.max_seqlen_k());
  const Band band = band_of(p, diag);
  if (band.left || band.right)
    options.set_diagonal_alignment(band.top_left ? fe::DiagonalAlignment_t::TOP_LEFT
                                                 : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
  if (band.right) options.set_diagonal_band_right_bound(static_cast<int>(*band.right));
  if (band.left) options.set_diagonal_band_left_bound(static_cast<int>(*band.left));
  if (!p.features.alibi_slopes.empty()) options.set_alibi_mask(true);
  if (!p.features.sinks.empty())
    options.set_sink_token(g.tensor(fe::graph::Tensor_attributes().set_name("sinks").set_uid(kSinks)
                                        .set_dim({1, p.heads, 1, 1}).set_stride({p.heads, 1, 1, 1})
                                        .set_data_type(fe::DataType_t::FLOAT)));
  if (impl != cudnn::Implementation::automatic)
    options.set_implementation(impl == cudnn::Implementation::unified ? fe::AttentionImplementation_t::UNIFIED
                                                                      : fe::AttentionImplementation_t::COMPOSITE);
  TensorPtr o;
  int64_t o_token = l.o_token, o_head = l.o_head;
  if (fp8_graph(p)) {
    o_token = fp8_o_token_stride(p);
    o_head = p.head_size;
    o = declare_fp8_sdpa(g, q, cache("k_cache", kK), cache("v_cache", kV), options, p);
  } else {
    auto [out, stats] = g.sdpa(g.tensor(q), cache("k_cache", kK), cache("v_cache", kV), options);
    (void)stats;  // none: generate_stats(false)
    o = out;
  }
  o->set_output(true).set_uid(kO).set_dim({b, p.heads, p.max_seqlen_q(), p.head_size})
      .set_stride({p.max_seqlen_q() * o_token, o_head, o_token, 1});
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
  built->fp8 = fp8_graph(p);
  built->choice = choice;
  fe::graph::Graph& g = built->graph;
  g.set_io_data_type(p.types.o == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  declare_sdpa(g, p, l, built->ragged, node, choice.diagonal);
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

GraphLru<BuiltGraph>& graph_cache() {
  static auto* cache = new GraphLru<BuiltGraph>(kCachedGraphs);
  return *cache;
}

}  // namespace

std::shared_ptr<const BuiltGraph> cached_graph(const AttentionProblem& p, const Layout& l, const PlanChoice& c,
                                               std::string* why) {
  const auto build = [&](cudnnHandle_t h, std::string* refusal) { return build_graph(h, p, l, c, refusal); };
  return graph_cache().get(cudnn::graph_key(p, l, c), build, why);
}

std::unordered_map<int64_t, void*> variant_pack(const Pointers& x, bool ragged) {
  auto* table = const_cast<int32_t*>(x.table);
  std::unordered_map<int64_t, void*> pack = {
      {kQ, const_cast<void*>(x.q)}, {kK, const_cast<void*>(x.k)},
      {kV, const_cast<void*>(x.v)}, {kO, x.o},
      {kSeqLenQ, x.seq_len_q},      {kSeqLenKv, const_cast<int32_t*>(x.seq_len_kv)},
      {kTableK, table},             {kTableV, table}};
  if (x.sinks) pack[kSinks] = const_cast<float*>(x.sinks);
  for (int i = 0; x.fp8 && i < kFp8Scalars; ++i) pack[kFp8First + i] = x.fp8 + i;
  if (ragged) {
    pack[kQOffsets] = x.q_offsets;
    pack[kOOffsets] = x.o_offsets;
  }
  return pack;
}

void set_stream(cudnnHandle_t h, cudaStream_t s) {
  if (const cudnnStatus_t st = cudnnSetStream(h, s); st != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuDNN: cudnnSetStream: ") + cudnnGetErrorString(st));
}

}  // namespace attnbench::cudnn
