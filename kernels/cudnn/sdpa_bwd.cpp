// cudnn.sdpa_backward: cuDNN's fused SDPA backward, built through the cuDNN frontend's graph API and run in-process
// on attnbench's packed varlen inputs as they are: Q, O, dO, dQ and K, V, dK, dV as cuDNN's ragged [B, H, S, d]
// tensors (each sequence at cu_seqlens * token stride), the forward's LSE as the ragged stats [B, H, S_q, 1], the
// padding mask's lengths and the causal / sliding-window band of band_of(p); a batch of one q and one kv length as
// the same memory's dense tensors without the padding mask (ATTNBENCH_CUDNN_BWD_LAYOUT). supports() builds (and
// caches) the graph, so a problem cuDNN refuses is declined with cuDNN's own message; run() derives the ragged
// form's lengths and offsets from the device's cu_seqlens on the caller's stream (derived.cu's kernel), then
// executes the graph: it allocates nothing and captures into a CUDA graph.
#include <cudnn_frontend.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "common/device/visibility.hpp"
#include "cuda/runtime.hpp"
#include "cudnn/derived.hpp"
#include "cudnn/graph.hpp"
#include "cudnn/plan_key.hpp"

namespace attnbench {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;
using cudnn::Band;
using cudnn::Handle;
using cudnn::set_stream;
using cudnn::version_text;

constexpr const char* kName = "cudnn.sdpa_backward";
constexpr std::size_t kCachedGraphs = 16;

// The backward graph's own uids (a graph apart from the forward's).
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kSeqLenQ, kSeqLenKv, kQOffsets, kKOffsets, kStatsOffsets
};

// The packed strides (elements) a graph is built for: Q, O, dO, dQ share the q ones, K, V, dK, dV the k ones.
struct BwdLayout {
  int64_t q_token = 0, q_head = 0, k_token = 0, k_head = 0;
  bool operator==(const BwdLayout& o) const {
    return q_token == o.q_token && q_head == o.q_head && k_token == o.k_token && k_head == o.k_head;
  }
};

// How the problem goes to cuDNN: the diagonal's alignment, and dense tensors (no offsets, no padding mask) or
// ragged ones.
struct BwdForm {
  cudnn::Diagonal diagonal = cudnn::Diagonal::automatic;
  bool dense = false;
};

constexpr const char* kLayoutKnob = "ATTNBENCH_CUDNN_BWD_LAYOUT";

// Every sequence with one q length and one kv length: the packed tokens are a dense [B, S, H, d] batch.
bool uniform(const AttentionProblem& p) {
  for (std::size_t s = 0; s < p.q_lens.size(); ++s)
    if (p.q_lens[s] != p.q_lens.front() || p.kv_lens[s] != p.kv_lens.front()) return false;
  return true;
}

BwdForm form_of(const AttentionProblem& p, const KnobValues& knobs) {
  return {cudnn::diagonal_choice(knobs), knobs.get(kLayoutKnob) == "auto" && uniform(p)};
}

BwdLayout layout_of(const AttentionBwdParams& a) {
  return {a.q_stride_token, a.q_stride_head, a.k_stride_token, a.k_stride_head};
}
BwdLayout planned_layout(const AttentionProblem& p) { return layout_of(make_attention_bwd_params(p)); }

// Where the masks leave rows that see no key (their LSE is -inf, and cuDNN's exp(s - stats) is NaN there) or keys
// that no row sees (their dK/dV rows must be 0, which run() then writes itself before cuDNN runs).
struct Coverage {
  bool empty_rows = false, unseen_keys = false;
};

Coverage coverage_of(const AttentionProblem& p) {
  Coverage c;
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q = p.q_lens[s], kv = p.kv_lens[s];
    if (q == 0) {
      c.unseen_keys = c.unseen_keys || kv > 0;
      continue;
    }
    const device::Visibility v(q, kv, p.causal, p.top_left, p.features.window_left, p.features.window_right);
    // Both ends of the visible range grow with the row: the first and last rows bound every row's.
    if (v.visible_count(0) == 0 || v.visible_count(q - 1) == 0) c.empty_rows = true;
    if (v.first_visible(0) > 0 || v.visible_end(q - 1) < kv) c.unseen_keys = true;
  }
  return c;
}

