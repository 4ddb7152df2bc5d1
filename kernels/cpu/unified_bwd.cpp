// cpu.unified_bwd: the attention backward on the host, tiled as the GPU backward is. D = rowsum(dO o O) first; then
// one pass over (sequence, kv head, 64-key tile) items, each recomputing P = exp(S - LSE) for every query tile of
// the group that sees its keys and accumulating its tile's dK and dV (P and dS rounded to the dtype before their
// products, as a 16-bit matmul takes them); then one pass over (sequence, head, 64-row query tile) items summing
// dQ over the key tiles in fp32. The second pass recomputes S and dP instead of adding dQ atomically: the host has
// no fp32 atomics worth having, and the sum stays in one order.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnbench/attention_bwd.hpp"
#include "common/device/visibility.hpp"
#include "cpu/gemm.hpp"
#include "cpu/work_limit.hpp"

namespace attnbench {
namespace {

using cpu::gemm;
constexpr int kTile = 64;  // query rows and keys per tile
constexpr int kR = 4, kNB = 8;


// One (query tile, key tile) pair of one head: scores, P, dP and dS in fp32 (tile-major, kTile x kTile).
struct PairTile {
  float q[kTile * 512], d_o[kTile * 512];  // query rows (fp32 of the stored values)
  float kt[512 * kTile], vt[512 * kTile];  // keys transposed: [head_size, kTile]
  float k[kTile * 512];                    // keys, row-major
  float s[kTile * kTile], dp[kTile * kTile], ds[kTile * kTile];
};

struct Ctx {
  const AttentionBwdParams& a;
  const float* dsum;  // D, [total_q, heads]
  int group;

  float load(const void* t, int64_t i) const { return half_to_float(static_cast<const uint16_t*>(t)[i], a.dtype); }
  float round(float x) const { return half_to_float(float_to_half(x, a.dtype), a.dtype); }

  // rows [r0, r0 + n) of head h of a q-side tensor into dst (n x d, zero past n).
  void rows(const void* t, int64_t r0, int n, int h, int64_t st_tok, int64_t st_head, float* dst) const {
    const int d = a.head_size;
    for (int r = 0; r < kTile; ++r)
      for (int c = 0; c < d; ++c) dst[r * d + c] = r < n ? load(t, (r0 + r) * st_tok + h * st_head + c) : 0.f;
  }
  void keys(PairTile& w, int64_t k0, int n, int g) const {
    const int d = a.head_size;
    rows(a.k, k0, n, g, a.k_stride_token, a.k_stride_head, w.k);
    for (int r = 0; r < kTile; ++r)
      for (int c = 0; c < d; ++c) {
        w.kt[c * kTile + r] = w.k[r * d + c];
        w.vt[c * kTile + r] = r < n ? load(a.v, (k0 + r) * a.k_stride_token + g * a.k_stride_head + c) : 0.f;
      }
  }

  // S, P (into s), dP and dS of query rows [i0, i0 + nq) of head h against keys [j0, j0 + nk) already in w.
  void scores(PairTile& w, const device::Visibility& vis, int64_t q0, int i0, int nq, int j0, int nk, int h) const {
    const int d = a.head_size;
    gemm<kR, kNB, false>(kTile, kTile, d, w.q, d, 1, w.kt, kTile, w.s, kTile);
    gemm<kR, kNB, false>(kTile, kTile, d, w.d_o, d, 1, w.vt, kTile, w.dp, kTile);
    for (int r = 0; r < kTile; ++r) {
      const bool row = r < nq;
      const int64_t tok = q0 + i0 + r;
      const float lse = row ? a.lse[tok * a.heads + h] : 0.f, D = row ? dsum[tok * a.heads + h] : 0.f;
      for (int c = 0; c < kTile; ++c) {
        float x = w.s[r * kTile + c] * a.scale, capd = 1.f;
        if (a.softcap > 0.f) {
          const float t = std::tanh(x / a.softcap);
          x = a.softcap * t;
          capd = 1.f - t * t;
        }
        const bool on = row && c < nk && vis.visible(i0 + r, j0 + c);
        const float p = on ? std::exp(x - lse) : 0.f;
        w.s[r * kTile + c] = round(p);
        w.ds[r * kTile + c] = round(p * (w.dp[r * kTile + c] - D) * capd);
      }
    }
  }
};

device::Visibility visibility(const AttentionBwdParams& a, int q_len, int kv_len) {
  return device::Visibility(q_len, kv_len, a.causal, a.top_left, a.window_left, a.window_right);
}

void preprocess(const AttentionBwdParams& a, float* dsum) {
  const int64_t rows = a.total_q * a.heads;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r / a.heads) * a.q_stride_token + (r % a.heads) * a.q_stride_head;
    float acc = 0.f;
    for (int c = 0; c < a.head_size; ++c)
      acc += half_to_float(static_cast<const uint16_t*>(a.o)[base + c], a.dtype) *
             half_to_float(static_cast<const uint16_t*>(a.d_o)[base + c], a.dtype);
    dsum[r] = acc;
  }
}

