// cuda.unified: the dispatcher. plan() derives path, grid, splits and workspace (heuristics.cpp) and looks up the
// kernel instance once; run() only enqueues the chosen kernels on the caller's stream, allocates nothing, and so
// captures into a graph.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "attnbench/backends.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"

namespace attnbench {
namespace {

using cuda::UnifiedLaunchPlan;
using cuda::UnifiedPath;

// The wide kernel's TMA maps describe the K/V pointers and layout of a call: encoded the first time a plan runs on
// them and reused while they stay the same (the usual case: one set of buffers per plan), so the host encode is
// not on every call's path.
class KvMapCache {
 public:
  cuda::KvTensorMaps get(const AttentionParams& a) const {
    const Key key{a.k_cache, a.v_cache, a.kv_stride_head, a.kv_stride_token, a.kv_stride_block, a.kv_heads,
                  a.block_size};
    std::lock_guard<std::mutex> lock(mu_);
    if (!valid_ || key != key_) {
      maps_ = cuda::encode_kv_maps(a);
      key_ = key;
      valid_ = true;
    }
    return maps_;
  }

 private:
  using Key = std::tuple<const void*, const void*, int64_t, int64_t, int64_t, int, int>;
  mutable std::mutex mu_;
  mutable bool valid_ = false;
  mutable Key key_;
  mutable cuda::KvTensorMaps maps_;
};

struct CudaUnifiedPlan : AttentionPlan {
  UnifiedLaunchPlan launch;
  int head_size = 0;
  DType dtype = DType::bf16;
  bool output_gate = false;
  bool q_norm = false;  // the Q prologue (2D wide)
  int q_rope_dim = 0;
  // 3D with splits > 1: the arrival counters at the workspace's end (decode_workspace_bytes) are zeroed the first
  // time this plan runs on a workspace pointer; the kernel leaves them zero after every call.
  std::size_t counter_offset = 0, counter_bytes = 0;
  mutable std::atomic<const void*> counters_zeroed_for{nullptr};
  KvMapCache kv_maps;  // 2D wide with TMA K/V
  cuda::InstanceKey instance;                        // the kernel instance `launch` runs
  const cuda::InstanceLauncher* launcher = nullptr;  // its entry in built_instances(); nullptr: not built
};

int sm_count() {
  static const int n = cuda::device_count() > 0 ? cuda::device_props(0).sm_count : cuda::kDefaultSmCount;
  return n;
}

// The instance `key` in this build's table (instances.cmake); nullptr when the build leaves it out.
const cuda::InstanceLauncher* find_launcher(const cuda::InstanceKey& key) {
  const cuda::InstanceTable t = cuda::built_instances();
  return cuda::find_instance(t.begin, t.end, key);
}

// supports()' last check: the build has the instance the plan would run. A problem the plan itself refuses is
// left for plan() to report; the SM count does not change the key, so the device is not asked.
Support instance_support(const AttentionProblem& p, const KnobValues& knobs) {
  UnifiedLaunchPlan lp;
  try {
    lp = cuda::make_unified_launch_plan(p, knobs, cuda::kDefaultSmCount);
  } catch (const std::exception&) {
    return Support::yes();
  }
  const cuda::InstanceKey key = cuda::instance_key(p, lp);
  return find_launcher(key) ? Support::yes() : cuda::no_instance(key);
}

// The one dispatch point: the plan's instance; the wide kernel also gets the K/V tensor maps.
void launch(const CudaUnifiedPlan& plan, const AttentionParams& a, cudaStream_t s) {
  const UnifiedLaunchPlan& lp = plan.launch;
  if (!plan.launcher->wide) return plan.launcher->plain(a, lp, s);
  cuda::KvTensorMaps maps;
  if (lp.wide_kv_tma) maps = plan.kv_maps.get(a);
  plan.launcher->wide(a, lp, lp.wide_kv_tma ? &maps : nullptr, s);
}

// The Q prologue's params against the plan, 16-byte aligned (the kernel reads weight, cos and sin rows in 16-byte
// chunks).
void check_q_prologue(const CudaUnifiedPlan& plan, const AttentionParams& a) {
  check_q_prologue_params("cuda.unified", plan.q_norm, plan.q_rope_dim, a);
  for (const void* ptr : {a.q_norm_weight, a.rope_cos, a.rope_sin})
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0)
      throw std::invalid_argument("cuda.unified: q_norm_weight, rope_cos and rope_sin must be 16-byte aligned");
}

class CudaUnified final : public AttentionKernel {
 public:
  std::string name() const override { return "cuda.unified"; }
  Backend backend() const override { return Backend::cuda; }
  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    const Support s = cuda::unified_supports(p);
    if (!s.ok) return s;
    const std::string prologue = cuda::q_prologue_conflict(p, knobs);
    if (!prologue.empty()) return Support::no(prologue);
    // Knobs that force the wide regime onto a geometry it cannot hold are declined with the reason.
    if (cuda::choose_path(p) == UnifiedPath::prefill_2d && knobs.get("ATTNBENCH_SM90_PATH") == "wide") {
      const std::string conflict = cuda::wide_knob_conflict(p, knobs);
      if (!conflict.empty()) return Support::no(conflict);
    }
    return instance_support(p, knobs);
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    // A Q prologue the chosen kernel does not have would silently be skipped: refuse it here too.
    const std::string prologue = cuda::q_prologue_conflict(p, knobs);
    if (!prologue.empty()) throw std::invalid_argument("cuda.unified: " + prologue);
    auto plan = std::make_unique<CudaUnifiedPlan>();
    plan->launch = cuda::make_unified_launch_plan(p, knobs, sm_count());
    plan->instance = cuda::instance_key(p, plan->launch);
    plan->launcher = find_launcher(plan->instance);
    if (!plan->launcher) throw std::invalid_argument("cuda.unified: " + cuda::no_instance(plan->instance).reason);
    plan->head_size = p.head_size;
    plan->dtype = p.types.q;
    plan->output_gate = p.output_gate;
    plan->q_norm = p.q_norm;
    plan->q_rope_dim = p.q_rope_dim;
    plan->workspace_bytes = plan->launch.workspace_bytes;
    if (plan->launch.workspace_bytes > 0) {
      plan->counter_bytes = static_cast<std::size_t>(cuda::decode_counter_count(p)) * sizeof(int32_t);
      plan->counter_offset = plan->launch.workspace_bytes - plan->counter_bytes;
    }
    plan->graph_replay = cuda::recommend_graph_replay(p, knobs, /*caller_capturing=*/false);
    plan->summary = plan->launch.summary + (p.has_q_prologue() ? " +q-norm-rope" : "") + (p.output_gate ? " +gate" : "");
    return plan;
  }

  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    const auto* cp = dynamic_cast<const CudaUnifiedPlan*>(&plan);
    if (!cp) throw std::invalid_argument("cuda.unified: plan was not made by cuda.unified");
    if (!cp->launcher) throw std::invalid_argument("cuda.unified: " + cuda::no_instance(cp->instance).reason);
    if (a.head_size != cp->head_size || a.types != AttentionTypes::all(cp->dtype))
      throw std::invalid_argument("cuda.unified: params do not match the plan (head_size/types)");
    if (cp->workspace_bytes > 0 && a.workspace == nullptr)
      throw std::invalid_argument("cuda.unified: plan needs " + std::to_string(cp->workspace_bytes) +
                                  " workspace bytes, params.workspace is null");
    if ((a.q_stride_token | a.q_stride_head | a.o_stride_token | a.o_stride_head | a.kv_stride_block |
         a.kv_stride_token | a.kv_stride_head) % 8 != 0)
      throw std::invalid_argument("cuda.unified: strides must be multiples of 8 elements (16-byte rows)");
    if (cp->output_gate != (a.gate != nullptr))
      throw std::invalid_argument(cp->output_gate ? "cuda.unified: the problem has an output gate, params.gate is null"
                                                  : "cuda.unified: params.gate set for a problem without output_gate");
    if (a.gate != nullptr && ((a.gate_stride_token | a.gate_stride_head) % 2 != 0 ||
                              reinterpret_cast<std::uintptr_t>(a.gate) % 4 != 0))
      throw std::invalid_argument("cuda.unified: gate strides must be even and the gate 4-byte aligned");
    check_q_prologue(*cp, a);
    const auto s = static_cast<cudaStream_t>(stream);
    if (cp->counter_bytes > 0 && cp->counters_zeroed_for.load() != a.workspace) {
      // Enqueued (and captured) like the kernels; after this call the kernel keeps the counters zero.
      // While capturing, the memset becomes part of the graph and the eager state stays unknown.
      ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(a.workspace) + cp->counter_offset, 0,
                                           cp->counter_bytes, s));
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      ATTNBENCH_CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
      if (cs == cudaStreamCaptureStatusNone) cp->counters_zeroed_for.store(a.workspace);
    }
    launch(*cp, a, s);
  }
};

}  // namespace

std::unique_ptr<AttentionKernel> make_cuda_unified() { return std::make_unique<CudaUnified>(); }

}  // namespace attnbench
