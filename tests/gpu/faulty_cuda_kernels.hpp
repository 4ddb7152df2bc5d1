// Test-only faulty CUDA kernels (the GPU fault-isolation test's alone): cuda.unified with one fault each, launched
// on the call's stream: a wild write (a sticky illegal-address error), a kernel that spins forever, a trap (a
// sticky launch failure), a NaN written into one element, one element left as the harness's poison.
#pragma once
#include <vector>

#include "registry.hpp"

namespace attnbench::gputest {

enum class CudaFault { oob_write, spin, trap, nan_element, unwritten_element };
const char* cuda_fault_name(CudaFault f);
std::vector<KernelEntry> faulty_cuda_entries();

}  // namespace attnbench::gputest
