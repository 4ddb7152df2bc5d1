// cuda.unified: the dispatcher. supports() and plan() ask one resolve step (resolve.cpp) for the instance and its
// path, grid, splits and workspace; plan() looks up the instance's launcher once; run() only enqueues the chosen
// kernels on the caller's stream, allocates no device memory, and so captures into a graph.
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "attnbench/backends.hpp"
#include "common/device/paged.hpp"
#include "common/workspace_owners.hpp"
#include "cuda/heuristics.hpp"
#include "cuda/launch.hpp"
#include "cuda/resolve.hpp"
#include "cuda/runtime.hpp"
#include "cuda/tensor_map.hpp"
#include "cuda/wide_walk.hpp"

namespace attnbench {
namespace {

using cuda::UnifiedLaunchPlan;

// The wide kernel's TMA maps describe the pointers and layout of a call: encoded the first time a plan runs on
// them and reused while they stay the same (the usual case: one set of buffers per plan), so the host encode is
// not on every call's path. Key: what the maps encode; Encode: (params) -> maps.
template <typename Maps, typename Key>
class MapCache {
 public:
  template <typename Encode>
  Maps get(const Key& key, Encode encode) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!valid_ || key != key_) {
      maps_ = encode();
      key_ = key;
      valid_ = true;
    }
    return maps_;
  }

 private:
  mutable std::mutex mu_;
  mutable bool valid_ = false;
  mutable Key key_;
  mutable Maps maps_;
};
using KvMapKey = std::tuple<const void*, const void*, int64_t, int64_t, int64_t, int, int>;
using QoMapKey = std::tuple<const void*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t, int>;

struct CudaUnifiedPlan : AttentionPlan {
  ~CudaUnifiedPlan() override { forget_workspace_plan(id); }
  cuda::UnifiedInstance instance;  // what runs: key, launch geometry, features
  // What the workspace holds across calls, written when this plan runs on a workspace that another plan (or none)
  // ran on last (workspace_owners.hpp): 3D with splits > 1, the arrival counters at its end
  // (decode_workspace_bytes), zeroed (the kernel leaves them zero after every call); 2D wide with the L2 walk, the
  // walk's table, copied from page-locked memory (so that a capture records the copy like the kernels).
  std::size_t counter_offset = 0, counter_bytes = 0;
  std::unique_ptr<gpu::MappedHostMemory> walk_table;
  std::size_t walk_bytes = 0;
  const uint64_t id = new_plan_id();
  MapCache<cuda::KvTensorMaps, KvMapKey> kv_maps;  // 2D wide with TMA K/V
  MapCache<cuda::QoTensorMaps, QoMapKey> qo_maps;  // 2D wide with TMA Q and O
  const cuda::InstanceLauncher* launcher = nullptr;  // the instance's entry in built_instances()
  bool return_lse = false;  // the problem's: params.lse must be set exactly then
  int64_t total_q = 0;      // the problem's: Q's and O's TMA maps span exactly these tokens
};

// Device 0, asked once; the defaults where there is none.
cuda::DeviceInfo device_info() {
  static const cuda::DeviceInfo d = [] {
    if (cuda::device_count() <= 0) return cuda::DeviceInfo{};
    const auto props = cuda::device_props(0);
    return cuda::DeviceInfo{props.sm_count, props.cc_major * 10 + props.cc_minor};
  }();
  return d;
}

// The instance `key` in this build's table (instances.cmake); nullptr when the build leaves it out.
const cuda::InstanceLauncher* find_launcher(const cuda::InstanceKey& key) {
  const cuda::InstanceTable t = cuda::built_instances();
  return cuda::find_instance(t.begin, t.end, key);
}

// The resolve step against this build's instance table.
cuda::Resolution resolve_in_build(const AttentionProblem& p, const KnobValues& knobs, const cuda::DeviceInfo& device) {
  return cuda::resolve(p, cuda::UnifiedKnobs::parse(knobs), device,
                       [](const cuda::InstanceKey& key) { return find_launcher(key) != nullptr; });
}

