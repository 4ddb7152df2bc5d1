// Qualifiers and integer helpers for rules shared by the host (g++) and the CUDA (nvcc) and HIP (clang) kernels.
#pragma once

#if defined(__CUDACC__)
#define ATTNBENCH_HD __host__ __device__
#define ATTNBENCH_HD_INLINE ATTNBENCH_HD __forceinline__
#elif defined(__HIP__)
// Spelled as attributes: this header may come before the HIP runtime header that defines __host__ / __device__.
#define ATTNBENCH_HD __attribute__((host, device))
#define ATTNBENCH_HD_INLINE ATTNBENCH_HD inline __attribute__((always_inline))
#else
#define ATTNBENCH_HD
#define ATTNBENCH_HD_INLINE inline
#endif

namespace attnbench::device {

// On the device the CUDA integer min / max, so that a kernel compiles as it did with them written inline.
ATTNBENCH_HD_INLINE int imin(int a, int b) {
#if defined(__CUDA_ARCH__)
  return ::min(a, b);
#else
  return a < b ? a : b;
#endif
}
ATTNBENCH_HD_INLINE int imax(int a, int b) {
#if defined(__CUDA_ARCH__)
  return ::max(a, b);
#else
  return a < b ? b : a;
#endif
}

// Leading zero bits of a nonzero word.
ATTNBENCH_HD_INLINE int count_leading_zeros(unsigned x) {
#if defined(__CUDA_ARCH__)
  return __clz(static_cast<int>(x));
#else
  return __builtin_clz(x);
#endif
}

}  // namespace attnbench::device
