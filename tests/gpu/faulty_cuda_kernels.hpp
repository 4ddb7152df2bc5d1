// Test-only faulty CUDA kernels (the GPU fault-isolation test's alone): cuda.unified with one fault each, launched
// on the call's stream: a wild write (a sticky illegal-address error), a kernel that spins forever, a trap (a
// sticky launch failure), a NaN written into one element, one element left as the harness's poison.
#pragma once
#include <vector>

#include "cases/registry.hpp"

namespace attnbench::gputest {

enum class CudaFault { oob_write, spin, trap, nan_element, unwritten_element };
const char* cuda_fault_name(CudaFault f);
std::vector<KernelEntry> faulty_cuda_entries();

// Test-only local defects (the gate-coverage tests'): cuda.unified, then one unit of its output scaled by 0.95 on
// the call's stream: test.cuda_wrong_tile (one 64-row tile of the longest sequence's middle, the last head) and
// test.cuda_wrong_head (the middle sequence under the middle head).
std::vector<KernelEntry> local_fault_entries();

}  // namespace attnbench::gputest