// The one dispatch point: the plan's instance; the wide kernel also gets the tensor maps its plan reads by TMA.
void launch(const CudaUnifiedPlan& plan, const AttentionParams& a, cudaStream_t s) {
  const UnifiedLaunchPlan& lp = plan.instance.launch;
  if (!plan.launcher->wide) return plan.launcher->plain(a, lp, s);
  cuda::KvTensorMaps kv;
  cuda::QoTensorMaps qo;
  if (lp.wide_kv_tma)
    kv = plan.kv_maps.get(KvMapKey{a.k_cache, a.v_cache, a.kv_stride_head, a.kv_stride_token, a.kv_stride_block,
                                   a.kv_heads, a.block_size},
                          [&] { return cuda::encode_kv_maps(a); });
  if (lp.wide_qo_tma)
    qo = plan.qo_maps.get(QoMapKey{a.q, a.out, a.q_stride_token, a.q_stride_head, a.o_stride_token,
                                   a.o_stride_head, a.total_q, a.heads},
                          [&] { return cuda::encode_qo_maps(a, lp.wide_tq); });
  plan.launcher->wide(a, lp, lp.wide_kv_tma ? &kv : nullptr, lp.wide_qo_tma ? &qo : nullptr, s);
}

// Q and O by TMA: their maps span params.total_q tokens from 16-byte aligned bases, so a wrong count would drop or
// zero rows without an error.
void check_qo_tma(const CudaUnifiedPlan& plan, const AttentionParams& a) {
  if (!plan.instance.launch.wide_qo_tma) return;
  if (a.total_q != plan.total_q)
    throw std::invalid_argument("cuda.unified: params.total_q " + std::to_string(a.total_q) +
                                " is not the problem's " + std::to_string(plan.total_q) +
                                " (Q and O are read and written by TMA over that extent)");
  if ((reinterpret_cast<std::uintptr_t>(a.q) | reinterpret_cast<std::uintptr_t>(a.out)) % 16 != 0)
    throw std::invalid_argument("cuda.unified: q and out must be 16-byte aligned");
}

// The Q prologue's params against the plan, 16-byte aligned (the kernel reads weight, cos and sin rows in 16-byte
// chunks).
void check_q_prologue(const CudaUnifiedPlan& plan, const AttentionParams& a) {
  check_q_prologue_params("cuda.unified", plan.instance.fusion, a.prologue);
  for (const void* ptr : {a.prologue.q_norm_weight, a.prologue.rope_cos, a.prologue.rope_sin})
    if (reinterpret_cast<std::uintptr_t>(ptr) % 16 != 0)
      throw std::invalid_argument("cuda.unified: q_norm_weight, rope_cos and rope_sin must be 16-byte aligned");
}

