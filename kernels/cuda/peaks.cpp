#include "cuda/peaks.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <random>
#include <vector>

#include "attnbench/dtype.hpp"
#include "cuda/runtime.hpp"

namespace attnbench::cuda {

namespace {
#define LT_CHECK(expr)                                                                                  \
  do {                                                                                                  \
    cublasStatus_t st_ = (expr);                                                                        \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                   \
      throw std::runtime_error(std::string(#expr) + ": cuBLASLt status " + std::to_string(int(st_)));   \
  } while (0)

template <class F>
double median_ms(F&& f, cudaStream_t s) {
  Event a, b;
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) {
    a.record(s);
    f();
    b.record(s);
    t.push_back(Event::elapsed_ms(a, b));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
}  // namespace

double measure_copy_gbps(std::size_t bytes) {
  DeviceBuffer src(bytes), dst(bytes);
  src.fill_byte(0x3c);
  Stream s;
  const double ms = median_ms(
      [&] { ATTNBENCH_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s.get())); },
      s.get());
  return 2.0 * bytes / (ms * 1e-3) * 1e-9;
}

double measure_read_gbps(std::size_t bytes) {
  DeviceBuffer src(bytes), sink(sizeof(unsigned));
  src.fill_byte(0x3c);
  Stream s;
  const int sms = device_props(0).sm_count;
  const double ms = median_ms([&] { launch_read_stream(src.data(), bytes, static_cast<unsigned*>(sink.data()), sms, s.get()); },
                              s.get());
  return bytes / (ms * 1e-3) * 1e-9;
}

double measure_gemm_tflops(int m, int n, int k) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> ha(static_cast<std::size_t>(m) * k), hb(static_cast<std::size_t>(k) * n);
  for (auto& x : ha) x = float_to_bf16(nd(rng));
  for (auto& x : hb) x = float_to_bf16(nd(rng));
  DeviceBuffer a(ha.size() * 2), b(hb.size() * 2), c(static_cast<std::size_t>(m) * n * 2), ws(64u << 20);
  a.upload(ha.data(), ha.size() * 2);
  b.upload(hb.data(), hb.size() * 2);
  Stream s;
  cublasLtHandle_t h;
  LT_CHECK(cublasLtCreate(&h));
  cublasLtMatmulDesc_t op;
  LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, lc;
  LT_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m));
  cublasLtMatmulPreference_t pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::size_t wsb = ws.bytes();
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  LT_CHECK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &heur, &found));
  if (found == 0) throw std::runtime_error("cuBLASLt: no algorithm for the bf16 GEMM");
  const float alpha = 1.f, beta = 0.f;
  const double ms = median_ms(
      [&] {
        LT_CHECK(cublasLtMatmul(h, op, &alpha, a.data(), la, b.data(), lb, &beta, c.data(), lc, c.data(), lc,
                                &heur.algo, ws.data(), wsb, s.get()));
      },
      s.get());
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(h);
  return 2.0 * m * n * k / (ms * 1e-3) * 1e-12;
}

}  // namespace attnbench::cuda
