// The gated attention block (op gated_block): h -> QKVG projection -> per-head RMSNorm + partial RoPE of Q and K
// -> SDPA (GQA) -> O * sigmoid(GATE) -> output projection. The geometry (validated when constructed), the
// options, the params struct (pointers + explicit dims), the block interface (built once, then execute() only
// launches), the fused-weight builder, the workspace layout and the declared work model. The README has the math.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnbench/attention.hpp"
#include "attnbench/dtype.hpp"
#include "attnbench/gated_fp8.hpp"
#include "attnbench/gated_mx.hpp"
#include "attnbench/kernel.hpp"
#include "attnbench/knobs.hpp"

namespace attnbench {

// A request the block cannot serve, naming the field: what() is "field 'F': reason" (as AttentionProblem's).
// Thrown by GatedGeometry's constructor and GatedBlockKernel::create(); supports() returns it as Support::no.
class GatedDecline : public std::invalid_argument {
 public:
  GatedDecline(std::string field, std::string reason);
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_, reason_;
};

struct GatedDims {
  int batch = 1, seqlen = 0, d_model = 0, h_q = 0, h_kv = 0, d_head = 0, rope_dim = 0;
  DType dtype = DType::bf16;
};

// Head sizes the block serves (those of the SDPA kernels).
inline bool gated_head_size_supported(int d) { return d == 64 || d == 128 || d == 256; }

// Validated dims: batch, seqlen >= 1; h_q % h_kv == 0; d_head in {64, 128, 256}; rope_dim even, 0 <= rope_dim
// <= d_head; d_model a multiple of 8 (16-byte rows); batch * seqlen < 2^31 (int32 sequence offsets).
class GatedGeometry {
 public:
  explicit GatedGeometry(const GatedDims& d);  // throws GatedDecline naming the field
  const GatedDims& dims() const { return d_; }
  int batch() const { return d_.batch; }
  int seqlen() const { return d_.seqlen; }
  int d_model() const { return d_.d_model; }
  int h_q() const { return d_.h_q; }
  int h_kv() const { return d_.h_kv; }
  int d_head() const { return d_.d_head; }
  int rope_dim() const { return d_.rope_dim; }
  DType dtype() const { return d_.dtype; }
  int64_t tokens() const { return static_cast<int64_t>(d_.batch) * d_.seqlen; }
  int64_t n_qkvg() const { return static_cast<int64_t>(2 * d_.h_q + 2 * d_.h_kv) * d_.d_head; }  // N
  int64_t attn_width() const { return static_cast<int64_t>(d_.h_q) * d_.d_head; }                  // h_q * d