// Why the ragged offsets of layout l, int32 elements, cannot address p ("" when they can).
std::string offsets_conflict(const AttentionProblem& p, const BwdLayout& l) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  const std::pair<const char*, int64_t> ends[] = {{"total_q x q token stride", p.total_q() * l.q_token},
                                                   {"total_k x k token stride", total_k(p) * l.k_token},
                                                   {"total_q x heads (the LSE)", p.total_q() * p.heads}};
  for (const auto& [what, end] : ends)
    if (end > kMax)
      return "ragged offsets are int32 elements: " + std::string(what) + " = " + std::to_string(end) + " does not fit";
  return "";
}

// The declines that need no device: the op's rules, softcap, cuDNN's head sizes, the offsets, rows with no key.
std::string problem_conflict(const AttentionProblem& p, const BwdForm& form) {
  if (std::string why = attention_bwd_conflict(p); !why.empty()) return why;
  if (p.features.softcap != 0.f) return std::string("feature 'softcap': not implemented by ") + kName;
  if (p.head_size % 8 != 0 || p.head_size > 256)
    return "head_size " + std::to_string(p.head_size) +
           ": cuDNN's SDPA backward takes multiples of 8 up to 256 on SM90 (up to 128 elsewhere)";
  if (std::string why = form.dense ? "" : offsets_conflict(p, planned_layout(p)); !why.empty()) return why;
  if (coverage_of(p).empty_rows)
    return "rows that see no key: their LSE is -inf and cuDNN's backward takes exp(s - LSE) over masked scores";
  return "";
}

// [B, h, s, d] over packed tokens at these strides, sequence b starting at offsets[b] elements (at b s tokens
// where offsets is null: the dense batch).
void shape_packed(fe::graph::Tensor_attributes& t, Uid uid, int64_t b, int64_t h, int64_t s, int64_t d,
                  int64_t st_token, int64_t st_head, const TensorPtr& offsets) {
  t.set_uid(uid).set_dim({b, h, s, d}).set_stride({s * st_token, st_head, st_token, 1});
  if (offsets) t.set_ragged_offset(offsets);
}

TensorPtr index_tensor(fe::graph::Graph& g, const char* name, Uid uid, int64_t n) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::INT32));
}