void write_rows(const AttentionBwdParams& a, void* t, int64_t r0, int n, int h, int64_t st_tok, int64_t st_head,
                const float* src) {
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < a.head_size; ++c)
      static_cast<uint16_t*>(t)[(r0 + r) * st_tok + h * st_head + c] = float_to_half(src[r * a.head_size + c], a.dtype);
}

// dK, dV of keys [j0, j0 + nk) of kv head g of sequence s.
void key_tile(const Ctx& x, PairTile& w, int s, int g, int j0, std::vector<float>& dk, std::vector<float>& dv) {
  const AttentionBwdParams& a = x.a;
  const int64_t q0 = a.cu_seqlens_q[s], k0 = a.cu_seqlens_k[s];
  const int q_len = a.cu_seqlens_q[s + 1] - q0, kv_len = a.cu_seqlens_k[s + 1] - k0, d = a.head_size;
  const int nk = std::min(kTile, kv_len - j0);
  const device::Visibility vis = visibility(a, q_len, kv_len);
  std::fill(dk.begin(), dk.end(), 0.f);
  std::fill(dv.begin(), dv.end(), 0.f);
  x.keys(w, k0 + j0, nk, g);
  for (int h = g * x.group; h < (g + 1) * x.group; ++h)
    for (int i0 = 0; i0 < q_len; i0 += kTile) {
      const int nq = std::min(kTile, q_len - i0);
      if (vis.tile_fully_masked(j0, j0 + nk, i0, i0 + nq - 1)) continue;
      x.rows(a.q, q0 + i0, nq, h, a.q_stride_token, a.q_stride_head, w.q);
      x.rows(a.d_o, q0 + i0, nq, h, a.q_stride_token, a.q_stride_head, w.d_o);
      x.scores(w, vis, q0, i0, nq, j0, nk, h);
      gemm<kR, kNB, true>(kTile, d, kTile, w.s, 1, kTile, w.d_o, d, dv.data(), d);   // dV += P^T dO
      gemm<kR, kNB, true>(kTile, d, kTile, w.ds, 1, kTile, w.q, d, dk.data(), d);    // dK += dS^T Q
    }
  for (float& v : dk) v *= a.scale;
  write_rows(a, a.dk, k0 + j0, nk, g, a.k_stride_token, a.k_stride_head, dk.data());
  write_rows(a, a.dv, k0 + j0, nk, g, a.k_stride_token, a.k_stride_head, dv.data());
}

// dQ of query rows [i0, i0 + nq) of head h of sequence s.
void query_tile(const Ctx& x, PairTile& w, int s, int h, int i0, std::vector<float>& dq) {
  const AttentionBwdParams& a = x.a;
  const int64_t q0 = a.cu_seqlens_q[s], k0 = a.cu_seqlens_k[s];
  const int q_len = a.cu_seqlens_q[s + 1] - q0, kv_len = a.cu_seqlens_k[s + 1] - k0, d = a.head_size;
  const int nq = std::min(kTile, q_len - i0), g = h / x.group;
  const device::Visibility vis = visibility(a, q_len, kv_len);
  std::fill(dq.begin(), dq.end(), 0.f);
  x.rows(a.q, q0 + i0, nq, h, a.q_stride_token, a.q_stride_head, w.q);
  x.rows(a.d_o, q0 + i0, nq, h, a.q_stride_token, a.q_stride_head, w.d_o);
  for (int j0 = 0; j0 < kv_len; j0 += kTile) {
    const int nk = std::min(kTile, kv_len - j0);
    if (vis.tile_fully_masked(j0, j0 + nk, i0, i0 + nq - 1)) continue;
    x.keys(w, k0 + j0, nk, g);
    x.scores(w, vis, q0, i0, nq, j0, nk, h);
    gemm<kR, kNB, true>(kTile, d, kTile, w.ds, kTile, 1, w.k, d, dq.data(), d);  // dQ += dS K
  }
  for (float& v : dq) v *= a.scale;
  write_rows(a, a.dq, q0 + i0, nq, h, a.q_stride_token, a.q_stride_head, dq.data());
}

