// The type config of an attention problem: the storage dtype of Q, of the K/V cache and of O, and the accumulator
// every kernel computes scores, softmax and O in.
#pragma once
#include <string>

#include "attnbench/dtype.hpp"

namespace attnbench {

struct AttentionTypes {
  DType q = DType::bf16, kv = DType::bf16, o = DType::bf16;
  // Scores, the softmax and O accumulate in fp32 in every kernel and in the reference.
  static constexpr const char* accumulator = "fp32";

  static constexpr AttentionTypes all(DType d) { return {d, d, d}; }
  constexpr bool uniform() const { return q == kv && kv == o; }
  // "bf16" when uniform, else q-kv-o ("bf16-e4m3-bf16"): the dtype label of a case and of its result rows.
  std::string name() const {
    if (uniform()) return dtype_name(q);
    return std::string(dtype_name(q)) + "-" + dtype_name(kv) + "-" + dtype_name(o);
  }
  bool operator==(const AttentionTypes& t) const { return q == t.q && kv == t.kv && o == t.o; }
  bool operator!=(const AttentionTypes& t) const { return !(*this == t); }
};

}  // namespace attnbench
