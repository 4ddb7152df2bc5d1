// Builds the paged inputs of an attention problem in host memory: packed Q with cu_seqlens_q, seqused_k,
// K/V caches [num_blocks, block_size, kv_heads, head_size] and a block table. Seeded normal data, never zeros.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attnbench/attention.hpp"

namespace attnbench {

enum class BlockOrder { contiguous, shuffled, repeated };
BlockOrder parse_block_order(const std::string& s);  // throws std::invalid_argument
const char* block_order_name(BlockOrder o);

// A host buffer of one storage dtype, sized in bytes: 16-bit halves or 8-bit codes.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dt, std::size_t elements) : dt_(dt), bytes_(elements * dtype_bytes(dt)) {}
  DType dtype() const { return dt_; }
  std::size_t size() const { return bytes_.size() / dtype_bytes(dt_); }  // elements
  std::size_t bytes() const { return bytes_.size(); }
  const void* data() const { return bytes_.data(); }
  void* data() { return bytes_.data(); }
  // The elements as 16-bit halves; throws std::logic_error for an 8-bit dtype.
  const uint16_t* halves() const;
  uint16_t* halves();
  float get(std::size_t i) const;   // element i in fp32, exactly
  void set(std::size_t i, float v);  // element i rounded to the dtype

 private:
  DType dt_ = DType::bf16;
  std::vector<uint8_t> bytes_;
};

struct HostInputs {
  AttentionProblem problem;
  HostTensor q, k_cache, v_cache;  // problem.types.q, .kv, .kv
  std::vector<int32_t> cu_seqlens_q, seqused_k, block_table;
  int64_t num_blocks = 0;         // the sequences' blocks plus the sentinel block
  int64_t sentinel_block = 0;     // a block of poison that every unused table slot names
  int block_table_stride = 0;     // one slot more than the longest sequence needs

  // Params over these host buffers (out and workspace left null).
  AttentionParams params() const;
};

// Cache slots no sequence owns (the tail of each sequence's last block, and the sentinel block) hold these: finite,
// so a kernel that loads a whole tile and masks the tail stays right, but large, so a key read past a sequence's
// end (a mask or bounds bug) moves the output far past the gate. K's makes q.k a large multiple of q's sum.
inline constexpr float kPoisonK = 8.f, kPoisonV = 16.f;

// n values of mean + std * N(0, 1) rounded to the dtype, never exactly zero. Counter-based (Box-Muller over a hash
// of (seed, stream, index)), so the values do not depend on the thread count; streams give independent tensors.
std::vector<uint16_t> random_normal(std::size_t n, DType dt, uint64_t seed, uint64_t stream, float mean = 0.f,
                                    float std = 1.f);
// The same values in any storage dtype (8-bit codes saturate at the format's largest finite value).
HostTensor random_tensor(std::size_t n, DType dt, uint64_t seed, uint64_t stream, float mean = 0.f, float std = 1.f);

// How the inputs are drawn beyond the N(0, 1) default: Q and K (their dequantised values) with standard deviation
// qk_std, so that the scores' spread is qk_std^2 * scale * sqrt(head_size) (a shape's "scores": "wide").
struct InputSpread {
  float qk_std = 1.f;
};
// The scores' standard deviation of "scores": "wide": rows of a few thousand keys reach scores near ±100, past
// e^88.7 (fp32's largest), so a softmax without its row maximum overflows in any dtype.
inline constexpr float kWideScoreStd = 24.f;
// InputSpread of "scores": "wide" for problem p (its scale and head size).
InputSpread wide_scores(const AttentionProblem& p);

// Block table: each sequence owns ceil(kv_len / block_size) blocks; contiguous gives sequence s the run
// after sequence s-1's, shuffled permutes the physical block ids (seeded), repeated is shuffled with every slot but
// a sequence's last naming a seeded random block among those no sequence ends in (repeats, as shared prefixes
// give). Each row has one slot more than the longest sequence needs, and every unused slot names the sentinel block
// (the last one): a correct kernel never uses its keys, and a kernel that reads past a sequence's end reads poison,
// inside the cache.
HostInputs build_inputs(const AttentionProblem& p, uint64_t seed, BlockOrder order = BlockOrder::contiguous,
                        const InputSpread& spread = {});

}  // namespace attnbench