// The band of band_of(p, form.diagonal) (causal where masked, a sliding window) and, ragged, the padding mask's
// lengths and the total token counts, which size cuDNN's fp32 dQ accumulator and GQA's per-head dK/dV by the
// tokens rather than by B x the longest sequence.
fe::graph::SDPA_backward_attributes bwd_options(fe::graph::Graph& g, const AttentionProblem& p, const BwdForm& form) {
  const int64_t b = p.num_seqs();
  auto o = fe::graph::SDPA_backward_attributes().set_name(kName).set_attn_scale(p.softmax_scale());
  if (!form.dense)
    o.set_padding_mask(true)
        .set_seq_len_q(index_tensor(g, "seq_len_q", kSeqLenQ, b))
        .set_seq_len_kv(index_tensor(g, "seq_len_kv", kSeqLenKv, b))
        .set_max_total_seq_len_q(p.total_q())
        .set_max_total_seq_len_kv(total_k(p));
  const Band band = cudnn::band_of(p, form.diagonal);
  if (band.left || band.right)
    o.set_diagonal_alignment(band.top_left ? fe::DiagonalAlignment_t::TOP_LEFT : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
  if (band.right) o.set_diagonal_band_right_bound(static_cast<int>(*band.right));
  if (band.left) o.set_diagonal_band_left_bound(static_cast<int>(*band.left));
  return o;
}

// The SDPA backward node of p on layout l: every tensor ragged (or dense); the stats fp32 [B, H, S_q, 1] over the
// packed LSE [total_q, heads] (token stride heads, head stride 1), sequence b at cu_seqlens_q[b] * heads.
void declare_sdpa_bwd(fe::graph::Graph& g, const AttentionProblem& p, const BwdLayout& l, const BwdForm& form) {
  const int64_t b = p.num_seqs(), h = p.heads, hk = p.kv_heads, d = p.head_size;
  const int64_t sq = p.max_seqlen_q(), sk = p.max_seqlen_k();
  const auto offsets = [&](const char* name, Uid uid) {
    return form.dense ? TensorPtr() : index_tensor(g, name, uid, b + 1);
  };
  const TensorPtr q_off = offsets("q_offsets", kQOffsets), k_off = offsets("k_offsets", kKOffsets);
  const TensorPtr st_off = offsets("stats_offsets", kStatsOffsets);
  const auto input = [&](const char* name, Uid uid, bool q_side) {
    fe::graph::Tensor_attributes t;
    t.set_name(name);
    if (q_side) shape_packed(t, uid, b, h, sq, d, l.q_token, l.q_head, q_off);
    else shape_packed(t, uid, b, hk, sk, d, l.k_token, l.k_head, k_off);
    return g.tensor(t);
  };
  fe::graph::Tensor_attributes stats;
  stats.set_name("stats").set_data_type(fe::DataType_t::FLOAT);
  shape_packed(stats, kStats, b, h, sq, 1, h, 1, st_off);
  auto [dq, dk, dv] = g.sdpa_backward(input("Q", kQ, true), input("K", kK, false), input("V", kV, false),
                                      input("O", kO, true), input("dO", kDO, true), g.tensor(stats),
                                      bwd_options(g, p, form));
  shape_packed(dq->set_output(true), kDQ, b, h, sq, d, l.q_token, l.q_head, q_off);
  shape_packed(dk->set_output(true), kDK, b, hk, sk, d, l.k_token, l.k_head, k_off);
  shape_packed(dv->set_output(true), kDV, b, hk, sk, d, l.k_token, l.k_head, k_off);
}

// One built graph with the plan that runs (the heuristics' first that builds) and cuDNN's workspace for it.
struct BuiltBwd {
  fe::graph::Graph graph;
  std::size_t workspace = 0;
  std::string engine;
  mutable std::mutex mu;  // one execute() on the graph at a time
};

// validate, operation graph, heuristics A then fallback, support check, the first plan that builds. "" or
// "cuDNN: <step>: <cuDNN's message>".
std::string build(BuiltBwd& b, cudnnHandle_t h, const AttentionProblem& p, const BwdForm& form) {
  fe::graph::Graph& g = b.graph;
  g.set_io_data_type(p.types.o == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  declare_sdpa_bwd(g, p, planned_layout(p), form);
  const std::pair<const char*, std::function<fe::error_t()>> steps[] = {
      {"validate", [&] { return g.validate(); }},
      {"build_operation_graph", [&] { return g.build_operation_graph(h); }},
      {"create_execution_plans",
       [&] { return g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}); }},
      {"check_support", [&] { return g.check_support(h); }},
      {"build_plans", [&] { return g.build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); }},
  };
  for (const auto& [step, run] : steps)
    if (const fe::error_t e = run(); e.is_bad()) return std::string("cuDNN: ") + step + ": " + e.err_msg;
  int64_t ws = 0;
  if (const fe::error_t e = g.get_workspace_size(ws); e.is_bad()) return "cuDNN: get_workspace_size: " + e.err_msg;
  b.workspace = static_cast<std::size_t>(ws);
  if (g.get_plan_name(b.engine).is_bad() || b.engine.empty()) b.engine = "?";
  return "";
}

// Everything the graph depends on: dtype, dims, lengths' maxima and totals, scale, band, form (the layout follows p).
std::string graph_key(const AttentionProblem& p, const BwdForm& form) {
  std::ostringstream k;
  const Band band = cudnn::band_of(p, form.diagonal);
  k << dtype_name(p.types.o) << ' ' << p.num_seqs() << ' ' << p.heads << ' ' << p.kv_heads << ' ' << p.head_size
    << ' ' << p.max_seqlen_q() << ' ' << p.max_seqlen_k() << ' ' << p.total_q() << ' ' << total_k(p) << ' '
    << std::hexfloat << p.softmax_scale() << " band " << band.top_left << ' ' << band.left.value_or(-1) << ' '
    << band.right.value_or(-1) << (form.dense ? " dense" : " ragged");
  return k.str();
}

