#include "faulty_cuda_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include <cstdint>
#include <memory>
#include <string>

#include "attnbench/backends.hpp"

namespace attnbench::gputest {

namespace {
__device__ uint16_t g_saved;
__device__ int g_never;  // zero, and nothing writes it

__global__ void wild_write(uint16_t* out) { out[int64_t(1) << 40] = 1; }
__global__ void spin_forever() {
  while (*static_cast<volatile int*>(&g_never) == 0) __nanosleep(1000);
}
__global__ void trap_now() { __trap(); }
__global__ void set_element(uint16_t* out, int64_t i, uint16_t v) { out[i] = v; }
__global__ void save_element(const uint16_t* out, int64_t i) { g_saved = out[i]; }
__global__ void restore_element(uint16_t* out, int64_t i) { out[i] = g_saved; }

// Rows [first, first + n) of head `head` (of `heads`), each of d elements, times 0.95.
__global__ void scale_rows(uint16_t* out, int64_t first, int n, int head, int heads, int d, bool bf16) {
  for (int64_t i = threadIdx.x + blockIdx.x * int64_t(blockDim.x); i < int64_t(n) * d; i += gridDim.x * blockDim.x) {
    uint16_t& x = out[((first + i / d) * heads + head) * d + i % d];
    if (bf16) {
      const float v = __bfloat162float(__ushort_as_bfloat16(x)) * 0.95f;
      x = __bfloat16_as_ushort(__float2bfloat16(v));
    } else {
      x = __half_as_ushort(__float2half(__half2float(__ushort_as_half(x)) * 0.95f));
    }
  }
}

class FaultyCudaKernel final : public AttentionKernel {
 public:
  explicit FaultyCudaKernel(CudaFault f) : inner_(make_cuda_unified()), fault_(f) {}
  std::string name() const override { return std::string("test.cuda_fault_") + cuda_fault_name(fault_); }
  Backend backend() const override { return Backend::cuda; }
  Support supports(const AttentionProblem& p, const KnobValues& k) const override { return inner_->supports(p, k); }
  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& k) const override {
    return inner_->plan(p, k);
  }
  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    auto s = static_cast<cudaStream_t>(stream);
    auto* out = static_cast<uint16_t*>(a.out);
    const int64_t last = a.total_q * a.heads * a.head_size - 1;
    if (fault_ == CudaFault::unwritten_element) save_element<<<1, 1, 0, s>>>(out, last);
    inner_->run(plan, a, stream);
    switch (fault_) {
      case CudaFault::oob_write: wild_write<<<1, 1, 0, s>>>(out); break;
      case CudaFault::spin: spin_forever<<<1, 1, 0, s>>>(); break;
      case CudaFault::trap: trap_now<<<1, 1, 0, s>>>(); break;
      case CudaFault::nan_element: set_element<<<1, 1, 0, s>>>(out, last / 2, 0x7FFF); break;
      case CudaFault::unwritten_element: restore_element<<<1, 1, 0, s>>>(out, last); break;
    }
  }

 private:
  std::shared_ptr<const AttentionKernel> inner_;
  CudaFault fault_;
};
// cuda.unified's plan and the unit its output spoils: rows [first, first + n) under `head`.
struct LocalFaultPlan final : AttentionPlan {
  std::unique_ptr<AttentionPlan> inner;
  int64_t first = 0;
  int n = 0, head = 0;
};

// cuda.unified with one unit of its output wrong (local_fault_entries).
class LocalFaultKernel final : public AttentionKernel {
 public:
  explicit LocalFaultKernel(bool tile) : inner_(make_cuda_unified()), tile_(tile) {}
  std::string name() const override { return tile_ ? "test.cuda_wrong_tile" : "test.cuda_wrong_head"; }
  Backend backend() const override { return Backend::cuda; }
  Support supports(const AttentionProblem& p, const KnobValues& k) const override { return inner_->supports(p, k); }
  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& k) const override {
    auto plan = std::make_unique<LocalFaultPlan>();
    plan->inner = inner_->plan(p, k);
    plan->workspace_bytes = plan->inner->workspace_bytes;
    plan->graph_replay = plan->inner->graph_replay;
    plan->summary = plan->inner->summary;
    const int longest = static_cast<int>(std::max_element(p.q_lens.begin(), p.q_lens.end()) - p.q_lens.begin());
    const int s = tile_ ? longest : p.num_seqs() / 2;
    for (int i = 0; i < s; ++i) plan->first += p.q_lens[i];
    plan->n = p.q_lens[s];
    plan->head = tile_ ? p.heads - 1 : p.heads / 2;
    if (tile_) {  // the sequence's middle 64-row tile
      const int tile = ((p.q_lens[s] + 63) / 64) / 2;
      plan->first += tile * 64;
      plan->n = std::min(64, p.q_lens[s] - tile * 64);
    }
    return plan;
  }
  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    const auto& lp = static_cast<const LocalFaultPlan&>(plan);
    inner_->run(*lp.inner, a, stream);
    scale_rows<<<64, 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<uint16_t*>(a.out), lp.first, lp.n,
                                                                  lp.head, a.heads, a.head_size,
                                                                  a.types.o == DType::bf16);
  }

 private:
  std::shared_ptr<const AttentionKernel> inner_;
  bool tile_;
};

}  // namespace

const char* cuda_fault_name(CudaFault f) {
  switch (f) {
    case CudaFault::oob_write: return "oob_write";
    case CudaFault::spin: return "spin";
    case CudaFault::trap: return "trap";
    case CudaFault::nan_element: return "nan_element";
    case CudaFault::unwritten_element: return "unwritten_element";
  }
  return "?";
}

std::vector<KernelEntry> faulty_cuda_entries() {
  std::vector<KernelEntry> out;
  for (CudaFault f : {CudaFault::oob_write, CudaFault::spin, CudaFault::trap, CudaFault::nan_element,
                      CudaFault::unwritten_element}) {
    auto k = std::make_shared<FaultyCudaKernel>(f);
    out.push_back({Op::attention, k, k->name(), Backend::cuda, "test-only faulty CUDA kernel", nullptr});
  }
  return out;
}

std::vector<KernelEntry> local_fault_entries() {
  std::vector<KernelEntry> out;
  for (bool tile : {true, false}) {
    auto k = std::make_shared<LocalFaultKernel>(tile);
    out.push_back({Op::attention, k, k->name(), Backend::cuda, "test-only local defect", nullptr});
  }
  return out;
}

}  // namespace attnbench::gputest
