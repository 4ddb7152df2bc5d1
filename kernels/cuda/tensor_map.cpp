#include "cuda/tensor_map.hpp"

#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda/heuristics.hpp"

namespace attnbench::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// cuTensorMapEncodeTiled; throws when it refuses the layout.
CUtensorMap encode_tiled(const void* base, CUtensorMapDataType type, int rank, const cuuint64_t* dims,
                         const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle) {
  CUtensorMap m;
  std::memset(&m, 0, sizeof(m));
  const PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
  if (enc == nullptr) throw std::runtime_error("cuda.unified wide: cuTensorMapEncodeTiled unavailable");
  const cuuint32_t estr[5] = {1, 1, 1, 1, 1};
  const CUresult r = enc(&m, type, rank, const_cast<void*>(base), dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuda.unified wide: cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) + ")");
  return m;
}

// The same with the 16-bit or byte element type of dt.
CUtensorMap encode_tiled(const void* base, DType dt, int rank, const cuuint64_t* dims, const cuuint64_t* strides,
                         const cuuint32_t* box, CUtensorMapSwizzle swizzle) {
  const CUtensorMapDataType type = !is_16bit(dt)       ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dt == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode_tiled(base, type, rank, dims, strides, box, swizzle);
}

}  // namespace

CUtensorMap encode_paged_kv_map(const void* base, DType dt, int head_size, int kv_heads, int block_size,
                                int64_t stride_head, int64_t stride_token, int64_t stride_block, bool swizzle_codes,
                                int64_t pages) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_size), static_cast<cuuint64_t>(kv_heads),
                              static_cast<cuuint64_t>(block_size), static_cast<cuuint64_t>(pages)};
  const bool codes = !is_16bit(dt);
  if (!wide_kv_tma(block_size, codes))
    throw std::invalid_argument("cuda.unified wide: no K/V TMA box for pages of " + std::to_string(block_size) +
                                " tokens of " + dtype_name(dt) + " (wide_kv_tma)");
  const cuuint64_t eb = codes ? 1 : 2;  // bytes per element
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(stride_head) * eb, static_cast<cuuint64_t>(stride_token) * eb,
                                 static_cast<cuuint64_t>(stride_block) * eb};
  // Boxes of 128-byte rows: 64 16-bit elements, or 128 codes (a d256 code row lands as two boxes); of 64 tokens, or
  // one page of 16 or 32.
  const cuuint32_t box[4] = {codes ? static_cast<cuuint32_t>(std::min(head_size, 128)) : 64u, 1,
                             static_cast<cuuint32_t>(wide_kv_box_tokens(block_size)), 1};
  return encode_tiled(base, dt, 4, dims, strides, box,
                      codes && !swizzle_codes ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B);
}

CUtensorMap encode_rows_map(const void* base, DType dt, int head_size, int64_t tokens, int heads, int64_t stride_token,
                            int64_t stride_head, int box_tokens, int box_heads) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_size), static_cast<cuuint64_t>(tokens),
                              static_cast<cuuint64_t>(heads)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(stride_token) * 2, static_cast<cuuint64_t>(stride_head) * 2};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_tokens), static_cast<cuuint32_t>(box_heads)};
  return encode_tiled(base, dt, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B);
}

KvTensorMaps encode_kv_maps(const AttentionParams& p) {
  auto one = [&](const void* base, bool swizzle_codes) {
    return encode_paged_kv_map(base, p.types.kv, p.head_size, p.kv_heads, p.block_size, p.kv_stride_head,
                               p.kv_stride_token, p.kv_stride_block, swizzle_codes);
  };
  return {one(p.k_cache, !is_16bit(p.types.q)), one(p.v_cache, !is_16bit(p.types.q))};
}

QoTensorMaps encode_qo_maps(const AttentionParams& p, int tq) {
  const int rows = kWideRowsPerWg, box_tokens = std::min(tq, rows), box_heads = rows / box_tokens;
  auto one = [&](const void* base, DType dt, int64_t stride_token, int64_t stride_head) {
    return encode_rows_map(base, dt, p.head_size, p.total_q, p.heads, stride_token, stride_head, box_tokens,
                           box_heads);
  };
  return {one(p.q, p.types.q, p.q_stride_token, p.q_stride_head),
          one(p.out, p.types.o, p.o_stride_token, p.o_stride_head)};
}

CUtensorMap encode_f32_map(const float* base, int64_t cols, int64_t rows, int64_t row_stride, int box_cols, int box_rows,
                           bool swizzle128) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride) * 4};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  return encode_tiled(base, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, dims, strides, box,
                      swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace attnbench::cuda
