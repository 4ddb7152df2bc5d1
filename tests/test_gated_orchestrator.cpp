// The gated block's common orchestration over a test-only provider that records every call: the stages in
// order, the pointers each GEMM and the SDPA receive, the provider hooks' declines and params checks, the strides
// the SDPA kernel is made for, a provider that does not fuse, and an SDPA that reads whole pages of the view.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../kernels/common/gated_orchestrator.hpp"
#include "attnbench/gated_block.hpp"
#include "gated_test_helpers.hpp"

namespace attnbench {
namespace {

using namespace gatedtest;

// A test-only provider that records every call, so the common orchestration's order and wiring are observable.
struct FakeFlags {
  bool decline_work = false, decline_sdpa = false, reject_params = false, fuses = true;
  bool sdpa_has_no_gate = false;  // the SDPA declines problems with the output gate
  bool read_pages = false;        // the SDPA reads every K and V row of every page the table names, as cuDNN does
};

struct FakeLog {
  std::vector<std::string> calls;
  std::vector<std::array<const void*, 4>> gemm_ptrs;  // a, b, c, workspace per GEMM run
  const void* sdpa_q = nullptr;
  const void* sdpa_out = nullptr;
  AttentionParams sdpa_layout, sdpa_params;  // what make_sdpa was told, what the SDPA ran with
  std::vector<AttentionFusion> sdpa_asked;   // the fusion of every problem supports() saw
  const unsigned char* pages_end = nullptr;  // read_pages: one past the last byte read
  int64_t nonfinite_read = 0;                // read_pages: NaN or Inf halves read
};

// Reads every K and V row of every page the table names for a sequence's keys, whole pages (bf16 halves).
void read_whole_pages(const AttentionParams& a, FakeLog* log) {
  const auto note = [&](const void* base, int64_t block, int t, int h) {
    const auto* row = static_cast<const uint16_t*>(base) + block * a.kv_stride_block + t * a.kv_stride_token +
                      h * a.kv_stride_head;
    for (int i = 0; i < a.head_size; ++i) log->nonfinite_read += (row[i] & 0x7F80) == 0x7F80;
    log->pages_end = std::max(log->pages_end, reinterpret_cast<const unsigned char*>(row + a.head_size));
  };
  for (int s = 0; s < a.num_seqs; ++s)
    for (int j = 0; j < (a.seqused_k[s] + a.block_size - 1) / a.block_size; ++j)
      for (int t = 0; t < a.block_size; ++t)
        for (int h = 0; h < a.kv_heads; ++h) {
          note(a.k_cache, a.block_table[s * a.block_table_stride + j], t, h);
          note(a.v_cache, a.block_table[s * a.block_table_stride + j], t, h);
        }
}

class FakeSdpa final : public AttentionKernel {
 public:
  FakeSdpa(FakeLog* log, FakeFlags f) : log_(log), f_(f) {}
  std::string name() const override { return "fake.sdpa"; }
  Backend backend() const override { return Backend::cpu; }
  Support supports(const AttentionProblem& p, const KnobValues&) const override {
    log_->sdpa_asked.push_back(p.fusion);
    if (f_.sdpa_has_no_gate && p.fusion.output_gate) return Support::no("no gate epilogue");
    return f_.decline_sdpa ? Support::no("planted") : Support::yes();
  }
  std::unique_ptr<AttentionPlan> plan(const AttentionProblem&, const KnobValues&) const override {
    auto p = std::make_unique<AttentionPlan>();
    p->summary = "plan";
    return p;
  }
  void run(const AttentionPlan&, const AttentionParams& a, void*) const override {
    log_->calls.push_back("sdpa");
    log_->sdpa_q = a.q;
    log_->sdpa_out = a.out;
    log_->sdpa_params = a;
    if (f_.read_pages) read_whole_pages(a, log_);
  }

 private:
  FakeLog* log_;
  FakeFlags f_;
};

class FakeGemm final : public GatedGemm {
 public:
  FakeGemm(FakeLog* log, std::string shape) : log_(log), shape_(std::move(shape)) {}
  std::size_t workspace_bytes() const override { return 512; }
  std::string summary() const override { return "fake " + shape_; }
  void run(const void* a, const void* b, void* c, void* ws, void*) const override {
    log_->calls.push_back("gemm " + shape_);
    log_->gemm_ptrs.push_back({a, b, c, ws});
  }