std::shared_ptr<const BuiltBwd> cached_graph(const AttentionProblem& p, const BwdForm& form, std::string* why) {
  static auto* cache = new cudnn::GraphLru<BuiltBwd>(kCachedGraphs);
  const auto make = [&](cudnnHandle_t h, std::string* refusal) -> std::shared_ptr<const BuiltBwd> {
    auto built = std::make_shared<BuiltBwd>();
    *refusal = build(*built, h, p, form);
    return refusal->empty() ? built : nullptr;
  };
  return cache->get(graph_key(p, form), make, why);
}

// The derived index tensors in the workspace after cuDNN's bytes, each 256-byte aligned: the lengths [B] of Q and
// K/V, the offsets [B + 1] of Q (and O, dO, dQ), of K (and V, dK, dV) and of the stats.
struct TableLayout {
  std::size_t seq_len_q = 0, seq_len_kv = 0, q_offsets = 0, k_offsets = 0, stats_offsets = 0, total = 0;
};

TableLayout table_layout(std::size_t cudnn_bytes, int num_seqs) {
  const auto up = [](std::size_t n) { return (n + 255) / 256 * 256; };
  const std::size_t lens = up(static_cast<std::size_t>(num_seqs) * sizeof(int32_t));
  const std::size_t offs = up((static_cast<std::size_t>(num_seqs) + 1) * sizeof(int32_t));
  TableLayout t;
  t.seq_len_q = up(cudnn_bytes);
  t.seq_len_kv = t.seq_len_q + lens;
  t.q_offsets = t.seq_len_kv + lens;
  t.k_offsets = t.q_offsets + offs;
  t.stats_offsets = t.k_offsets + offs;
  t.total = t.stats_offsets + offs;
  return t;
}

int32_t* at(void* workspace, std::size_t offset) {
  return reinterpret_cast<int32_t*>(static_cast<char*>(workspace) + offset);
}

struct CudnnBwdPlan final : AttentionBwdPlan {
  AttentionProblem problem;
  BwdLayout layout;
  BwdForm form;
  std::shared_ptr<const BuiltBwd> graph;
  TableLayout tables;
  bool zero_dkdv = false;          // keys no row sees: cuDNN is not relied on for their zero gradients
  std::unique_ptr<Handle> handle;  // this plan's: run() sets its stream
};

std::string summary_of(const AttentionProblem& p, const CudnnBwdPlan& pl) {
  const std::string gqa = p.kv_heads == p.heads ? "" : ", GQA " + std::to_string(p.group_size());
  const std::string layout = pl.form.dense ? ", dense [B, S, H, d] (one q and one kv length), no padding mask"
                                           : ", padding mask, ragged q/k/stats; lengths and offsets by a kernel in run()";
  return "cudnn " + version_text(static_cast<int64_t>(cudnnGetVersion())) + " sdpa_backward (frontend " +
         version_text(CUDNN_FRONTEND_VERSION) + ")" + cudnn::band_text(p, pl.form.diagonal) + gqa + layout +
         (pl.zero_dkdv ? "; dK/dV zeroed first (keys no row sees)" : "") + "; heuristics a,fallback, plan first: " +
         pl.graph->engine;
}

// Lengths and offsets from the device's cu_seqlens: Q's with the stats' (token stride heads), then K's.
void derive_tables(const CudnnBwdPlan& pl, const AttentionBwdParams& a, cudaStream_t s) {
  cudnn::DerivedTables q;
  q.seq_len_q = at(a.workspace, pl.tables.seq_len_q);
  q.q_offsets = at(a.workspace, pl.tables.q_offsets);
  q.o_offsets = at(a.workspace, pl.tables.stats_offsets);
  cudnn::launch_derive_tables(a.cu_seqlens_q, a.num_seqs, a.q_stride_token, a.heads, q, s);
  cudnn::DerivedTables k;
  k.seq_len_q = at(a.workspace, pl.tables.seq_len_kv);
  k.q_offsets = at(a.workspace, pl.tables.k_offsets);
  cudnn::launch_derive_tables(a.cu_seqlens_k, a.num_seqs, a.k_stride_token, 0, k, s);
}

