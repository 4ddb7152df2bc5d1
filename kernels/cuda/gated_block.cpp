// cuda.gated_block (host code): (1) and (6) through cuBLASLt, bf16/fp16 in, fp32 accumulate, descriptors and
// heuristic algorithm chosen at construction; (2)+(3) the norm+RoPE kernel in place in the projection output;
// (4) cuda.unified on the projection's strides, its K/V "cache" the projection viewed as blocks of block_size
// tokens with an identity block table (no repacking copy); (5) the sigmoid-gate kernel, or the SDPA epilogue
// with fuse_gate. execute() only launches: it allocates nothing and captures into a graph.
#include <cublasLt.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gated_block.hpp"
#include "cuda/gated_kernels.hpp"
#include "cuda/runtime.hpp"

namespace attnbench {
namespace {

#define GATED_LT_CHECK(expr)                                                                              \
  do {                                                                                                    \
    cublasStatus_t st_ = (expr);                                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      throw std::runtime_error(std::string("cuda.gated_block: ") + #expr + ": " + cublasLtGetStatusString(st_)); \
  } while (0)

constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;
constexpr uintptr_t kGemmAlign = 256;  // cuBLASLt's default alignment assumption for A, B, C, D

// C[rows, cols] = X[rows, k] * W[cols, k]^T, all row-major: column-major D (cols x rows) = op_T(W) * X.
class LtGemm {
 public:
  LtGemm(cublasLtHandle_t h, DType dt, int64_t rows, int64_t cols, int64_t k) {
    const cudaDataType_t t = dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    GATED_LT_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    GATED_LT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GATED_LT_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    GATED_LT_CHECK(cublasLtMatrixLayoutCreate(&a_, t, k, cols, k));
    GATED_LT_CHECK(cublasLtMatrixLayoutCreate(&b_, t, k, rows, k));
    GATED_LT_CHECK(cublasLtMatrixLayoutCreate(&c_, t, cols, rows, cols));
    cublasLtMatmulPreference_t pref;
    GATED_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    std::size_t wsb = kGemmWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t st = [&] {
      cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                                              sizeof wsb);
      if (s != CUBLAS_STATUS_SUCCESS) return s;
      return cublasLtMatmulAlgoGetHeuristic(h, op_, a_, b_, c_, c_, pref, 1, &heur, &found);
    }();
    cublasLtMatmulPreferenceDestroy(pref);
    GATED_LT_CHECK(st);
    if (found == 0)
      throw std::runtime_error("cuda.gated_block: cuBLASLt has no algorithm for the " + std::to_string(rows) + " x " +
                               std::to_string(cols) + " x " + std::to_string(k) + " GEMM");
    algo_ = heur.algo;
    ws_bytes_ = heur.workspaceSize;
    int id = -1;
    cublasLtMatmulAlgoConfigGetAttribute(&algo_, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, nullptr);
    summary = "algo " + std::to_string(id) + " ws " + std::to_string(ws_bytes_ >> 10) + "K";
  }
  ~LtGemm() {
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (op_) cublasLtMatmulDescDestroy(op_);
  }
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(cublasLtHandle_t h, const void* x, const void* w, void* c, void* ws, cudaStream_t s) const {
    const float alpha = 1.f, beta = 0.f;
    GATED_LT_CHECK(cublasLtMatmul(h, op_, &alpha, w, a_, x, b_, &beta, c, c_, c, c_, &algo_, ws, ws_bytes_, s));
  }
  std::string summary;

 private:
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::size_t ws_bytes_ = 0;
};

// What the block declines, without touching the device.
void check_support(const GatedGeometry& g, const GatedOptions& o, const AttentionKernel& sdpa,
                   const KnobValues& knobs) {
  validate_gated_options(o);
  const int bs = gated_block_size(g);
  if (bs == 0)
    throw GatedDecline("seqlen", "batch > 1 needs seqlen a multiple of 16 (each sequence starts a cache block of "
                                 "the projection view), got " + std::to_string(g.seqlen()));
  const Support s = sdpa.supports(gated_sdpa_problem(g, o, bs), knobs);
  if (s.ok) return;
  // A fusion the SDPA kernel cannot take is declined under the fusion's own field.
  GatedOptions plain = o;
  plain.fuse_gate = plain.fuse_norm_rope = false;
  if (sdpa.supports(gated_sdpa_problem(g, plain, bs), knobs).ok) {
    plain.fuse_gate = o.fuse_gate;
    if (o.fuse_gate && !sdpa.supports(gated_sdpa_problem(g, plain, bs), knobs).ok)
      throw GatedDecline("fuse_gate", "the SDPA kernel has no gate epilogue (cuda.unified: " + s.reason + ")");
    throw GatedDecline("fuse_norm_rope", "the SDPA kernel has no Q prologue here (cuda.unified: " + s.reason + ")");
  }
  throw GatedDecline("sdpa", "cuda.unified declines: " + s.reason);
}

class CudaGatedBlock final : public GatedBlock {
 public:
  CudaGatedBlock(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs)
      : g_(g), o_(o), cols_(gated_columns(g, o.q_gate_layout)), sdpa_(make_cuda_unified()) {
    check_support(g, o, *sdpa_, knobs);
    const int bs = gated_block_size(g);
    prob_ = gated_sdpa_problem(g, o, bs);
    plan_ = sdpa_->plan(prob_, knobs);
    GATED_LT_CHECK(cublasLtCreate(&lt_));
    try {
      proj_ = std::make_unique<LtGemm>(lt_, g.dtype(), g.tokens(), g.n_qkvg(), g.d_model());
      outp_ = std::make_unique<LtGemm>(lt_, g.dtype(), g.tokens(), g.d_model(), g.attn_width());
    } catch (...) {
      cublasLtDestroy(lt_);
      throw;
    }
    layout_ = gated_workspace_layout(g, bs, plan_->workspace_bytes, kGemmWorkspaceBytes);
    stages_ = gated_stages(g, o);
  }
  ~CudaGatedBlock() override {
    proj_.reset();
    outp_.reset();
    if (lt_) cublasLtDestroy(lt_);
  }