 private:
  FakeLog* log_;
  std::string shape_;
};

class FakeProvider final : public GatedProvider {
 public:
  FakeProvider(FakeLog* log, FakeFlags f = {}) : log_(log), f_(f) {}
  std::string name() const override { return "fake.gated_block"; }
  Backend backend() const override { return Backend::cpu; }
  std::unique_ptr<AttentionKernel> make_sdpa(const AttentionParams& layout) const override {
    log_->sdpa_layout = layout;
    return std::make_unique<FakeSdpa>(log_, f_);
  }
  bool fuses() const override { return f_.fuses; }
  std::unique_ptr<GatedGemm> make_gemm(DType, int64_t m, int64_t n, int64_t k) const override {
    const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    log_->calls.push_back("make_gemm " + shape);
    return std::make_unique<FakeGemm>(log_, shape);
  }
  void fill_tables(const GatedTablesParams& t, void*) const override {
    log_->calls.push_back("tables nb=" + std::to_string(t.blocks_per_seq));
    for (int b = 0; b <= t.batch; ++b) t.cu_seqlens_q[b] = b * t.seqlen;
    for (int b = 0; b < t.batch; ++b) {
      t.seqused_k[b] = t.seqlen;
      for (int j = 0; j < t.blocks_per_seq; ++j)
        t.block_table[b * t.blocks_per_seq + j] = b * t.seqlen / t.block_size + j;
    }
  }
  void zero(void* dst, std::size_t bytes, void*) const override {
    log_->calls.push_back("zero " + std::to_string(bytes));
    std::memset(dst, 0, bytes);
  }
  void norm_rope(DType, int, const GatedNormRopeParams& p, void*) const override {
    log_->calls.push_back("norm_rope h_q=" + std::to_string(p.h_q) + " h_kv=" + std::to_string(p.h_kv));
  }
  void sigmoid_gate(DType, const GatedSigmoidParams& p, void*) const override {
    if (p.out == p.o) throw std::logic_error("the gate pass was told to write over its own input");
    log_->calls.push_back("gate heads=" + std::to_string(p.heads));
  }
  void check_support(const GatedGeometry&, const GatedOptions&, const KnobValues&) const override {
    if (f_.decline_work) throw GatedDecline("work", "planted");
  }
  std::string params_conflict(const GatedGeometry&, const GatedOptions&, const GatedBlockParams&) const override {
    return f_.reject_params ? "planted conflict" : "";
  }

