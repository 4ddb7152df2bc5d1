// Timing of cuda.unified on the brief's target shapes (not a test): device time per call from CUDA events,
// after warm-up, median of 20; the stream is held by a spin kernel while samples are queued so events bracket
// only the kernels. hot = back-to-back; cold = L2 flushed before each sample (the flush outside the events).
// Usage: attnbench_gpu_bench [filter-substring]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/timing.hpp"
#include "gpu_case.hpp"

namespace attnbench::gputest {
namespace {

struct Bench {
  std::string name;
  AttentionProblem p;
  std::map<std::string, std::string> knobs;
  bool graph;
};

AttentionProblem prob(int b, int q, int kv, int h, int kvh, int d, bool causal = true, DType dt = DType::bf16) {
  AttentionProblem p;
  p.q_lens.assign(b, q);
  p.kv_lens.assign(b, kv);
  p.heads = h;
  p.kv_heads = kvh;
  p.head_size = d;
  p.causal = causal;
  p.types = AttentionTypes::all(dt);
  return p;
}

struct Timer {
  volatile int* flag_host = nullptr;
  int* flag_dev = nullptr;
  cuda::DeviceBuffer flush{256u << 20};
  Timer() {
    ATTNBENCH_CUDA_CHECK(cudaHostAlloc((void**)&flag_host, sizeof(int), cudaHostAllocMapped));
    ATTNBENCH_CUDA_CHECK(cudaHostGetDevicePointer((void**)&flag_dev, (void*)flag_host, 0));
  }
  ~Timer() { cudaFreeHost((void*)flag_host); }

  // Median device milliseconds of `n` samples of f().
  template <typename F>
  double median_ms(cudaStream_t s, int n, bool cold, F&& f) {
    std::vector<cuda::Event> ev(2 * n);
    *flag_host = 0;
    cuda::launch_hold_stream(flag_dev, 10000, s);
    for (int i = 0; i < n; ++i) {
      if (cold) cuda::launch_l2_flush(flush.data(), flush.bytes(), s);
      ev[2 * i].record(s);
      f();
      ev[2 * i + 1].record(s);
    }
    *flag_host = 1;
    std::vector<double> t(n);
    for (int i = 0; i < n; ++i) t[i] = cuda::Event::elapsed_ms(ev[2 * i], ev[2 * i + 1]);
    std::sort(t.begin(), t.end());
    return t[n / 2];
  }
};

void run_bench(const Bench& b, Timer& timer) {
  DeviceCase c(b.p, b.knobs, 42, BlockOrder::contiguous);
  cuda::Stream stream;
  const cudaStream_t s = stream.get();
  for (int i = 0; i < 3; ++i) c.run(s);  // warm-up (module load, smem attribute)
  stream.synchronize();
  const WorkModel w = attention_work(b.p);
  auto report = [&](const char* mode, double ms) {
    std::printf("%-44s %-6s %-34s %9.1f us %7.1f TFLOP/s %6.2f TB/s\n", b.name.c_str(), mode, c.plan->summary.c_str(),
                ms * 1e3, w.flops / (ms * 1e-3) / 1e12, w.bytes / (ms * 1e-3) / 1e12);
  };
  if (b.graph) {
    cuda::Graph g(s, [&] { c.run(s); });
    for (int i = 0; i < 3; ++i) g.replay(s);
    report("graph", timer.median_ms(s, 20, false, [&] { g.replay(s); }));
    report("g-cold", timer.median_ms(s, 20, true, [&] { g.replay(s); }));
  } else {
    report("eager", timer.median_ms(s, 20, false, [&] { c.run(s); }));
  }
  stream.synchronize();
}

}  // namespace
}  // namespace attnbench::gputest