  const GatedGeometry& geometry() const override { return g_; }
  const GatedOptions& options() const override { return o_; }
  std::size_t workspace_size() const override { return layout_.total; }

  void prepare_workspace(void* workspace, void* stream) override {
    if (!workspace) throw std::invalid_argument("cuda.gated_block: prepare_workspace: workspace is null");
    auto* ws = static_cast<unsigned char*>(workspace);
    cuda::GatedTablesParams t;
    t.cu_seqlens_q = reinterpret_cast<int32_t*>(ws + layout_.cu_seqlens_q);
    t.seqused_k = reinterpret_cast<int32_t*>(ws + layout_.seqused_k);
    t.block_table = reinterpret_cast<int32_t*>(ws + layout_.block_table);
    t.batch = g_.batch();
    t.seqlen = g_.seqlen();
    t.block_size = layout_.block_size;
    t.blocks_per_seq = layout_.blocks_per_seq;
    cuda::launch_gated_tables(t, static_cast<cudaStream_t>(stream));
    prepared_ = workspace;
  }

  void execute(const GatedBlockParams& p, void* stream) const override {
    check(p);
    for (GatedStage s : stages_) run_stage(s, p, static_cast<cudaStream_t>(stream));
  }

  std::vector<std::string> stage_names() const override {
    std::vector<std::string> out;
    for (GatedStage s : stages_) out.push_back(gated_stage_name(s, g_, o_));
    return out;
  }

  void execute_stage(int stage, const GatedBlockParams& p, void* stream) const override {
    if (stage < 0 || stage >= static_cast<int>(stages_.size()))
      throw std::invalid_argument("cuda.gated_block: no stage " + std::to_string(stage));
    check(p);
    run_stage(stages_[stage], p, static_cast<cudaStream_t>(stream));
  }

  std::string summary() const override {
    return std::string("qkvg ") + q_gate_layout_name(o_.q_gate_layout) + " cuBLASLt " + proj_->summary +
           "; sdpa cuda.unified " + plan_->summary + " block_size=" + std::to_string(layout_.block_size) +
           "; norm+rope " + (gated_fuses_norm_rope(g_, o_) ? "K pass, Q in the SDPA" : "separate") + "; gate " +
           (o_.fuse_gate ? "fused" : "separate") + "; out cuBLASLt " + outp_->summary;
  }

 private:
  void check(const GatedBlockParams& p) const {
    const GatedDims& d = g_.dims();
    if (p.batch != d.batch || p.seqlen != d.seqlen || p.d_model != d.d_model || p.h_q != d.h_q || p.h_kv != d.h_kv ||
        p.d_head != d.d_head || p.rope_dim != d.rope_dim || p.dtype != d.dtype)
      throw std::invalid_argument("cuda.gated_block: params dims do not match the block's geometry");
    if (!p.h || !p.w_qkvg || !p.w_o || !p.out || !p.workspace ||
        (o_.qk_norm && (!p.q_norm_weight || !p.k_norm_weight)) || (g_.rope_dim() > 0 && (!p.cos || !p.sin)))
      throw std::invalid_argument("cuda.gated_block: a params pointer is null");
    for (const void* ptr : {p.h, p.w_qkvg, p.w_o, static_cast<const void*>(p.out), static_cast<const void*>(p.workspace)})
      if (reinterpret_cast<uintptr_t>(ptr) % kGemmAlign != 0)
        throw std::invalid_argument("cuda.gated_block: h, W_qkvg, W_o, out and workspace must be 256-byte aligned");
    if (o_.qk_norm && (reinterpret_cast<uintptr_t>(p.q_norm_weight) | reinterpret_cast<uintptr_t>(p.k_norm_weight)) % 16)
      throw std::invalid_argument("cuda.gated_block: norm weights must be 16-byte aligned");
    if (o_.fuse_norm_rope && g_.rope_dim() > 0 &&
        (reinterpret_cast<uintptr_t>(p.cos) | reinterpret_cast<uintptr_t>(p.sin)) % 16)
      throw std::invalid_argument("cuda.gated_block: with fuse_norm_rope, cos and sin must be 16-byte aligned");
    if (p.workspace != prepared_)
      throw std::invalid_argument("cuda.gated_block: workspace not prepared (call prepare_workspace once, before "
                                  "any graph capture)");
  }