class CudaUnified final : public AttentionKernel {
 public:
  std::string name() const override { return "cuda.unified"; }
  Backend backend() const override { return Backend::cuda; }
  // The SM count changes the geometry, never the answer: supports() does not ask the device.
  Support supports(const AttentionProblem& p, const KnobValues& knobs) const override {
    return resolve_in_build(p, knobs, cuda::DeviceInfo{}).support;
  }

  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& knobs) const override {
    const cuda::Resolution r = resolve_in_build(p, knobs, device_info());
    if (!r.ok()) throw std::invalid_argument("cuda.unified: " + r.support.reason);
    auto plan = std::make_unique<CudaUnifiedPlan>();
    plan->instance = r.instance;
    plan->launcher = find_launcher(r.instance.key);
    const UnifiedLaunchPlan& lp = r.instance.launch;
    plan->workspace_bytes = lp.workspace_bytes;
    if (lp.wide_walk_section_bytes > 0) {
      const std::vector<int32_t> table = cuda::wide_walk_table(p, lp);
      plan->walk_bytes = table.size() * sizeof(int32_t);
      if (cuda::device_count() > 0) {  // page-locked memory needs a driver; without a device the plan never runs
        plan->walk_table = std::make_unique<gpu::MappedHostMemory>(plan->walk_bytes);
        std::memcpy(plan->walk_table->host(), table.data(), plan->walk_bytes);
      }
    } else if (lp.workspace_bytes > 0) {
      plan->counter_bytes =
          static_cast<std::size_t>(cuda::decode_counter_count(p, lp.splits, lp.merge_group, lp.merge)) *
          sizeof(int32_t);
      plan->counter_offset = lp.workspace_bytes - plan->counter_bytes;
    }
    plan->graph_replay = r.instance.graph_replay;
    plan->return_lse = p.return_lse;
    plan->total_q = p.total_q();
    plan->summary = r.instance.summary;
    return plan;
  }

  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    const auto* cp = dynamic_cast<const CudaUnifiedPlan*>(&plan);
    if (!cp) throw std::invalid_argument("cuda.unified: plan was not made by cuda.unified");
    if (a.head_size != cp->instance.key.head_size || a.types != cp->instance.types)
      throw std::invalid_argument("cuda.unified: params do not match the plan (head_size/types)");
    if (cp->workspace_bytes > 0 && a.workspace == nullptr)
      throw std::invalid_argument("cuda.unified: plan needs " + std::to_string(cp->workspace_bytes) +
                                  " workspace bytes, params.workspace is null");
    check_gpu_layout("cuda.unified", a);
    const bool gate = cp->instance.fusion.output_gate;
    if (gate != (a.epilogue.gate != nullptr))
      throw std::invalid_argument(gate ? "cuda.unified: the problem has an output gate, params.epilogue.gate is null"
                                       : "cuda.unified: params.epilogue.gate set for a problem without output_gate");
    if (a.epilogue.gate != nullptr && ((a.epilogue.gate_stride_token | a.epilogue.gate_stride_head) % 2 != 0 ||
                              reinterpret_cast<std::uintptr_t>(a.epilogue.gate) % 4 != 0))
      throw std::invalid_argument("cuda.unified: gate strides must be even and the gate 4-byte aligned");
    check_q_prologue(*cp, a);
    check_lse_params("cuda.unified", cp->return_lse, a);
    check_qo_tma(*cp, a);
    const auto s = static_cast<cudaStream_t>(stream);
    const std::size_t ws = cp->workspace_bytes;
    const bool write_state = cp->counter_bytes + cp->walk_bytes > 0 && !workspace_held_by(a.workspace, ws, cp->id);
    // Unknown until the call is enqueued whole: a launch that throws leaves nobody's state trusted.
    if (ws > 0) record_workspace_call(a.workspace, ws, cp->id, false);
    if (write_state) write_workspace_state(*cp, a.workspace, s);
    launch(*cp, a, s);
    if (ws > 0) record_workspace_call(a.workspace, ws, cp->id, !(write_state && capturing(s)));
  }

 private:
  // Enqueued (and captured) like the kernels: while capturing, the writes become part of the graph.
  static void write_workspace_state(const CudaUnifiedPlan& plan, void* workspace, cudaStream_t s) {
    if (plan.counter_bytes > 0)
      ATTNBENCH_CUDA_CHECK(
          cudaMemsetAsync(static_cast<char*>(workspace) + plan.counter_offset, 0, plan.counter_bytes, s));
    if (plan.walk_bytes > 0) {
      if (!plan.walk_table) throw std::runtime_error("cuda.unified: the plan was made without a device; make it again");
      ATTNBENCH_CUDA_CHECK(
          cudaMemcpyAsync(workspace, plan.walk_table->host(), plan.walk_bytes, cudaMemcpyHostToDevice, s));
    }
  }

  static bool capturing(cudaStream_t s) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    ATTNBENCH_CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
    return cs != cudaStreamCaptureStatusNone;
  }
};

}  // namespace

std::unique_ptr<AttentionKernel> make_cuda_unified() { return std::make_unique<CudaUnified>(); }

}  // namespace attnbench
