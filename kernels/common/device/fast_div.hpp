// Division by a divisor fixed for a whole launch (a page size, a tile count), as a multiply-high, an add and a shift:
// a GPU integer division by a run-time value is some twenty instructions.
#pragma once
#include <cstdint>

#include "host_device.hpp"

namespace attnbench::device {

// n / d for 0 <= n < 2^31 and d >= 1, exactly: the round-up method of Granlund and Montgomery, with
// shift = ceil(log2 d) and mul = 2^32 (2^shift - d) / d + 1, n / d = (umulhi(mul, n) + n) >> shift (the sum stays
// below 2^32 since umulhi(mul, n) <= n < 2^31). Powers of two take mul = 1 (umulhi = 0): a plain shift.
struct FastDiv {
  uint32_t mul = 1, shift = 0;
  FastDiv() = default;
  ATTNBENCH_HD_INLINE explicit FastDiv(int d) {
    shift = d > 1 ? 32u - static_cast<uint32_t>(count_leading_zeros(static_cast<uint32_t>(d - 1))) : 0u;
    if ((d & (d - 1)) != 0)
      mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - static_cast<uint64_t>(d))) /
                                  static_cast<uint64_t>(d)) + 1u;
  }
  ATTNBENCH_HD_INLINE int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(mul, u);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(mul) * u) >> 32);
#endif
    return static_cast<int>((hi + u) >> shift);
  }
};

}  // namespace attnbench::device
