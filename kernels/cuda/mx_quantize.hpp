// The block-scaled quantiser on the device: the host quantiser's rules (common/device/mx_rules.hpp), bit for bit,
// over the same storage (attnbench/mx_quant.hpp). Host-callable; only enqueues on `stream`.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attnbench/dtype.hpp"
#include "attnbench/mx_quant.hpp"

namespace attnbench::cuda {

// Rows of x (device halves of dt, [rows, cols], cols whole blocks) times pre_scale quantised to f: codes and scales
// in mx_quant.hpp's storage. Throws std::invalid_argument for a dtype but fp16 / bf16 or cols not whole blocks.
void launch_mx_quantize_rows(mx::MxFormat f, DType dt, const void* x, int64_t rows, int64_t cols, float pre_scale,
                             uint8_t* codes, uint8_t* scales, cudaStream_t stream);

}  // namespace attnbench::cuda
