#include "faulty_cuda_kernels.hpp"

#include <cuda_runtime.h>

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

}  // namespace attnbench::gputest
