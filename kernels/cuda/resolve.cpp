#include "cuda/resolve.hpp"

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace attnbench::cuda {
namespace {

// The typed value of an enum knob; KnobValues holds only the table's values, so a miss is a table/parse mismatch.
template <class E>
E pick(const KnobValues& knobs, const char* name, std::initializer_list<std::pair<const char*, E>> values) {
  const std::string& v = knobs.get(name);
  for (const auto& [text, e] : values)
    if (v == text) return e;
  throw std::logic_error(std::string("knob ") + name + ": value '" + v + "' has no typed value");
}

// The declines of the problem and the knobs, in the order supports() reports them.
Support problem_support(const AttentionProblem& p, const UnifiedKnobs& knobs) {
  if (const Support s = unified_supports(p); !s.ok) return s;
  // A Q prologue the chosen kernel does not have would silently be skipped.
  if (const std::string q = q_prologue_conflict(p, knobs); !q.empty()) return Support::no(q);
  if (const std::string q = q8_conflict(p, knobs); !q.empty()) return Support::no(q);
  if (choose_path(p) == UnifiedPath::decode_3d) {
    const int kvb = static_cast<int>(dtype_bytes(p.types.kv)), stages = decode_stages(knobs);
    if (!decode_ring_fits(p.head_size, kvb, stages))
      return Support::no("ATTNBENCH_3D_STAGES=" + std::to_string(stages) + ": a ring of " + std::to_string(stages) +
                         " K/V tile pairs at head size " + std::to_string(p.head_size) + " takes " +
                         std::to_string(decode_smem_bytes(p.head_size, kvb, stages)) +
                         " bytes of shared memory with Q, over the " + std::to_string(kWideSmemLimit) + " a CTA has");
  }
  // Forced wide knobs the geometry cannot hold are declined; under auto they keep the narrow kernel instead.
  if (choose_path(p) == UnifiedPath::prefill_2d && knobs.path == PathKnob::wide && wide_supports(p)) {
    if (const std::string f = wide_feature_conflict(p); !f.empty()) return Support::no(f);
    if (const std::string c = wide_knob_conflict(p, knobs); !c.empty()) return Support::no(c);
  }
  return Support::yes();
}

UnifiedInstance make_instance(const AttentionProblem& p, const UnifiedKnobs& knobs, const DeviceInfo& device) {
  UnifiedInstance in;
  in.arch = device.arch;
  in.types = p.types;
  in.launch = make_unified_launch_plan(p, knobs, device.sm_count);
  in.key = instance_key(p, in.launch);
  in.graph_replay = recommend_graph_replay(p, knobs, /*caller_capturing=*/false);
  in.fusion = p.fusion;
  in.summary = in.launch.summary + (p.fusion.has_q_prologue() ? " +q-norm-rope" : "") +
               (p.fusion.output_gate ? " +gate" : "") + (in.key.features ? " +features" : "") +
               (is_16bit(p.types.kv) ? "" : std::string(" kv=") + dtype_name(p.types.kv)) +
               (is_16bit(p.types.q) ? "" : std::string(" q=") + dtype_name(p.types.q));
  return in;
}

}  // namespace

UnifiedKnobs UnifiedKnobs::parse(const KnobValues& knobs) {
  UnifiedKnobs k;
  k.path = pick<PathKnob>(knobs, "ATTNBENCH_SM90_PATH",
                          {{"auto", PathKnob::automatic}, {"narrow", PathKnob::narrow}, {"wide", PathKnob::wide}});
  k.narrow_warps = pick<NarrowWarps>(knobs, "ATTNBENCH_SM90_NARROW_WARPS",
                                     {{"4", NarrowWarps::w4}, {"8", NarrowWarps::w8}, {"4x32", NarrowWarps::w4x32}});
  k.flash_wide = knobs.get_int("ATTNBENCH_SM90_FLASH_WIDE");
  k.stages = knobs.get_int("ATTNBENCH_SM90_STAGES");
  k.persistent = pick<PersistentKnob>(
      knobs, "ATTNBENCH_SM90_PERSISTENT",
      {{"auto", PersistentKnob::automatic}, {"0", PersistentKnob::off}, {"1", PersistentKnob::on}});
  k.gqa_pack = knobs.get_int("ATTNBENCH_SM90_GQA_PACK");
  k.q_major_grid = knobs.get_bool("ATTNBENCH_Q_MAJOR_GRID");
  k.splits_3d = knobs.get_int("ATTNBENCH_3D_SPLITS");
  k.stages_3d = pick<int>(knobs, "ATTNBENCH_3D_STAGES", {{"auto", 0}, {"3", kDecodeStages}, {"6", kDecodeDeepStages}});
  k.merge_3d = pick<MergeKnob>(knobs, "ATTNBENCH_3D_MERGE",
                               {{"auto", MergeKnob::automatic}, {"fused", MergeKnob::fused},
                                {"separate", MergeKnob::separate}});
  k.qo = pick<QoKnob>(knobs, "ATTNBENCH_SM90_QO",
                      {{"auto", QoKnob::automatic}, {"tma", QoKnob::tma}, {"threads", QoKnob::threads}});
  k.walk = pick<WalkKnob>(knobs, "ATTNBENCH_SM90_WALK",
                          {{"auto", WalkKnob::automatic}, {"rank", WalkKnob::rank}, {"l2", WalkKnob::l2}});
  k.l2_section_kb = knobs.get_int("ATTNBENCH_SM90_L2_SECTION_KB");
  k.graph_2d = knobs.get_bool("ATTNBENCH_2D_GRAPH");
  k.graph_3d = knobs.get_bool("ATTNBENCH_3D_GRAPH");
  return k;
}

Resolution resolve(const AttentionProblem& p, const UnifiedKnobs& knobs, const DeviceInfo& device,
                   const InstanceBuilt& built) {
  Resolution r;
  r.support = problem_support(p, knobs);
  if (!r.ok()) return r;
  r.instance = make_instance(p, knobs, device);
  // The wide kernel indexes its tiles (q-tile, sequence, head tile) with an int32.
  if (r.instance.launch.work_tiles > INT32_MAX)
    r.support = Support::no(std::to_string(r.instance.launch.work_tiles) + " wide-kernel tiles (at most 2^31 - 1)");
  else if (!built(r.instance.key))
    r.support = no_instance(r.instance.key);
  return r;
}

}  // namespace attnbench::cuda
