// autotune: every candidate of a graph timed on inputs of the problem's shape (values constant, lengths and
// tables as the harness makes them), on a stream of its own behind a held stream, and the fastest kept.
#include "attnbench/gpu_runtime.hpp"
#include "cuda/runtime.hpp"
#include "cudnn/derived.hpp"
#include "cudnn/graph.hpp"

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

namespace attnbench::cudnn {
namespace {

constexpr int kWarmups = 3, kTimed = 10;  // autotune's executions per candidate
constexpr int kHoldMs = 200;              // the hold while autotune queues one candidate's timed executions

// Elements from a tensor's first to its last, by its strides: what a buffer on layout l must hold.
int64_t span(std::initializer_list<std::pair<int64_t, int64_t>> extent_stride) {
  int64_t last = 0;
  for (const auto& [n, st] : extent_stride) last += (n - 1) * st;
  return last + 1;
}

// Device inputs of p's shape on layout l for autotune: the lengths and a contiguous block table (unused slots on
// the spare block) as the harness makes them, an FP8 graph's scalars as run() writes them; the values are a
// constant, since the engines' speed does not depend on them.
struct TimingInputs {
  cuda::DeviceBuffer q, k, v, o, seq_len_q, seq_len_kv, table, q_offsets, o_offsets, fp8, workspace;
  std::unordered_map<int64_t, void*> pack;

  TimingInputs(const AttentionProblem& p, const Layout& l, const BuiltGraph& g, std::size_t workspace_bytes) {
    const bool ragged = g.ragged;
    const int64_t o_token = g.fp8 ? fp8_o_token_stride(p) : l.o_token;
    const int64_t d = p.head_size, n = p.num_seqs();
    const int64_t q_elems = span({{p.total_q(), l.q_token}, {p.heads, l.q_head}, {d, 1}});
    const int64_t o_elems = span({{p.total_q(), l.o_token}, {p.heads, l.o_head}, {d, 1}});
    const int64_t kv_elems =
        span({{container_blocks(p, l), l.kv_block}, {p.block_size, l.kv_token}, {p.kv_heads, l.kv_head}, {d, 1}});
    using Fill = std::pair<cuda::DeviceBuffer*, int64_t>;
    for (const Fill& f : {Fill{&q, q_elems}, Fill{&k, kv_elems}, Fill{&v, kv_elems}, Fill{&o, o_elems}}) {
      *f.first = cuda::DeviceBuffer(static_cast<std::size_t>(f.second) * 2);
      f.first->fill_byte(0x3C);  // 1.06 in fp16, 0.0115 in bf16, 1.5 in e4m3: finite, the same for every candidate
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
    for (int i = 0; i <= n; ++i) cudnn::derive_entry(cu.data(), static_cast<int>(n), i, l.q_token, o_token, host);
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
    if (g.fp8) {
      const cudnn::Fp8Scalars scalars = cudnn::fp8_scalars_of(p);
      fp8 = cuda::DeviceBuffer(sizeof scalars);
      fp8.upload(&scalars, sizeof scalars);
    }
    workspace = cuda::DeviceBuffer(std::max<std::size_t>(workspace_bytes, 256));
    pack = variant_pack({q.data(), k.data(), v.data(), o.data(), static_cast<int32_t*>(seq_len_q.data()),
                         static_cast<const int32_t*>(seq_len_kv.data()), static_cast<const int32_t*>(table.data()),
                         static_cast<int32_t*>(q_offsets.data()), static_cast<int32_t*>(o_offsets.data()), nullptr,
                         static_cast<float*>(fp8.data())},
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
  TimingInputs in(p, g.layout, g, ws);
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

}  // namespace

const Tuning& tuned(const BuiltGraph& g, const AttentionProblem& p, cudnnHandle_t h) {
  std::lock_guard<std::mutex> lock(g.tune_mu);
  if (!g.tuning) g.tuning = autotune(g, p, h);
  return *g.tuning;
}

}  // namespace attnbench::cudnn