int main(int argc, char** argv) {
  using namespace attnbench;
  using namespace attnbench::gputest;
  const std::string filter = argc > 1 ? argv[1] : "";
  // The narrow rows force ATTNBENCH_SM90_PATH=narrow (auto is wide for d128 prefill with TMA-able pages).
  const std::map<std::string, std::string> w4 = {{"ATTNBENCH_SM90_NARROW_WARPS", "4"}, {"ATTNBENCH_SM90_PATH", "narrow"}};
  const std::map<std::string, std::string> w8 = {{"ATTNBENCH_SM90_NARROW_WARPS", "8"}, {"ATTNBENCH_SM90_PATH", "narrow"}};
  const std::map<std::string, std::string> w4q = {
      {"ATTNBENCH_SM90_NARROW_WARPS", "4"}, {"ATTNBENCH_Q_MAJOR_GRID", "1"}, {"ATTNBENCH_SM90_PATH", "narrow"}};
  const std::map<std::string, std::string> w4r32 = {{"ATTNBENCH_SM90_NARROW_WARPS", "4x32"},
                                                    {"ATTNBENCH_SM90_PATH", "narrow"}};
  auto wide = [](const char* wgs) {
    return std::map<std::string, std::string>{{"ATTNBENCH_SM90_PATH", "wide"}, {"ATTNBENCH_SM90_FLASH_WIDE", wgs}};
  };
  auto splits = [](const char* n) { return std::map<std::string, std::string>{{"ATTNBENCH_3D_SPLITS", n}}; };
  auto bs32 = [](AttentionProblem p) {  // K/V in pages of 32 tokens: a TMA box per page on the wide kernel
    p.block_size = 32;
    return p;
  };
  auto gated = [](AttentionProblem p) {
    p.fusion.output_gate = true;
    return p;
  };
  auto wk = [](std::map<std::string, std::string> k) {
    k["ATTNBENCH_SM90_PATH"] = "wide";
    return k;
  };
  const auto pers = wk({{"ATTNBENCH_SM90_PERSISTENT", "1"}});
  const auto pst2 = wk({{"ATTNBENCH_SM90_PERSISTENT", "1"}, {"ATTNBENCH_SM90_STAGES", "2"}});
  const std::map<std::string, std::string> np = {{"ATTNBENCH_SM90_PERSISTENT", "0"}};
  auto ragged_short = [] {  // the short_prefill group's ragged batch
    AttentionProblem p = prob(3, 1, 1, 32, 8, 128);
    p.q_lens = {5, 129, 768};
    p.kv_lens = {18, 463, 768};
    return p;
  };
  std::vector<Bench> benches = {
      // wide v4: every head size, persistent CTAs, ring depth (filter "v4 ")
      {"v4 d128 causal S8192 H32 B1 wg2", prob(1, 8192, 8192, 32, 32, 128), wide("2"), false},
      {"v4 d128 causal S8192 H32 B1 wg2 persistent", prob(1, 8192, 8192, 32, 32, 128), pers, false},
      {"v4 d128 causal S8192 H32 B1 wg2 stages2", prob(1, 8192, 8192, 32, 32, 128),
       wk({{"ATTNBENCH_SM90_STAGES", "2"}}), false},
      {"v4 d128 causal S8192 H32 B1 wg2 graph", prob(1, 8192, 8192, 32, 32, 128), wide("2"), true},
      {"v4 d128 noncausal S16384 H16 B1 wg2", prob(1, 16384, 16384, 16, 16, 128, false), wide("2"), false},
      {"v4 d128 noncausal S16384 H16 B1 wg2 persistent", prob(1, 16384, 16384, 16, 16, 128, false), pers, false},
      {"v4 d128 gqa causal S8192 H64 KV8 wg2", prob(1, 8192, 8192, 64, 8, 128), wide("2"), false},
      {"v4 d128 gqa causal S8192 H64 KV8 wg2 persistent", prob(1, 8192, 8192, 64, 8, 128), pers, false},
      {"v4 d128 causal S2048 H32 KV32 B4 wg2", prob(4, 2048, 2048, 32, 32, 128), wide("2"), false},
      {"v4 d128 causal S2048 H32 KV32 B4 wg2 persistent", prob(4, 2048, 2048, 32, 32, 128), pers, false},
      {"v4 d64 causal S8192 H32 B2 narrow 8", prob(2, 8192, 8192, 32, 32, 64), w8, false},
      {"v4 d64 causal S8192 H32 B2 wg2", prob(2, 8192, 8192, 32, 32, 64), wide("2"), false},
      {"v4 d64 causal S8192 H32 B2 wg3", prob(2, 8192, 8192, 32, 32, 64), wide("3"), false},
      {"v4 d64 causal S8192 H32 B2 wg2 persistent", prob(2, 8192, 8192, 32, 32, 64), pers, false},
      {"v4 d64 causal S16384 H16 B1 wg2", prob(1, 16384, 16384, 16, 16, 64), wide("2"), false},
      {"v4 d64 short h16kv16 B32 S128 narrow 8", prob(32, 128, 128, 16, 16, 64), w8, true},
      {"v4 d64 short h16kv16 B32 S128 wg2", prob(32, 128, 128, 16, 16, 64), wide("2"), true},
      {"v4 d64 causal S256 H16 B32 narrow 8", prob(32, 256, 256, 16, 16, 64), w8, true},
      {"v4 d64 causal S256 H16 B32 wide", prob(32, 256, 256, 16, 16, 64), wk({}), true},
      {"v4 d64 causal S512 H16 B16 narrow 8", prob(16, 512, 512, 16, 16, 64), w8, true},
      {"v4 d64 causal S512 H16 B16 wide", prob(16, 512, 512, 16, 16, 64), wk({}), true},
      {"v4 d64 causal S1024 H16 B8 narrow 8", prob(8, 1024, 1024, 16, 16, 64), w8, false},
      {"v4 d64 causal S1024 H16 B8 wide", prob(8, 1024, 1024, 16, 16, 64), wk({}), false},
      {"v4 d256 causal S256 H32 KV2 B16 narrow 8", prob(16, 256, 256, 32, 2, 256), w8, true},
      {"v4 d256 causal S256 H32 KV2 B16 wide", prob(16, 256, 256, 32, 2, 256), wk({}), true},
      {"v4 d256 causal S1024 H32 KV2 B2 narrow 8", prob(2, 1024, 1024, 32, 2, 256), w8, false},
      {"v4 d256 causal S1024 H32 KV2 B2 wide", prob(2, 1024, 1024, 32, 2, 256), wk({}), false},
      {"v4 d256 causal S8192 H8 B2 narrow 8", prob(2, 8192, 8192, 8, 8, 256), w8, false},
      {"v4 d256 causal S8192 H8 B2 wg2", prob(2, 8192, 8192, 8, 8, 256), wide("2"), false},
      {"v4 d256 causal S8192 H8 B2 wg1", prob(2, 8192, 8192, 8, 8, 256), wide("1"), false},
      {"v4 d256 causal S8192 H8 B2 wg2 persistent", prob(2, 8192, 8192, 8, 8, 256), pers, false},
      {"v4 d256 gqa causal S8192 H32 KV2 wg2", prob(1, 8192, 8192, 32, 2, 256), wide("2"), false},
      {"v4 d256 gqa causal S8192 H32 KV2 wg2 gate", gated(prob(1, 8192, 8192, 32, 2, 256)), wide("2"), false},
      // wide v5: persistent CTAs loading the next unit's Q ahead (2 ring slots at d128), O rescaled under S
      {"v5 d128 causal S8192 H32 B1 persistent stages2", prob(1, 8192, 8192, 32, 32, 128), pst2, false},
      {"v5 d128 causal S8192 H32 B1 persistent stages3", prob(1, 8192, 8192, 32, 32, 128), pers, false},
      {"v5 d128 causal S8192 H32 B1 stages2", prob(1, 8192, 8192, 32, 32, 128), wk({{"ATTNBENCH_SM90_STAGES", "2"}}),
       false},
      {"v5 d128 noncausal S16384 H16 persistent stages2", prob(1, 16384, 16384, 16, 16, 128, false), pst2, false},
      {"v5 d128 gqa causal S8192 H64 KV8 persistent stages2", prob(1, 8192, 8192, 64, 8, 128), pst2, false},
      {"v5 d128 causal S2048 H32 KV32 B4 persistent stages2", prob(4, 2048, 2048, 32, 32, 128), pst2, false},
      {"v5 d128 causal S4096 H32 KV32 B2 auto", prob(2, 4096, 4096, 32, 32, 128), {}, false},
      {"v5 d128 causal S4096 H32 KV32 B2 persistent stages2", prob(2, 4096, 4096, 32, 32, 128), pst2, false},
      {"v5 short d128 h32kv8 B16 S256 wide", prob(16, 256, 256, 32, 8, 128), wk({}), true},
      {"v5 short d128 h32kv8 B16 S256 persistent", prob(16, 256, 256, 32, 8, 128), pers, true},
      {"v5 short d128 h32kv8 B16 S256 persistent stages2", prob(16, 256, 256, 32, 8, 128), pst2, true},
      {"v5 short d128 h32kv8 B8 S512 wide", prob(8, 512, 512, 32, 8, 128), wk({}), true},
      {"v5 short d128 h32kv8 B8 S512 persistent stages2", prob(8, 512, 512, 32, 8, 128), pst2, true},
      {"v5 short d128 h32kv8 B4 S768 wide", prob(4, 768, 768, 32, 8, 128), wk({}), true},
      {"v5 short d128 h32kv8 B4 S768 persistent stages2", prob(4, 768, 768, 32, 8, 128), pst2, true},
      {"v5 d64 causal S8192 H32 B2 wg3 persistent", prob(2, 8192, 8192, 32, 32, 64), pers, false},
      {"v5 d256 causal S8192 H8 B2 wg2 persistent", prob(2, 8192, 8192, 8, 8, 256), pers, false},
      // wide v6: auto (persistent for equal-length batches up to q 768, 2 slots + Q ahead at d128) vs one CTA per tile
      {"v6 short d128 h32kv8 B16 S256 auto", prob(16, 256, 256, 32, 8, 128), {}, true},
      {"v6 short d128 h32kv8 B16 S256 persistent 0", prob(16, 256, 256, 32, 8, 128), np, true},
      {"v6 short d128 h32kv8 ragged auto", ragged_short(), {}, true},
      {"v6 short d128 h32kv8 ragged persistent 1", ragged_short(), pers, true},
      {"v6 d256 h32kv2 B16 S256 auto", prob(16, 256, 256, 32, 2, 256), {}, true},
      {"v6 d256 h32kv2 B16 S256 persistent 0", prob(16, 256, 256, 32, 2, 256), np, true},
      {"v6 d64 h16 B16 S512 auto", prob(16, 512, 512, 16, 16, 64), {}, true},
      {"v6 d64 h16 B16 S512 persistent 0", prob(16, 512, 512, 16, 16, 64), np, true},
      {"v6 d128 causal S2048 H32 KV8 B4 auto", prob(4, 2048, 2048, 32, 8, 128), {}, false},
      {"v6 d128 causal S8192 H32 B1 auto", prob(1, 8192, 8192, 32, 32, 128), {}, false},
      {"v6 d128 noncausal S16384 H16 auto", prob(1, 16384, 16384, 16, 16, 128, false), {}, false},
      // wide v6 (rows "v7 "): rolled epilogue with 16-byte stores; GQA packing (auto vs forced packs)
      {"v7 short d128 h32kv8 B16 S256 auto", prob(16, 256, 256, 32, 8, 128), {}, true},
      {"v7 short d128 h32kv8 B8 S512 auto", prob(8, 512, 512, 32, 8, 128), {}, true},
      {"v7 short d128 h32kv8 B4 S768 auto", prob(4, 768, 768, 32, 8, 128), {}, true},
      {"v7 short d128 h32kv8 ragged auto", ragged_short(), {}, true},
      {"v7 short d128 h32kv8 ragged pack 1", ragged_short(), {{"ATTNBENCH_SM90_GQA_PACK", "1"}}, true},
      {"v7 short d128 h32kv8 B16 S256 pack 4", prob(16, 256, 256, 32, 8, 128), {{"ATTNBENCH_SM90_GQA_PACK", "4"}}, true},
      {"v7 chunked d128 h32kv8 B8 q64 kv4096 auto", prob(8, 64, 4096, 32, 8, 128), wk({}), true},
      {"v7 chunked d128 h32kv8 B8 q64 kv4096 pack 1", prob(8, 64, 4096, 32, 8, 128),
       wk({{"ATTNBENCH_SM90_GQA_PACK", "1"}}), true},
      {"v7 chunked d128 h32kv8 B8 q512 kv4096 auto", prob(8, 512, 4096, 32, 8, 128), {}, false},
      {"v7 d256 h32kv2 B16 S256 auto", prob(16, 256, 256, 32, 2, 256), {}, true},
      {"v7 d256 h32kv2 B16 S256 pack 1", prob(16, 256, 256, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "1"}}, true},
      {"v7 d256 h32kv2 B16 S256 pack 2", prob(16, 256, 256, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "2"}}, true},
      {"v7 d256 h32kv2 B16 S256 pack 4", prob(16, 256, 256, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "4"}}, true},
      {"v7 d256 h32kv2 B4 S1024 pack 1", prob(4, 1024, 1024, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "1"}}, false},
      {"v7 d256 h32kv2 B4 S1024 pack 2", prob(4, 1024, 1024, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "2"}}, false},
      {"v7 d128 h32kv8 B16 S256 pack 2", prob(16, 256, 256, 32, 8, 128), {{"ATTNBENCH_SM90_GQA_PACK", "2"}}, true},
      {"v7 chunked d128 h32kv8 B8 q64 kv4096 pack 4", prob(8, 64, 4096, 32, 8, 128),
       wk({{"ATTNBENCH_SM90_GQA_PACK", "4"}}), true},
      {"v7 d64 h16 B16 S512 auto", prob(16, 512, 512, 16, 16, 64), {}, true},
      {"v7 d128 causal S2048 H32 KV8 B4 auto", prob(4, 2048, 2048, 32, 8, 128), {}, false},
      {"v7 d128 causal S8192 H32 B1 auto", prob(1, 8192, 8192, 32, 32, 128), {}, false},
      {"v7 d128 noncausal S16384 H16 auto", prob(1, 16384, 16384, 16, 16, 128, false), {}, false},
      {"v7 d64 causal S8192 H32 B2 auto", prob(2, 8192, 8192, 32, 32, 64), {}, false},
      {"v7 d256 gqa causal S8192 H32 KV2 auto", prob(1, 8192, 8192, 32, 2, 256), {}, false},
      {"v7 d256 gqa causal S8192 H32 KV2 gate auto", gated(prob(1, 8192, 8192, 32, 2, 256)), {}, false},
      {"v7 d256 gqa causal S8192 H32 KV2 pack 1", prob(1, 8192, 8192, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "1"}},
       false},
      {"v7 d256 gqa causal S8192 H32 KV2 gate pack 1", gated(prob(1, 8192, 8192, 32, 2, 256)),
       {{"ATTNBENCH_SM90_GQA_PACK", "1"}}, false},
      {"v7 d256 gqa causal S2048 H32 KV2 auto", prob(1, 2048, 2048, 32, 2, 256), {}, false},
      {"v7 d256 gqa causal S2048 H32 KV2 pack 1", prob(1, 2048, 2048, 32, 2, 256), {{"ATTNBENCH_SM90_GQA_PACK", "1"}},
       false},
      // wide (wgmma) vs narrow in one process: the dispatch evidence for ATTNBENCH_SM90_PATH=auto
      {"wide d128 causal S8192 H32 B1 narrow 4x32", prob(1, 8192, 8192, 32, 32, 128), w4r32, false},
      {"wide d128 causal S8192 H32 B1 wide wg2", prob(1, 8192, 8192, 32, 32, 128), wide("2"), false},
      {"wide d128 causal S8192 H32 B1 wide wg1", prob(1, 8192, 8192, 32, 32, 128), wide("1"), false},
      {"wide d128 causal S8192 H32 B1 bs32 wide wg2", bs32(prob(1, 8192, 8192, 32, 32, 128)), wide("2"), false},
      {"wide d128 causal S8192 H32 B1 bs32 narrow 4x32", bs32(prob(1, 8192, 8192, 32, 32, 128)), w4r32, false},
      {"wide d128 causal S8192 H32 B1 wide wg2 again", prob(1, 8192, 8192, 32, 32, 128), wide("2"), false},
      {"wide d128 causal S8192 H32 B1 auto", prob(1, 8192, 8192, 32, 32, 128), {}, false},
      {"wide d128 causal S8192 H32 B1 narrow again", prob(1, 8192, 8192, 32, 32, 128), w4r32, false},
      {"wide d128 causal S8192 H32 B1 fp16 wide wg2", prob(1, 8192, 8192, 32, 32, 128, true, DType::f16), wide("2"),
       false},
      {"wide d128 causal S8192 H32 B1 gate wide wg2", gated(prob(1, 8192, 8192, 32, 32, 128)), wide("2"), false},
      {"wide d128 noncausal S16384 H16 narrow 4x32", prob(1, 16384, 16384, 16, 16, 128, false), w4r32, false},
      {"wide d128 noncausal S16384 H16 wide wg2", prob(1, 16384, 16384, 16, 16, 128, false), wide("2"), false},
      {"wide d128 noncausal S16384 H16 wide wg1", prob(1, 16384, 16384, 16, 16, 128, false), wide("1"), false},
      {"wide d128 gqa causal S8192 H64 KV8 narrow 4x32", prob(1, 8192, 8192, 64, 8, 128), w4r32, false},
      {"wide d128 gqa causal S8192 H64 KV8 wide wg2", prob(1, 8192, 8192, 64, 8, 128), wide("2"), false},
      {"wide d128 causal S2048 H32 KV8 B4 narrow 4x32", prob(4, 2048, 2048, 32, 8, 128), w4r32, false},
      {"wide d128 causal S2048 H32 KV8 B4 wide wg2", prob(4, 2048, 2048, 32, 8, 128), wide("2"), false},
      {"wide d128 causal S1024 H32 KV8 B8 narrow 4x32", prob(8, 1024, 1024, 32, 8, 128), w4r32, false},
      {"wide d128 causal S1024 H32 KV8 B8 wide wg2", prob(8, 1024, 1024, 32, 8, 128), wide("2"), false},
      {"wide d128 causal S512 H32 KV8 B16 narrow 4x32", prob(16, 512, 512, 32, 8, 128), w4r32, true},
      {"wide d128 causal S512 H32 KV8 B16 wide wg2", prob(16, 512, 512, 32, 8, 128), wide("2"), true},
      {"wide d128 short h32kv8 B16 S256 narrow", prob(16, 256, 256, 32, 8, 128), w4r32, true},
      {"wide d128 short h32kv8 B16 S256 wide wg2", prob(16, 256, 256, 32, 8, 128), wide("2"), true},
      {"wide d128 short h32kv8 B16 S128 narrow", prob(16, 128, 128, 32, 8, 128), w4r32, true},
      {"wide d128 short h32kv8 B16 S128 wide wg2", prob(16, 128, 128, 32, 8, 128), wide("2"), true},
      {"prefill d128 causal S8192 H32 B1 w4", prob(1, 8192, 8192, 32, 32, 128), w4, false},
      {"prefill d128 causal S8192 H32 B1 w8", prob(1, 8192, 8192, 32, 32, 128), w8, false},
      {"prefill d128 causal S8192 H32 B1 w4x32", prob(1, 8192, 8192, 32, 32, 128), w4r32, false},
      {"prefill d128 causal S8192 H32 B1 w8 again", prob(1, 8192, 8192, 32, 32, 128), w8, false},
      {"prefill d128 causal S8192 H32 B1 w4x32 again", prob(1, 8192, 8192, 32, 32, 128), w4r32, false},
      {"prefill d128 causal S8192 H32 B1 w8 gate", gated(prob(1, 8192, 8192, 32, 32, 128)), w8, false},
      {"prefill d128 causal S8192 H32 B1 w4 qmajor", prob(1, 8192, 8192, 32, 32, 128), w4q, false},
      {"prefill d128 causal S8192 H32 B1 fp16 w4", prob(1, 8192, 8192, 32, 32, 128, true, DType::f16), w4, false},
      {"prefill d128 causal S8192 H32 B1 fp16 w4x32", prob(1, 8192, 8192, 32, 32, 128, true, DType::f16), w4r32,
       false},
      {"prefill d128 noncausal S16384 H16 B1 w8", prob(1, 16384, 16384, 16, 16, 128, false), w8, false},
      {"prefill d128 noncausal S16384 H16 B1 w4x32", prob(1, 16384, 16384, 16, 16, 128, false), w4r32, false},
      {"prefill d64 causal S8192 H32 B2 w4", prob(2, 8192, 8192, 32, 32, 64), w4, false},
      {"prefill d64 causal S8192 H32 B2 w8", prob(2, 8192, 8192, 32, 32, 64), w8, false},
      {"prefill d64 causal S8192 H32 B2 w4x32", prob(2, 8192, 8192, 32, 32, 64), w4r32, false},
      {"prefill d256 causal S8192 H8 B2 w4", prob(2, 8192, 8192, 8, 8, 256), w4, false},
      {"prefill d256 causal S8192 H8 B2 w8", prob(2, 8192, 8192, 8, 8, 256), w8, false},
      {"short d128 h32kv8 B16 S256 w4", prob(16, 256, 256, 32, 8, 128), w4, true},
      {"decode d128 h32kv8 B1 kv4096", prob(1, 1, 4096, 32, 8, 128), {}, true},
      {"decode d128 h32kv8 B1 kv4096 s4", prob(1, 1, 4096, 32, 8, 128), splits("4"), true},
      {"decode d128 h32kv8 B1 kv4096 s8", prob(1, 1, 4096, 32, 8, 128), splits("8"), true},
      {"decode d128 h32kv8 B1 kv4096 s16", prob(1, 1, 4096, 32, 8, 128), splits("16"), true},
      {"decode d128 h32kv8 B1 kv4096 s32", prob(1, 1, 4096, 32, 8, 128), splits("32"), true},
      {"decode d128 h32kv8 B1 kv4096 gate", gated(prob(1, 1, 4096, 32, 8, 128)), {}, true},
      {"decode d128 h32kv8 B8 kv4096", prob(8, 1, 4096, 32, 8, 128), {}, true},
      {"decode d128 h32kv8 B32 kv8192", prob(32, 1, 8192, 32, 8, 128), {}, true},
      {"decode d128 h32kv8 B128 kv4096", prob(128, 1, 4096, 32, 8, 128), {}, true},
      {"decode d256 h32kv2 B32 kv8192", prob(32, 1, 8192, 32, 2, 256), {}, true},
  };
  try {
    Timer timer;
    for (const auto& b : benches)
      if (filter.empty() || b.name.find(filter) != std::string::npos) run_bench(b, timer);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
