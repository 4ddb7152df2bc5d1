// Division by a run-time divisor fixed for a whole launch, as a multiply-high and a shift: a kernel's integer
// division by a value it cannot know at compile time is a ~25-instruction sequence, and the wide kernel's work walk
// divides four times per unit (kernels/NOTES.md, short units).
#pragma once
#include <cstdint>

#include "host_device.hpp"

namespace attnbench::device {

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: with l = ceil(log2 d), mul = ceil(2^(31 + l) / d) < 2^32 and
// n / d = (n mul) >> (31 + l) exactly (mul d - 2^(31 + l) < d, so the excess n (mul d - 2^(31 + l)) / 2^(31 + l) < 1
// stays under the 1/d between n/d's fraction and the next integer). d = 1 (l = 0) is mul = 0: n itself.
struct FastDiv {
  uint32_t mul = 0;
  uint32_t shr = 0;  // 31 + l - 32

  FastDiv() = default;
  explicit FastDiv(int d) {
    if (d <= 1) return;
    const int l = 32 - count_leading_zeros(static_cast<unsigned>(d - 1));  // ceil(log2 d) for d >= 2
    const uint64_t p2 = uint64_t{1} << (31 + l);
    mul = static_cast<uint32_t>((p2 + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d));
    shr = static_cast<uint32_t>(l - 1);
  }
  ATTNBENCH_HD_INLINE int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(u, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(u) * mul) >> 32);
#endif
    return mul == 0 ? n : static_cast<int>(hi >> shr);
  }
};

}  // namespace attnbench::device
