// The HIP side of the GPU runtime shim (attnbench/gpu_runtime.hpp, implemented in runtime.cpp), plus what the HIP
// kernels' host code uses with HIP types: checked calls and the last launch's error. Host code (compiled by the host
// compiler against the HIP headers, linked to libamdhip64); every failure throws gpu::Error with file, line and the
// HIP error string.
#pragma once
#include <hip/hip_runtime_api.h>

#include "attnbench/gpu_runtime.hpp"

namespace attnbench::hip {

[[noreturn]] void throw_hip_error(hipError_t err, const char* expr, const char* file, int line);

#define ATTNBENCH_HIP_CHECK(expr)                                                     \
  do {                                                                                \
    hipError_t attnbench_err_ = (expr);                                               \
    if (attnbench_err_ != hipSuccess)                                                 \
      ::attnbench::hip::throw_hip_error(attnbench_err_, #expr, __FILE__, __LINE__);   \
  } while (0)

// Checks the last launch error (throws).
void check_last_launch(const char* what);

}  // namespace attnbench::hip
