// Shared by the GPU tests and the timing executable: one problem's inputs on the device, the cuda.unified plan,
// its workspace, and a poisoned output; run() enqueues one call.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "attnbench/backends.hpp"
#include "cases/inputs.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::gputest {

// Fused: Q, K and V are read in place from one projection-output-like buffer, each token row
// [Q heads | GATE heads | K heads | V heads] (N = (2 h + 2 h_kv) d elements, the gated block's layout): q/kv
// token strides N, kv_stride_block = block_size * N; rows past the real Q tokens hold NaN. The output gets padded
// strides (o_stride_head = d + 8, o_stride_token = h (d + 8) + 16). Gate: problem.output_gate, params.epilogue.gate reads
// the GATE columns (fused) or a [total_q, h, d] buffer, seeded values in [-4, 4]; gate_pad pads that buffer's
// token rows by 2 elements, so its rows are only 4-byte aligned (the kernels' narrow gate loads).
// pool_blocks > 0: K and V live in device caches of that many blocks (not fused), the case's blocks at seeded
// distinct places across them (the pool's last block among them), every other byte 0x41 (large finite values); the
// device table names the places, the host copy the reference reads keeps the compact ids.
struct CaseLayout {
  bool fused = false;
  bool gate = false;
  bool gate_pad = false;
  int64_t pool_blocks = 0;
};

template <class T>
std::size_t byte_size(const std::vector<T>& v) { return v.size() * sizeof(T); }
inline std::size_t byte_size(const HostTensor& t) { return t.bytes(); }

struct DeviceCase {
  HostInputs host;
  CaseLayout layout;
  std::vector<uint16_t> gate_host;  // fused: the whole fused buffer; else [total_q, h, d]
  int64_t gate_off = 0, gate_st = 0, gate_sh = 0;  // gate element (t, h, d) at gate_host[off + t st + h sh + d]
  std::vector<int32_t> device_table;  // the pool's places (pool_blocks > 0), else empty: host.block_table
  cuda::DeviceBuffer q, k, v, cu, used, table, out, workspace, fused, gate, alibi, sinks, qq_bias, lse;
  std::unique_ptr<AttentionKernel> kernel = make_cuda_unified();
  std::unique_ptr<AttentionPlan> plan;
  AttentionParams params;

