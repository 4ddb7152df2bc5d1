// hip.unified: the dispatcher. supports() and plan() ask one resolve step (resolve.cpp) for the instance and its
// regime, grid, splits and workspace; plan() looks up the instance's launcher once; run() only enqueues the chosen
// kernels on the caller's stream, allocates nothing, and so captures into a graph.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "attnbench/backends.hpp"
#include "hip/launch.hpp"
#include "hip/resolve.hpp"
#include "hip/runtime.hpp"

namespace attnbench {
namespace {

struct HipUnifiedPlan : AttentionPlan {
  hip::UnifiedInstance instance;
  const hip::InstanceLauncher* launcher = nullptr;
};

// Device 0, asked once; the defaults (an MI300X) where there is none.
hip::DeviceInfo device_info() {
  static const hip::DeviceInfo d = [] {
    hip::DeviceInfo info;
    if (gpu::device_count() <= 0) return info;
    hipDeviceProp_t p{};
    ATTNBENCH_HIP_CHECK(hipGetDeviceProperties(&p, 0));
    info.cu_count = p.multiProcessorCount;
    const std::string arch = p.gcnArchName;  // e.g. gfx942:sramecc+:xnack-
    info.arch = arch.substr(0, arch.find(':'));
    return info;
  }();
  return d;
}

const hip::InstanceLauncher* find_launcher(const hip::InstanceKey& key) {
  const hip::InstanceTable t = hip::built_instances();
  for (const hip::InstanceLauncher* e = t.begin; e != t.end; ++e)
    if (e->key == key) return e;
  return nullptr;
}

hip::Resolution resolve_in_build(const AttentionProblem& p, const KnobValues& knobs) {
  return hip::resolve(p, hip::HipKnobs::parse(knobs), device_info(),
                      [](const hip::InstanceKey& key) { return find_launcher(key) != nullptr; });
}

// The params against the plan: what the kernels' 8- and 16-byte loads and stores assume.
void check_params(const HipUnifiedPlan& plan, const AttentionParams& a) {
  if (a.head_size != plan.instance.key.head_size || a.types != plan.instance.types)
    throw std::invalid_argument("hip.unified: params do not match the plan (head_size/types)");
  if (plan.workspace_bytes > 0 && a.workspace == nullptr)
    throw std::invalid_argument("hip.unified: plan needs " + std::to_string(plan.workspace_bytes) +
                                " workspace bytes, params.workspace is null");
  check_gpu_layout("hip.unified", a);
  const void* out = a.out;
  const void* workspace = a.workspace;
  for (const void* ptr : {a.q, a.k_cache, a.v_cache, out, workspace})
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0)
      throw std::invalid_argument("hip.unified: q, k_cache, v_cache, out and workspace must be 16-byte aligned");
  if (a.epilogue.gate != nullptr || a.prologue.q_norm_weight != nullptr || a.prologue.rope_cos != nullptr)
    throw std::invalid_argument("hip.unified: has no output gate or Q prologue");
}

class HipUnified final : public AttentionKernel {
 public:
  std::string name() const override { return "hip.unified"; }
  Backend backend() const override { return Backend::hip; }
  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    return resolve_in_build(p, knobs).support;
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const hip::Resolution r = resolve_in_build(p, knobs);
    if (!r.ok()) throw std::invalid_argument("hip.unified: " + r.support.reason);
    auto plan = std::make_unique<HipUnifiedPlan>();
    plan->instance = r.instance;
    plan->launcher = find_launcher(r.instance.key);
    plan->workspace_bytes = r.instance.launch.workspace_bytes;
    plan->graph_replay = r.instance.graph_replay;
    plan->summary = r.instance.launch.summary + " " + r.instance.arch;
    return plan;
  }

  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    const auto* hp = dynamic_cast<const HipUnifiedPlan*>(&plan);
    if (!hp) throw std::invalid_argument("hip.unified: plan was not made by hip.unified");
    check_params(*hp, a);
    hp->launcher->launch(a, hp->instance.launch, stream);
  }
};

}  // namespace

std::unique_ptr<AttentionKernel> make_hip_unified() { return std::make_unique<HipUnified>(); }

}  // namespace attnbench