  void* at(const GatedBlockParams& p, std::size_t off) const { return static_cast<unsigned char*>(p.workspace) + off; }

  void run_stage(GatedStage s, const GatedBlockParams& p, cudaStream_t stream) const {
    const int64_t N = g_.n_qkvg();
    auto* proj = static_cast<uint16_t*>(at(p, layout_.proj));
    auto* attn = static_cast<uint16_t*>(at(p, layout_.attn));
    switch (s) {
      case GatedStage::proj:
        return proj_->run(lt_, p.h, p.w_qkvg, proj, at(p, layout_.gemm), stream);
      case GatedStage::norm_rope: {
        cuda::GatedNormRopeParams n;
        n.proj = proj;
        n.row_stride = N;
        n.tokens = g_.tokens();
        n.h_kv = g_.h_kv();
        n.h_q = gated_fuses_norm_rope(g_, o_) ? 0 : g_.h_q();  // fused: Q's norm + RoPE run in the SDPA's Q load
        n.q0 = cols_.q0;
        n.q_head_stride = cols_.q_head_stride;
        n.k0 = cols_.k0;
        n.q_weight = p.q_norm_weight;
        n.k_weight = p.k_norm_weight;
        n.weight_offset = o_.norm_weight_offset;
        n.eps = kGatedNormEps;
        n.norm = o_.qk_norm;
        n.cos = p.cos;
        n.sin = p.sin;
        n.rope_dim = g_.rope_dim();
        return cuda::launch_gated_norm_rope(g_.dtype(), g_.d_head(), n, stream);
      }
      case GatedStage::sdpa: {
        AttentionParams a = make_attention_params(prob_);
        a.q = proj + cols_.q0;
        a.q_stride_token = N;
        a.q_stride_head = cols_.q_head_stride;
        a.k_cache = proj + cols_.k0;
        a.v_cache = proj + cols_.v0;
        a.kv_stride_block = N * layout_.block_size;
        a.kv_stride_token = N;
        a.kv_stride_head = g_.d_head();
        a.out = attn;
        a.cu_seqlens_q = static_cast<const int32_t*>(at(p, layout_.cu_seqlens_q));
        a.seqused_k = static_cast<const int32_t*>(at(p, layout_.seqused_k));
        a.block_table = static_cast<const int32_t*>(at(p, layout_.block_table));
        a.block_table_stride = layout_.blocks_per_seq;
        a.workspace = layout_.sdpa_bytes ? at(p, layout_.sdpa) : nullptr;
        set_gated_q_prologue(g_, o_, p, a);
        if (o_.fuse_gate) {
          a.gate = proj + cols_.g0;
          a.gate_stride_token = N;
          a.gate_stride_head = cols_.g_head_stride;
        }
        return sdpa_->run(*plan_, a, stream);
      }
      case GatedStage::gate: {
        cuda::GatedSigmoidParams sg;
        sg.o = attn;
        sg.o_stride_token = g_.attn_width();
        sg.gate = proj + cols_.g0;
        sg.gate_stride_token = N;
        sg.gate_stride_head = cols_.g_head_stride;
        sg.tokens = g_.tokens();
        sg.heads = g_.h_q();
        sg.d_head = g_.d_head();
        return cuda::launch_gated_sigmoid(g_.dtype(), sg, stream);
      }
      case GatedStage::out_proj:
        return outp_->run(lt_, attn, p.w_o, p.out, at(p, layout_.gemm), stream);
    }
  }

  GatedGeometry g_;
  GatedOptions o_;
  GatedColumns cols_;
  std::unique_ptr<AttentionKernel> sdpa_;
  AttentionProblem prob_;
  std::unique_ptr<AttentionPlan> plan_;
  cublasLtHandle_t lt_ = nullptr;
  std::unique_ptr<LtGemm> proj_, outp_;
  GatedWorkspaceLayout layout_;
  std::vector<GatedStage> stages_;
  const void* prepared_ = nullptr;
};

class CudaGatedBlockKernel final : public GatedBlockKernel {
 public:
  std::string name() const override { return "cuda.gated_block"; }
  Backend backend() const override { return Backend::cuda; }

  Support supports(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs) const override {
    try {
      check_support(g, o, *make_cuda_unified(), knobs);
    } catch (const GatedDecline& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<GatedBlock> create(const GatedGeometry& g, const GatedOptions& o,
                                     const KnobValues& knobs) const override {
    return std::make_unique<CudaGatedBlock>(g, o, knobs);
  }
};

}  // namespace

std::unique_ptr<GatedBlockKernel> make_cuda_gated_block() { return std::make_unique<CudaGatedBlockKernel>(); }

}  // namespace attnbench