 private:
  FakeLog* log_;
  FakeFlags f_;
};

// Host buffers standing in for a call's data: the fake provider reads none of them.
struct FakeCall {
  std::vector<unsigned char> ws, data = std::vector<unsigned char>(64);
  GatedBlockParams p;
  FakeCall(const GatedGeometry& g, std::size_t ws_bytes) : ws(ws_bytes), p(make_gated_params(g)) {
    p.h = p.w_qkvg = p.q_norm_weight = p.k_norm_weight = p.cos = p.sin = p.w_o = data.data();
    p.out = data.data() + 32;
    p.workspace = ws.data();
  }
};

TEST(GatedOrchestration, AFakeProviderIsDrivenThroughTheStagesInOrder) {
  const GatedGeometry g(small_dims());
  FakeLog log;
  const auto k = make_gated_block_kernel(std::make_shared<const FakeProvider>(&log));
  EXPECT_EQ(k->name(), "fake.gated_block");
  auto block = k->create(g, plain_options(), knobs());
  EXPECT_EQ(log.calls, (std::vector<std::string>{"make_gemm 100x768x256", "make_gemm 100x256x256"}));
  const GatedWorkspaceLayout l = gated_workspace_layout(g, 64, 0, 512, false, true);  // the gate is a pass
  EXPECT_EQ(block->workspace_size(), l.total);
  EXPECT_EQ(block->summary(), "qkvg flat fake 100x768x256; sdpa fake.sdpa plan block_size=64; norm+rope separate; "
                              "gate separate; out fake 100x256x256");
  FakeCall c(g, block->workspace_size());
  log.calls.clear();
  EXPECT_THROW(block->execute(c.p, nullptr), std::invalid_argument);  // workspace not prepared
  EXPECT_TRUE(log.calls.empty());
  block->prepare_workspace(c.ws.data(), nullptr);
  block->execute(c.p, nullptr);
  EXPECT_EQ(log.calls, (std::vector<std::string>{"tables nb=2", "gemm 100x768x256", "zero 43008",
                                                 "norm_rope h_q=4 h_kv=2", "sdpa", "gate heads=4",
                                                 "gemm 100x256x256"}));  // the pad: 28 rows of 768
  unsigned char* ws = c.ws.data();
  ASSERT_EQ(log.gemm_ptrs.size(), 2u);
  EXPECT_EQ(log.gemm_ptrs[0], (std::array<const void*, 4>{c.p.h, c.p.w_qkvg, ws + l.proj, ws + l.gemm}));
  // The out projection reads the gate pass's output; the SDPA's O stays as it wrote it.
  EXPECT_EQ(log.gemm_ptrs[1], (std::array<const void*, 4>{ws + l.gated, c.p.w_o, c.p.out, ws + l.gemm}));
  EXPECT_EQ(log.sdpa_q, ws + l.proj);
  EXPECT_EQ(log.sdpa_out, ws + l.attn);
  log.calls.clear();
  block->execute_stage(3, c.p, nullptr);
  EXPECT_EQ(log.calls, (std::vector<std::string>{"gate heads=4"}));

  GatedOptions fused = plain_options();
  fused.fuse_gate = fused.fuse_norm_rope = true;
  block = k->create(g, fused, knobs());
  FakeCall f(g, block->workspace_size());
  block->prepare_workspace(f.ws.data(), nullptr);
  log.calls.clear();
  block->execute(f.p, nullptr);
  EXPECT_EQ(log.calls, (std::vector<std::string>{"gemm 100x768x256", "zero 43008", "norm_rope h_q=0 h_kv=2",
                                                 "sdpa", "gemm 100x256x256"}));
}

TEST(GatedOrchestration, ProviderHooksDeclineAndRejectBeforeAnyCall) {
  const GatedGeometry g(small_dims());
  FakeLog log;
  auto kernel = [&](FakeFlags f) { return make_gated_block_kernel(std::make_shared<const FakeProvider>(&log, f)); };
  FakeFlags f;
  f.decline_work = true;
  Support s = kernel(f)->supports(g, plain_options(), knobs());
  EXPECT_NE(s.reason.find("field 'work': planted"), std::string::npos) << s.reason;
  EXPECT_EQ(decline_field([&] { kernel(f)->create(g, plain_options(), knobs()); }), "work");
  f = {};
  f.decline_sdpa = true;
  s = kernel(f)->supports(g, plain_options(), knobs());
  EXPECT_NE(s.reason.find("field 'sdpa': fake.sdpa declines: planted"), std::string::npos) << s.reason;
  EXPECT_TRUE(log.calls.empty());  // declined before any GEMM was built
  f = {};
  f.reject_params = true;
  auto block = kernel(f)->create(g, plain_options(), knobs());
  FakeCall c(g, block->workspace_size());
  block->prepare_workspace(c.ws.data(), nullptr);
  log.calls.clear();
  for (int stage : {-1, 0}) {
    try {
      stage < 0 ? block->execute(c.p, nullptr) : block->execute_stage(stage, c.p, nullptr);
      ADD_FAILURE() << "the params hook did not reject";
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(), "fake.gated_block: planted conflict");
    }
  }
  EXPECT_TRUE(log.calls.empty());
}

// make_sdpa() is told the strides the SDPA's params will have, before any call: a kernel that plans per layout
// (cudnn.sdpa) plans on the one it runs.
TEST(GatedOrchestration, TheSdpaIsMadeForTheStridesItRunsOn) {
  const GatedGeometry g(small_dims(96, 2));
  for (QGateLayout layout : {QGateLayout::flat, QGateLayout::interleaved}) {
    FakeLog log;
    GatedOptions o = plain_options();
    o.q_gate_layout = layout;
    auto block = make_gated_block_kernel(std::make_shared<const FakeProvider>(&log))->create(g, o, knobs());
    const AttentionParams want = log.sdpa_layout;
    EXPECT_EQ(want.q, nullptr);
    FakeCall c(g, block->workspace_size());
    block->prepare_workspace(c.ws.data(), nullptr);
    block->execute(c.p, nullptr);
    const AttentionParams& got = log.sdpa_params;
    EXPECT_EQ(got.q_stride_token, g.n_qkvg());
    EXPECT_EQ(got.q_stride_head, layout == QGateLayout::flat ? 64 : 128);
    for (auto m : {&AttentionParams::q_stride_token, &AttentionParams::q_stride_head, &AttentionParams::o_stride_token,
                   &AttentionParams::o_stride_head, &AttentionParams::kv_stride_block,
                   &AttentionParams::kv_stride_token, &AttentionParams::kv_stride_head})
      EXPECT_EQ(want.*m, got.*m) << q_gate_layout_name(layout);
    EXPECT_EQ(want.block_table_stride, got.block_table_stride);
  }
}

// A provider that does not fuse (a vendor chain) runs every stage on its own whatever fusion it is asked for: the
// options are cleared before any check, so a fusion is never the reason for a decline, and the summary says so.
TEST(GatedOrchestration, ANonFusingProviderClearsTheFusionOptions) {
  const GatedGeometry g(small_dims());
  FakeLog log;
  FakeFlags f;
  f.fuses = false;
  const auto k = make_gated_block_kernel(std::make_shared<const FakeProvider>(&log, f));
  GatedOptions fused = plain_options();
  fused.fuse_gate = fused.fuse_norm_rope = true;
  EXPECT_TRUE(k->supports(g, fused, knobs()).ok);
  auto block = k->create(g, fused, knobs());
  EXPECT_FALSE(block->options().fuse_gate);
  EXPECT_FALSE(block->options().fuse_norm_rope);
  ASSERT_FALSE(log.sdpa_asked.empty());
  for (const AttentionFusion& asked : log.sdpa_asked) {
    EXPECT_FALSE(asked.output_gate);
    EXPECT_FALSE(asked.has_q_prologue());
  }
  EXPECT_EQ(block->stage_names(), (std::vector<std::string>{"qkvg_proj", "norm_rope", "sdpa", "gate", "out_proj"}));
  EXPECT_EQ(block->summary().rfind("unfused chain, fusion options ignored; qkvg flat", 0), 0u) << block->summary();
  EXPECT_NE(block->summary().find("norm+rope separate; gate separate"), std::string::npos) << block->summary();
  FakeCall c(g, block->workspace_size());
  block->prepare_workspace(c.ws.data(), nullptr);
  log.calls.clear();
  block->execute(c.p, nullptr);
  EXPECT_EQ(log.calls, (std::vector<std::string>{"gemm 100x768x256", "zero 43008", "norm_rope h_q=4 h_kv=2",
                                                 "sdpa", "gate heads=4", "gemm 100x256x256"}));
  EXPECT_EQ(log.sdpa_params.epilogue.gate, nullptr);

  // An SDPA without a gate epilogue: a fusing provider declines the fused gate, the chain takes the request.
  f.sdpa_has_no_gate = true;
  EXPECT_TRUE(make_gated_block_kernel(std::make_shared<const FakeProvider>(&log, f))->supports(g, fused, knobs()).ok);
  f.fuses = true;
  const Support s = make_gated_block_kernel(std::make_shared<const FakeProvider>(&log, f))->supports(g, fused, knobs());
  EXPECT_NE(s.reason.find("field 'fuse_gate'"), std::string::npos) << s.reason;
}

// An SDPA that reads whole pages (cuDNN's paged containers) stays inside the projection and reads finite values
// only, though the caller's workspace is NaN outside the rows the projection GEMM writes: the pad rows past the
// last token are zeroed on every call. One sequence of 100 tokens: its second block of 64 is partial.
TEST(GatedOrchestration, AnSdpaReadingWholePagesStaysInsideTheProjection) {
  const GatedGeometry g(small_dims(100, 1));
  FakeLog log;
  FakeFlags f;
  f.read_pages = true;
  auto block = make_gated_block_kernel(std::make_shared<const FakeProvider>(&log, f))->create(g, plain_options(),
                                                                                              knobs());
  const GatedWorkspaceLayout l = gated_workspace_layout(g, gated_block_size(g), 0, 512, false, true);
  ASSERT_EQ(block->workspace_size(), l.total);
  FakeCall c(g, block->workspace_size());
  std::fill(c.ws.begin(), c.ws.end(), 0xFF);
  block->prepare_workspace(c.ws.data(), nullptr);
  auto* proj = reinterpret_cast<uint16_t*>(c.ws.data() + l.proj);
  std::fill(proj, proj + g.tokens() * g.n_qkvg(), uint16_t{0x3F80});  // what the GEMM would write: 1.0
  const unsigned char* proj_end = c.ws.data() + l.proj + l.proj_rows * g.n_qkvg() * 2;
  for (int call = 0; call < 2; ++call) {
    log.pages_end = nullptr;
    log.nonfinite_read = 0;
    block->execute(c.p, nullptr);
    EXPECT_EQ(log.nonfinite_read, 0) << "call " << call;
    ASSERT_NE(log.pages_end, nullptr);
    EXPECT_LE(log.pages_end, proj_end) << "call " << call;
    EXPECT_LE(log.pages_end, c.ws.data() + l.attn) << "call " << call;
    std::memset(c.ws.data() + l.pad_offset(g), 0xFF, l.pad_bytes(g));  // the caller's memory, changed
  }
}

}  // namespace
}  // namespace attnbench