 private:
  GatedDims d_;
};

enum class QGateLayout { flat, interleaved };  // flat: Q | GATE | K | V; interleaved: [q_h | g_h] per head | K | V
const char* q_gate_layout_name(QGateLayout l);
QGateLayout parse_q_gate_layout(const std::string& s);  // throws GatedDecline("q_gate_layout", ...)

struct GatedOptions {
  bool is_causal = true;
  // Where query s of a sequence sits among its kv_len keys (AttentionProblem::top_left): at s + kv_len - S
  // (bottom-right, true) or at s (top-left). The two differ only under seq_lens (kv_len < S); the window follows.
  bool causal_bottom_right = true;
  bool qk_norm = true;
  float norm_weight_offset = 0.f;  // effective RMSNorm weight = offset + w: 0 plain, 1 Gemma-style (1 + w)
  QGateLayout q_gate_layout = QGateLayout::flat;
  float attn_scale = 0.f;  // 0 means d_head^-0.5
  bool fuse_gate = false;       // O * sigmoid(GATE) inside the SDPA epilogue (AttentionProblem::output_gate)
  bool fuse_norm_rope = false;  // Q's norm + RoPE inside the SDPA's Q load (AttentionProblem::q_norm, q_rope_dim);
                                // K's stay a separate pass over the h_kv heads
  // Sliding window (the attention features' rule, AttentionFeatures): query s of a sequence sees key j iff
  // s - window_left <= j <= s + window_right, -1 unbounded; with is_causal, j <= s as well.
  int window_left = -1, window_right = -1;
  // The SDPA's log-sum-exp per (sequence, query head, query) into GatedBlockParams::lse (the attention op's
  // return_lse; a block whose SDPA cannot write it declines).
  bool return_lse = false;
  // Keep the backward's save set (gated_block_bwd.hpp's GatedSaved) in GatedBlockParams::save: the norm + RoPE
  // pass writes the packed normed Q and K (not back over the projection), V, rstd and, where asked, the pre-norm
  // rows; the SDPA reads q, k, v from there, writes O to save.o and its LSE to save.lse ([T, h_q]; params.lse
  // stays return_lse's, copied from it); the gate pass copies the GATE columns. The output is bit-identical.
  // Declined (GatedDecline) with fp8, mx, fuse_gate and fuse_norm_rope (no pre-gate O, no pre-norm Q/K), and by
  // an SDPA that cannot write the LSE ("save_for_backward"); a call with seq_lens is refused (packed sequences).
  bool save_for_backward = false;
  // Block-scaled projections (gated_mx.hpp); none: both projections in the dtype.
  std::optional<MxQuantSpec> mx;
  // The FP8 pipeline (gated_fp8.hpp): e4m3 h and weights, FP8 projections and the FP8 SDPA. Under fp8,
  // fuse_norm_rope fuses Q, K and V's quantisation into the norm + RoPE pass (an 8-bit Q has no Q prologue) and
  // fuse_gate the gate into the O quantisation pass.
  std::optional<Fp8QuantSpec> fp8;
  float softmax_scale(int d_head) const;
};
// Option values a block never accepts (scale or offset not finite, scale < 0, a window bound below -1). Throws
// GatedDecline.
void validate_gated_options(const GatedOptions& o);
// What the MX modes decline (none without o.mx), as GatedDecline naming the field: a dtype but bf16; e5m2 codes;
// d_model % 32; scale_o or descale_w_o not finite and > 0, or != 1 under o_fp4; under o_fp4 d_head not whole groups
// of four scale blocks (d_head % 64 for nvfp4, % 128 for mxfp4); fuse_norm_rope with e2m1 W_qkvg.
void validate_gated_mx(const GatedGeometry& g, const GatedOptions& o);
// What the FP8 mode declines (none without o.fp8), as GatedDecline naming the field: a scale or descale not finite
// and > 0 (fp8.<name>); fp8 together with mx; d_model % 16 (16-byte rows of codes).
void validate_gated_fp8(const GatedGeometry& g, const GatedOptions& o);
// What save_for_backward declines (none without it), as GatedDecline naming the field: fp8, mx, fuse_gate (the gate
// in the SDPA epilogue) and fuse_norm_rope (with something to fuse), checked in that order.
void validate_gated_save(const GatedGeometry& g, const GatedOptions& o);
// Why host lengths cannot be a call's seq_lens ("" when they can): "seq_lens[b] = v outside [0, S]".
std::string gated_seq_lens_conflict(const GatedGeometry& g, const int32_t* seq_lens);
// Sets the options the gated block's knobs choose (ATTNBENCH_GATED_FUSE_GATE, ATTNBENCH_GATED_FUSE_NORM_ROPE,
// ATTNBENCH_GATED_QGATE_LAYOUT) in o, whose mode (fp8, mx) the fusions' auto reads: the caller sets that first.
void apply_gated_knobs(const KnobValues& knobs, GatedOptions& o);

constexpr float kGatedNormEps = 1e-6f;

// Where each head's columns sit in a row of the projection output [tokens, N].
struct GatedColumns {
  int64_t q0 = 0, q_head_stride = 0;  // Q head h: q0 + h * q_head_stride
  int64_t g0 = 0, g_head_stride = 0;  // GATE head h
  int64_t k0 = 0, v0 = 0;             // K / V head h: k0 + h * d_head, v0 + h * d_head
};
GatedColumns gated_columns(const GatedGeometry& g, QGateLayout layout);
// The FP8 mode's codes of Q | K | V, rows of gated_codes_stride(g) = (h_q + 2 h_kv) d bytes: Q head h at h d (in
// every q_gate_layout), K head h at k0 + h d, V head h at v0 + h d.
struct GatedCodesColumns {
  int64_t k0 = 0, v0 = 0;
};
int64_t gated_codes_stride(const GatedGeometry& g);
GatedCodesColumns gated_codes_columns(const GatedGeometry& g);

// W_qkvg [N, d_model] from Wq, Wgate [h_q * d, d_model] and Wk, Wv [h_kv * d, d_model] (row-major halves): row n of
// W_qkvg produces column n of the projection, in the order gated_columns(layout) describes.
std::vector<uint16_t> build_w_qkvg(const GatedGeometry& g, QGateLayout layout, const uint16_t* wq,
                                   const uint16_t* wgate, const uint16_t* wk, const uint16_t* wv);

// The SDPA problem over the projection output: B sequences of S queries and S keys, h_q / h_kv heads, the
// projection viewed as a paged cache of `block_size`-token blocks (identity block table); fuse_gate gives it the
// output gate, fuse_norm_rope the Q prologue (set_gated_q_prologue fills its params). return_lse is o's: a
// save_for_backward block's SDPA writes the LSE as well (the block adds it; the backward's problem is built from this).
AttentionProblem gated_sdpa_problem(const GatedGeometry& g, const GatedOptions& o, int block_size);
// The cache block size: 64 when batch == 1 or 64 divides seqlen, else 32 or 16 when it divides seqlen; 0 when
// none does (a sequence's first token must start a block of the shared view). With batch == 1 the last block may be
// partial: the workspace pads the projection to whole blocks (GatedWorkspaceLayout).
int gated_block_size(const GatedGeometry& g);

// Declared work: FLOPs of both projections (2 * tokens * d_model * (N + h_q * d)) plus the SDPA's over the
// visible pairs (the mask, the window and seq_lens, [batch] or empty for none); bytes: the fewest moved (h, W_qkvg,
// W_o, cos, sin, norm weights read once, out written; h and the weights as codes under fp8, the weights under mx);
// under save_for_backward also the save set's writes, gated_save_bytes(g, o, false): the recompute set, since
// whether q_pre and k_pre are written is the call's choice (its pointers).
WorkModel gated_block_work(const GatedGeometry& g, const GatedOptions& o, const std::vector<int>& seq_lens = {});
// Bytes of the save set a save_for_backward call writes: q, k, v, gate, o in the dtype, lse fp32, rstd_q and rstd_k
// under qk_norm, and with qk_pre q_pre and k_pre. 0 without save_for_backward.
double gated_save_bytes(const GatedGeometry& g, const GatedOptions& o, bool qk_pre);

// The caller's workspace, carved in this order at 256-byte aligned offsets: the projection output
// [proj_rows, N], the attention output [tokens, h_q * d] (gated there when the SDPA's epilogue gates it; 0 bytes
// with save: the SDPA writes GatedSaveOut::o), the SDPA kernel's workspace, the int32 tables (cu_seqlens_q [B + 1],
// seqused_k [B], block_table [B, blocks_per_seq]), the GEMM workspace, under the FP8 mode the e4m3 codes of
// Q | K | V ([proj_rows, (h_q + 2 h_kv) d], the FP8 SDPA's view) and of the gated O ([tokens, h_q d]), and with a
// separate gate pass (gate_pass) its output [tokens, h_q d].
// proj_rows is tokens rounded up to whole cache blocks: an SDPA that reads whole pages of the view stays inside the
// projection, whose pad rows (past tokens) every call zeroes (and the codes' pad rows are the codes of those zeros).
struct GatedWorkspaceLayout {
  std::size_t proj = 0, attn = 0, sdpa = 0, cu_seqlens_q = 0, seqused_k = 0, block_table = 0, gemm = 0;
  std::size_t qkv_codes = 0, o_codes = 0;  // FP8 mode only (0 bytes otherwise)
  std::size_t gated = 0;                   // the separate gate pass's output (0 bytes without one)
  int64_t codes_stride = 0;                // bytes per row of the Q | K | V codes
  std::size_t sdpa_bytes = 0, gemm_bytes = 0;
  int block_size = 0, blocks_per_seq = 0;
  int64_t proj_rows = 0;
  std::size_t total = 0;
  std::size_t pad_offset(const GatedGeometry& g) const;  // the pad rows' first byte in the workspace
  std::size_t pad_bytes(const GatedGeometry& g) const;   // 0 when the tokens fill whole blocks
};
constexpr std::size_t kGatedWorkspaceAlign = 256;
GatedWorkspaceLayout gated_workspace_layout(const GatedGeometry& g, int block_size, std::size_t sdpa_bytes,
                                            std::size_t gemm_bytes, bool fp8 = false, bool gate_pass = false,
                                            bool save = false);

// The save set a save_for_backward call writes, in the backend's memory, in GatedSaved's layouts (T = B S, packed):
// q [T, h_q, d] and k, v [T, h_kv, d] (the SDPA's inputs: Q, K after norm + RoPE), gate [T, h_q, d] (before the
// sigmoid), o [T, h_q, d] (the SDPA's output), dtype halves; lse fp32 [T, h_q]; rstd_q [T, h_q], rstd_k [T, h_kv]
// fp32 (under qk_norm; null without); q_pre [T, h_q, d] and k_pre [T, h_kv, d], the projection's Q and K (both set:
// written, RecomputePolicy::save_all's set; both null: not). None may overlap another or the params' buffers. Every
// pointer null without save_for_backward.
struct GatedSaveOut {
  void *q = nullptr, *k = nullptr, *v = nullptr, *gate = nullptr, *o = nullptr;
  float *lse = nullptr, *rstd_q = nullptr, *rstd_k = nullptr;
  void *q_pre = nullptr, *k_pre = nullptr;
};

// One call's data, in the backend's memory. h [B, S, d_model]; W_qkvg [N, d_model] in the block's layout;
// q_norm_weight, k_norm_weight [d] (unused without qk_norm); cos, sin [B, S, rope_dim] (unused when rope_dim is
// 0); W_o [d_model, h_q * d]; out [B, S, d_model]; all dtype halves, rows contiguous. workspace: workspace_size()
// bytes, prepared once with prepare_workspace(). The dims must equal the block's geometry.
// seq_lens (optional, int32 [B]): sequence b's keys are its first seq_lens[b] tokens, 0 <= seq_lens[b] <= S, the
// rest padding; every query row is computed (a row that sees no key outputs 0). Read on the device at each call
// (a graph replays new lengths); the CPU block checks the range, the GPU blocks trust it.
// lse (with return_lse, fp32 [B, h_q, S]): each query row's natural-log sum of exp over its scaled scores
// (AttentionParams::lse; -inf for a row that sees no key). save: GatedSaveOut, under save_for_backward only.
struct GatedBlockParams {
  const void* h = nullptr;
  const void* w_qkvg = nullptr;
  const void* q_norm_weight = nullptr;
  const void* k_norm_weight = nullptr;
  const void* cos = nullptr;
  const void* sin = nullptr;
  const void* w_o = nullptr;
  void* out = nullptr;
  void* workspace = nullptr;
  const int32_t* seq_lens = nullptr;
  float* lse = nullptr;
  // Under GatedOptions::fp8, h, w_qkvg and w_o hold e4m3 codes, one byte per element, in the same shapes.
  // Under GatedOptions::mx, w_qkvg and w_o hold MX codes (mx_quant.hpp's storage: [N, d_model] e4m3 bytes or
  // [N, d_model / 2] packed e2m1) and these their E8M0 scales, [N, d_model / 32] and [d_model, h_q d / 32].
  const uint8_t* w_qkvg_scales = nullptr;
  const uint8_t* w_o_scales = nullptr;
  GatedSaveOut save;  // GatedOptions::save_for_backward
  int batch = 0, seqlen = 0, d_model = 0, h_q = 0, h_kv = 0, d_head = 0, rope_dim = 0;
  DType dtype = DType::bf16;
};
// Params with the dims of `g` (pointers null).
GatedBlockParams make_gated_params(const GatedGeometry& g);
// The stages a block runs, in order: the QKVG projection; norm + RoPE (with qk_norm or rope_dim > 0; over the K
// heads only under fuse_norm_rope, whose Q part runs in the SDPA's Q load); the SDPA; the sigmoid gate (unless
// fuse_gate puts it in the SDPA epilogue); the out projection. Names: qkvg_proj, norm_rope | k_norm_rope,
// [q_norm_rope+]sdpa[+gate], gate, out_proj (the breakdown's stage names).
// Under fp8: fp8_qkvg_proj; norm_rope, then quantize_qkv (or, with fuse_norm_rope, norm_rope+quantize: one
// pass); sdpa; gate, then quantize_o (or, with fuse_gate, gate+quantize_o: one pass); fp8_out_proj.
// Under save_for_backward: qkvg_proj; norm_rope+save (save_qkv without norm or RoPE: the pass that packs Q, K, V
// into the save set always runs); sdpa; with return_lse lse_reorder (save.lse to params.lse's [B, h_q, S]);
// gate+save (the gate pass copies the GATE columns too); out_proj.
enum class GatedStage { proj, norm_rope, quantize_qkv, sdpa, lse_reorder, gate, quantize_o, out_proj };
std::vector<GatedStage> gated_stages(const GatedGeometry& g, const GatedOptions& o);
std::string gated_stage_name(GatedStage s, const GatedGeometry& g, const GatedOptions& o);
// fuse_norm_rope with something to fuse (qk_norm or rope_dim > 0), not under fp8: the SDPA problem has a Q prologue.
bool gated_fuses_norm_rope(const GatedGeometry& g, const GatedOptions& o);
// fuse_gate, not under fp8: the gate in the SDPA's epilogue. Under fp8 the O quantisation pass applies it (the
// FP8 SDPA's epilogue gate measured as slow as the separate pass: kernels/NOTES.md).
bool gated_gate_in_sdpa(const GatedOptions& o);
// Under fp8, fuse_norm_rope with a norm + RoPE pass to fuse into: that pass writes Q, K and V's codes.
bool gated_fuses_quantize(const GatedGeometry& g, const GatedOptions& o);
// fuse_norm_rope: the SDPA's Q-prologue params (norm weight, offset, eps, cos, sin, rope_dim) from the block's.
void set_gated_q_prologue(const GatedGeometry& g, const GatedOptions& o, const GatedBlockParams& p,
                          AttentionParams& a);
// The SDPA's strides over the projection view (Q, K, V at the projection's row stride, O packed, the block table
// one row per sequence; `prob` from gated_sdpa_problem), pointers null: what gated_sdpa_params fills in. Under
// save_for_backward Q, K, V are the save set's packed tensors (K and V viewed as pages of block_size tokens: a
// batch-1 call's last page may be partial, so the SDPA must read no token past seqused_k, as cuda.unified and
// cpu.unified do) and the LSE is [T, h_q].
AttentionParams gated_sdpa_strides(const GatedGeometry& g, const GatedOptions& o, const AttentionProblem& prob);
// The SDPA's params over the projection view in p.workspace (laid out as `l`; `prob` from gated_sdpa_problem): Q,
// K, V at their columns, the tables, the SDPA's workspace, the Q prologue and, with fuse_gate, the gate columns;
// the output is the workspace's attention region.
AttentionParams gated_sdpa_params(const GatedGeometry& g, const GatedOptions& o, const AttentionProblem& prob,
                                  const GatedWorkspaceLayout& l, const GatedBlockParams& p);

// A block built for one (geometry, dtype, options): every plan, descriptor and algorithm chosen at construction.
class GatedBlock {
 public:
  virtual ~GatedBlock() = default;
  virtual const GatedGeometry& geometry() const = 0;
  virtual const GatedOptions& options() const = 0;
  virtual std::size_t workspace_size() const = 0;
  // Writes the workspace's constant tables (cu_seqlens_q, seqused_k, the identity block table), enqueued on
  // `stream`. Once per workspace, before the first execute() and before any graph capture.
  virtual void prepare_workspace(void* workspace, void* stream) = 0;
  // One complete call on `stream` (a cudaStream_t; ignored on the CPU): allocates nothing, copies nothing to the
  // host, so it captures into a CUDA graph. Throws std::invalid_argument when params do not match the block or
  // the workspace was not prepared.
  virtual void execute(const GatedBlockParams& p, void* stream) const = 0;
  // The stages execute() runs, in order, for --breakdown: each can be run alone on the same params (stages after
  // the first read what earlier ones left in the workspace).
  virtual std::vector<std::string> stage_names() const = 0;
  virtual void execute_stage(int stage, const GatedBlockParams& p, void* stream) const = 0;
  virtual std::string summary() const = 0;
};

// A backend's gated block. supports() never throws; create() throws GatedDecline for what supports() declines.
class GatedBlockKernel {
 public:
  virtual ~GatedBlockKernel() = default;
  virtual std::string name() const = 0;
  virtual Backend backend() const = 0;
  virtual Support supports(const GatedGeometry& g, const GatedOptions& o, const KnobValues& knobs) const = 0;
  virtual std::unique_ptr<GatedBlock> create(const GatedGeometry& g, const GatedOptions& o,
                                             const KnobValues& knobs) const = 0;
};

// The backends' blocks: one orchestration (kernels/common/gated_orchestrator.hpp) over each backend's provider.
// cpu.gated_block: fp32 math over dtype-rounded stage outputs, OpenMP; SDPA through cpu.unified.
std::unique_ptr<GatedBlockKernel> make_cpu_gated_block();
#ifdef ATTNBENCH_WITH_CUDA
// cuda.gated_block: cuBLASLt projections, a norm+RoPE kernel, cuda.unified SDPA, a sigmoid-gate kernel.
std::unique_ptr<GatedBlockKernel> make_cuda_gated_block();
#endif
// cudnn.gated_chain: the vendor chain, unfused (cuBLASLt projections, the elementwise kernels, cudnn.sdpa). Defined
// only in builds with cudnn.sdpa (ATTNBENCH_WITH_CUDNN).
std::unique_ptr<GatedBlockKernel> make_cudnn_gated_chain();

}  // namespace attnbench