  DeviceCase(const AttentionProblem& p0, const std::map<std::string, std::string>& knobs, uint64_t seed,
             BlockOrder order = BlockOrder::shuffled, CaseLayout lay = {})
      : host(build_inputs(with_gate(p0, lay.gate || p0.fusion.output_gate), seed, order)),
        layout{lay.fused, lay.gate || p0.fusion.output_gate, lay.gate_pad} {
    lay = layout;
    const AttentionProblem& p = host.problem;
    auto up = [](cuda::DeviceBuffer& b, const auto& vec) {
      const std::size_t n = byte_size(vec);
      b = cuda::DeviceBuffer(n);
      b.upload(vec.data(), n);
    };
    params = host.params();
    const int64_t h = p.heads, hk = p.kv_heads, d = p.head_size, tq = p.total_q();
    std::mt19937_64 rng(seed ^ 0x9a7e);
    std::uniform_real_distribution<float> ug(-4.f, 4.f);
    if (lay.fused) {
      const int64_t n = (2 * h + 2 * hk) * d;
      const int64_t cache_rows = host.num_blocks * p.block_size;
      const int64_t rows = std::max(tq, cache_rows);
      std::vector<uint16_t> f(static_cast<std::size_t>(rows * n), 0xFFFF);  // NaN where nothing belongs
      for (int64_t t = 0; t < tq; ++t)
        for (int64_t i = 0; i < h * d; ++i) {
          f[t * n + i] = host.q.halves()[t * h * d + i];
          f[t * n + h * d + i] = float_to_half(ug(rng), p.types.q);
        }
      for (int64_t t = 0; t < cache_rows; ++t)
        for (int64_t i = 0; i < hk * d; ++i) {
          f[t * n + 2 * h * d + i] = host.k_cache.halves()[t * hk * d + i];
          f[t * n + (2 * h + hk) * d + i] = host.v_cache.halves()[t * hk * d + i];
        }
      up(fused, f);
      const uint16_t* base = static_cast<const uint16_t*>(fused.data());
      params.q = base;
      params.k_cache = base + 2 * h * d;
      params.v_cache = base + (2 * h + hk) * d;
      params.q_stride_token = n;
      params.q_stride_head = d;
      params.kv_stride_block = n * p.block_size;
      params.kv_stride_token = n;
      params.kv_stride_head = d;
      params.o_stride_head = d + 8;
      params.o_stride_token = h * (d + 8) + 16;
      if (lay.gate) {
        params.epilogue.gate = base + h * d;
        gate_off = h * d;
        gate_st = n;
        gate_sh = d;
        gate_host = std::move(f);
      }
    } else {
      up(q, host.q);
      if (lay.pool_blocks > 0) {
        device_table = place_in_pool(lay.pool_blocks, seed);
      } else {
        up(k, host.k_cache);
        up(v, host.v_cache);
      }
      params.q = q.data();
      params.k_cache = k.data();
      params.v_cache = v.data();
      if (lay.gate) {
        gate_st = h * d + (lay.gate_pad ? 2 : 0);
        gate_sh = d;
        gate_host.resize(static_cast<std::size_t>(tq * gate_st));
        for (auto& g : gate_host) g = float_to_half(ug(rng), p.types.q);
        up(gate, gate_host);
        params.epilogue.gate = gate.data();
      }
    }
    const AttentionFeatures& f = p.features;  // the feature lists in device memory, null where absent
    for (auto [buf, src, dst] : {std::tuple{&alibi, &f.alibi_slopes, &params.features.alibi_slopes},
                                 {&sinks, &f.sinks, &params.features.sinks},
                                 {&qq_bias, &f.qq_bias, &params.features.qq_bias}})
      if (!src->empty()) {
        up(*buf, *src);
        *dst = static_cast<const float*>(buf->data());
      }
    params.epilogue.gate_stride_token = gate_st;
    params.epilogue.gate_stride_head = gate_sh;
    up(cu, host.cu_seqlens_q);
    up(used, host.seqused_k);
    up(table, device_table.empty() ? host.block_table : device_table);
    out = cuda::DeviceBuffer(out_elems() * 2);
    plan = kernel->plan(p, KnobValues::resolve(knobs, /*read_env=*/false));
    workspace = cuda::DeviceBuffer(plan->workspace_bytes);
    params.out = out.data();
    params.cu_seqlens_q = static_cast<const int32_t*>(cu.data());
    params.seqused_k = static_cast<const int32_t*>(used.data());
    params.block_table = static_cast<const int32_t*>(table.data());
    params.workspace = workspace.data();
    if (p.return_lse) {  // [total_q, heads], make_attention_params' strides
      lse = cuda::DeviceBuffer(static_cast<std::size_t>(tq) * h * sizeof(float));
      params.lse = static_cast<float*>(lse.data());
    }
  }
  // Every row's LSE (return_lse), [total_q, heads].
  std::vector<float> lse_values() const {
    std::vector<float> v(lse.bytes() / sizeof(float));
    if (!v.empty()) lse.download(v.data(), lse.bytes());
    return v;
  }
  // Uploads each compact block to its place in the pool; returns the table of places.
  std::vector<int32_t> place_in_pool(int64_t pool_blocks, uint64_t seed) {
    const AttentionProblem& p = host.problem;
    if (pool_blocks < host.num_blocks || pool_blocks > INT32_MAX) throw std::invalid_argument("pool_blocks");
    const std::size_t block_bytes =
        static_cast<std::size_t>(p.block_size) * p.kv_heads * p.head_size * dtype_bytes(p.types.kv);
    std::mt19937_64 rng(seed ^ 0x5eedull);
    std::vector<int32_t> place(host.num_blocks);
    std::set<int64_t> taken = {pool_blocks - 1};
    place[0] = static_cast<int32_t>(pool_blocks - 1);  // block 0 is a sequence's (the sentinel is the last)
    for (std::size_t b = 1; b < place.size(); ++b) {
      int64_t x;
      do x = static_cast<int64_t>(rng() % static_cast<uint64_t>(pool_blocks));
      while (!taken.insert(x).second);
      place[b] = static_cast<int32_t>(x);
    }
    k = cuda::DeviceBuffer(static_cast<std::size_t>(pool_blocks) * block_bytes);
    v = cuda::DeviceBuffer(k.bytes());
    k.fill_byte(0x41);
    v.fill_byte(0x41);
    const auto* hk = static_cast<const char*>(host.k_cache.data());
    const auto* hv = static_cast<const char*>(host.v_cache.data());
    for (std::size_t b = 0; b < place.size(); ++b) {
      k.upload(hk + b * block_bytes, block_bytes, static_cast<std::size_t>(place[b]) * block_bytes);
      v.upload(hv + b * block_bytes, block_bytes, static_cast<std::size_t>(place[b]) * block_bytes);
    }
    std::vector<int32_t> t = host.block_table;
    for (auto& e : t) e = place[e];
    return t;
  }
  static AttentionProblem with_gate(AttentionProblem p, bool gate) {
    p.fusion.output_gate = gate;
    return p;
  }
  // Output buffer elements (padded strides included) and the index of (token, head, d) in it.
  std::size_t out_elems() const { return static_cast<std::size_t>(host.problem.total_q() * params.o_stride_token); }
  std::size_t out_index(int64_t token, int head, int d) const {
    return static_cast<std::size_t>(token * params.o_stride_token + head * params.o_stride_head + d);
  }
  // sigmoid(gate) of (token, head, d) as the kernel should apply it (1 without a gate).
  float gate_factor(int64_t token, int head, int d) const {
    if (!layout.gate) return 1.f;
    const float g = half_to_float(
        gate_host[static_cast<std::size_t>(gate_off + token * gate_st + head * gate_sh + d)], host.problem.types.q);
    return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(g))));
  }
  void poison() {  // 0xFFFF is NaN in fp16 and bf16, 0xFFFFFFFF in fp32
    out.fill_byte(0xFF);
    if (lse.bytes()) lse.fill_byte(0xFF);
  }
  void run(cudaStream_t s) const { kernel->run(*plan, params, s); }
};

}  // namespace attnbench::gputest
