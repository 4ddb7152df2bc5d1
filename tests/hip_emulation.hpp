// Runs a hip.unified instance on the CPU emulator over build_inputs() and gates it against the fp32 reference on
// every row: what the HIP emulation tests share.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attnbench/reference.hpp"
#include "cases/gate.hpp"
#include "cases/inputs.hpp"
#include "hip/emulator/run_kernels.hpp"
#include "hip/resolve.hpp"

namespace attnbench::testing {

struct EmulatedRun {
  hip::Resolution resolution;
  GateResult gate;
  std::vector<uint16_t> out;
  std::string error;  // the emulator's exception, if it threw
};

// The plan of `p` under `knobs` (table names and values), every instance counted as built, on the default device.
inline hip::Resolution hip_resolution(const AttentionProblem& p, const std::map<std::string, std::string>& knobs) {
  const hip::HipKnobs k = hip::HipKnobs::parse(KnobValues::resolve(knobs, /*read_env=*/false));
  return hip::resolve(p, k, hip::DeviceInfo{}, [](const hip::InstanceKey&) { return true; });
}

// The problem's plan run by the kernels compiled with lane layout L, output poisoned first, gated on all rows.
template <class L = hip::HwLayouts>
EmulatedRun emulate_hip(const AttentionProblem& p, const std::map<std::string, std::string>& knobs = {},
                        uint64_t seed = 1, BlockOrder order = BlockOrder::contiguous,
                        const AttentionProblem* ref_problem = nullptr) {
  EmulatedRun run;
  run.resolution = hip_resolution(p, knobs);
  if (!run.resolution.ok()) return run;
  const HostInputs in = build_inputs(p, seed, order);
  AttentionParams a = in.params();
  run.out.assign(in.q.size(), 0xFFFF);  // NaN: an unwritten element fails the gate
  a.out = run.out.data();
  const hip::LaunchPlan& lp = run.resolution.instance.launch;
  std::vector<float> workspace(lp.workspace_bytes / sizeof(float) + 1, -1.f);
  a.workspace = workspace.data();
  try {
    hip::emu::run_instance<L>(run.resolution.instance.key, a, lp);
  } catch (const std::exception& e) {
    run.error = e.what();
    return run;
  }
  const int64_t rows = p.total_q() * p.heads;
  std::vector<float> ref(static_cast<std::size_t>(rows) * p.head_size);
  HostInputs ref_in;  // ref_problem: the reference's problem over the same inputs
  if (ref_problem) ref_in = in, ref_in.problem = *ref_problem;
  reference::paged_attention_all(ref_problem ? ref_in.params() : a, ref.data());
  std::vector<int64_t> ids(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[static_cast<std::size_t>(r)] = r;
  run.gate = gate_rows(run.out.data(), static_cast<int64_t>(run.out.size()), p.types.o, p.head_size, ids, ref.data(),
                       default_tolerance(p.types.o));
  return run;
}

// A problem of ragged (q, kv) sequences.
inline AttentionProblem hip_problem(DType dt, int head_size, int heads, int kv_heads,
                                    const std::vector<std::pair<int, int>>& seqlens, bool causal = true,
                                    int block_size = 16) {
  AttentionProblem p;
  for (const auto& [q, kv] : seqlens) p.q_lens.push_back(q), p.kv_lens.push_back(kv);
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.head_size = head_size;
  p.block_size = block_size;
  p.causal = causal;
  p.types = AttentionTypes::all(dt);
  return p;
}

}  // namespace attnbench::testing