std::unordered_map<int64_t, void*> variant_pack(const CudnnBwdPlan& pl, const AttentionBwdParams& a) {
  const auto in = [](const void* p) { return const_cast<void*>(p); };
  std::unordered_map<int64_t, void*> pack = {{kQ, in(a.q)},    {kK, in(a.k)},   {kV, in(a.v)},
                                             {kO, in(a.o)},    {kDO, in(a.d_o)}, {kStats, in(a.lse)},
                                             {kDQ, a.dq},      {kDK, a.dk},     {kDV, a.dv}};
  if (pl.form.dense) return pack;
  const std::pair<Uid, std::size_t> tables[] = {{kSeqLenQ, pl.tables.seq_len_q},  {kSeqLenKv, pl.tables.seq_len_kv},
                                                {kQOffsets, pl.tables.q_offsets}, {kKOffsets, pl.tables.k_offsets},
                                                {kStatsOffsets, pl.tables.stats_offsets}};
  for (const auto& [uid, offset] : tables) pack[uid] = at(a.workspace, offset);
  return pack;
}

// dK and dV over the packed layout (the plan's dense one), before cuDNN writes the rows its masks reach.
void zero_dkdv(const AttentionBwdParams& a, cudaStream_t s) {
  const std::size_t bytes = static_cast<std::size_t>(a.total_k * a.k_stride_token) * dtype_bytes(a.dtype);
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(a.dk, 0, bytes, s));
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(a.dv, 0, bytes, s));
}

class CudnnSdpaBackward final : public AttentionBwdKernel {
 public:
  std::string name() const override { return kName; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    try {
      const BwdForm form = form_of(p, knobs);
      if (const std::string why = problem_conflict(p, form); !why.empty()) return Support::no(why);
      if (cuda::device_count() == 0) return Support::no("no CUDA device");
      std::string why;
      if (!cached_graph(p, form, &why)) return Support::no(why);
      return Support::yes();
    } catch (const std::exception& e) {
      return Support::no(std::string(kName) + ": " + e.what());
    }
  }

  std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const BwdForm form = form_of(p, knobs);
    if (const std::string why = problem_conflict(p, form); !why.empty())
      throw std::invalid_argument(std::string(kName) + " declines: " + why);
    if (cuda::device_count() == 0) throw std::invalid_argument(std::string(kName) + ": no CUDA device");
    auto pl = std::make_unique<CudnnBwdPlan>();
    pl->form = form;
    std::string why;
    pl->graph = cached_graph(p, form, &why);
    if (!pl->graph) throw std::invalid_argument(std::string(kName) + " declines: " + why);
    pl->problem = p;
    pl->layout = planned_layout(p);
    pl->tables = table_layout(pl->graph->workspace, p.num_seqs());
    pl->zero_dkdv = coverage_of(p).unseen_keys;
    pl->handle = std::make_unique<Handle>();
    pl->workspace_bytes = pl->tables.total;
    pl->graph_replay = true;
    pl->summary = summary_of(p, *pl);
    return pl;
  }

  void run(const AttentionBwdPlan& plan, const AttentionBwdParams& a, void* stream) const override {
    const auto* pl = dynamic_cast<const CudnnBwdPlan*>(&plan);
    if (!pl) throw std::invalid_argument(std::string(kName) + ": plan was not made by " + kName);
    check_attention_bwd_params(kName, pl->problem, a);
    if (!a.workspace) throw std::invalid_argument(std::string(kName) + ": params.workspace is null");
    if (!(layout_of(a) == pl->layout))
      throw std::invalid_argument(std::string(kName) + ": params' strides differ from the dense packed ones the "
                                  "plan's graph was built for");
    const auto s = static_cast<cudaStream_t>(stream);
    if (!pl->form.dense) derive_tables(*pl, a, s);
    if (pl->zero_dkdv) zero_dkdv(a, s);
    auto pack = variant_pack(*pl, a);
    std::lock_guard<std::mutex> lock(pl->graph->mu);
    set_stream(pl->handle->h, s);
    if (const fe::error_t e = pl->graph->graph.execute(pl->handle->h, pack, a.workspace); e.is_bad())
      throw std::runtime_error(std::string(kName) + ": cuDNN execute: " + e.err_msg);
  }
};

}  // namespace

std::unique_ptr<AttentionBwdKernel> make_cudnn_sdpa_backward() { return std::make_unique<CudnnSdpaBackward>(); }

}  // namespace attnbench