struct Item {
  int seq, head, tile;
};

// One thread's buffers: a pair tile and two fp32 accumulators of 64 rows.
struct ThreadScratch {
  PairTile tile;
  std::vector<float> acc1, acc2;
};

// The work items (key tiles, then query tiles) and every thread's scratch, made once: run() allocates nothing.
struct BwdPlan final : AttentionBwdPlan {
  AttentionProblem problem;
  std::vector<Item> keys, queries;
  mutable std::vector<std::unique_ptr<ThreadScratch>> scratch;  // one per thread, written only by run()
};

void make_items(const AttentionProblem& p, BwdPlan& pl) {
  for (int s = 0; s < p.num_seqs(); ++s) {
    for (int g = 0; g < p.kv_heads; ++g)
      for (int j0 = 0; j0 < p.kv_lens[s]; j0 += kTile) pl.keys.push_back({s, g, j0});
    for (int h = 0; h < p.heads; ++h)
      for (int i0 = 0; i0 < p.q_lens[s]; i0 += kTile) pl.queries.push_back({s, h, i0});
  }
}

void run_bwd(const BwdPlan& pl, const AttentionBwdParams& a) {
  float* dsum = static_cast<float*>(a.workspace);
  preprocess(a, dsum);
  const Ctx x{a, dsum, a.heads / a.kv_heads};
  const int threads = static_cast<int>(pl.scratch.size());
#pragma omp parallel num_threads(threads)
  {
    ThreadScratch& t = *pl.scratch[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
    for (std::size_t i = 0; i < pl.keys.size(); ++i)
      key_tile(x, t.tile, pl.keys[i].seq, pl.keys[i].head, pl.keys[i].tile, t.acc1, t.acc2);
#pragma omp for schedule(dynamic, 1)
    for (std::size_t i = 0; i < pl.queries.size(); ++i)
      query_tile(x, t.tile, pl.queries[i].seq, pl.queries[i].head, pl.queries[i].tile, t.acc1);
  }
}

class CpuUnifiedBwd final : public AttentionBwdKernel {
 public:
  std::string name() const override { return "cpu.unified_bwd"; }
  Backend backend() const override { return Backend::cpu; }

  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    if (const std::string why = attention_bwd_conflict(p); !why.empty()) return Support::no(why);
    if (p.head_size % 8 != 0 || p.head_size > 512)
      return Support::no("head_size " + std::to_string(p.head_size) + " is not a multiple of 8 in [8, 512]");
    const std::string over = cpu::over_work_limit(attention_bwd_work(p).flops, knobs);
    return over.empty() ? Support::yes() : Support::no("problem " + over);
  }

  std::unique_ptr<AttentionBwdPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = supports(p, knobs);
    if (!s.ok) throw std::invalid_argument("cpu.unified_bwd declines: " + s.reason);
    auto pl = std::make_unique<BwdPlan>();
    pl->problem = p;
    make_items(p, *pl);
    const std::size_t acc = static_cast<std::size_t>(kTile) * p.head_size;
    for (int t = 0; t < omp_get_max_threads(); ++t) {
      auto scratch = std::make_unique<ThreadScratch>();
      scratch->acc1.assign(acc, 0.f);
      scratch->acc2.assign(acc, 0.f);
      pl->scratch.push_back(std::move(scratch));
    }
    pl->workspace_bytes = static_cast<std::size_t>(p.total_q()) * p.heads * sizeof(float);
    pl->summary = "tiles " + std::to_string(kTile) + "x" + std::to_string(kTile) + " threads " +
                  std::to_string(omp_get_max_threads());
    return pl;
  }

  void run(const AttentionBwdPlan& plan, const AttentionBwdParams& a, void* /*stream*/) const override {
    const auto* pl = dynamic_cast<const BwdPlan*>(&plan);
    if (!pl) throw std::invalid_argument("cpu.unified_bwd: plan was not made by cpu.unified_bwd");
    check_attention_bwd_params("cpu.unified_bwd", pl->problem, a);
    if (!a.workspace) throw std::invalid_argument("cpu.unified_bwd: params.workspace is null");
    run_bwd(*pl, a);
  }
};

}  // namespace

std::unique_ptr<AttentionBwdKernel> make_cpu_unified_bwd() { return std::make_unique<CpuUnifiedBwd>(); }

}  // namespace attnbench
