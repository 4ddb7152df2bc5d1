// What the runner needs from one (shape, dtype) case of an op, independent of the op: declared work, dims,
// host inputs + reference (prepared once, shared by every kernel), and a kernel bound to a device.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnbench/attention.hpp"
#include "cases/gate.hpp"
#include "cases/inputs.hpp"
#include "cases/registry.hpp"
#include "cases/shapes.hpp"
#include "device/device.hpp"

namespace attnbench {

struct CaseSettings {
  uint64_t seed = 1234;
  BlockOrder block_order = BlockOrder::contiguous;
  double reference_gflop = 16.0;  // CPU reference work before the gate samples rows
  bool gate = true;              // compute the reference
  ReferenceWhere reference = ReferenceWhere::automatic;
};

// A kernel with its inputs uploaded, its plan made, its buffers allocated and its output poisoned.
class BoundKernel {
 public:
  virtual ~BoundKernel() = default;
  virtual void call() = 0;                         // enqueue one complete call on the device's stream
  virtual GateResult gate(const Tolerance& tol) = 0;  // download the output and compare with the reference
  // The stages of one call, each enqueued alone on the device's stream, for --breakdown; empty when none.
  virtual std::vector<std::pair<std::string, std::function<void()>>> stages() { return {}; }
  std::string plan_summary;
  std::optional<bool> graph_recommended;
};

// Bytes one case asks for before it allocates them. host: the inputs and reference still to build (none once
// prepared) plus one output downloaded for the gate; device: the kernel's inputs, output and workspace (an upper
// bound where the plan is not made yet). On the CPU backend both come out of host memory.
struct MemoryNeed {
  double host_bytes = 0;
  double device_bytes = 0;
};

class OpCase {
 public:
  virtual ~OpCase() = default;
  virtual WorkModel work() const = 0;
  virtual nlohmann::json dims() const = 0;
  virtual Support supports(const KernelEntry& k, const KnobValues& knobs) const = 0;
  // What prepare() and bind() of kernel k will allocate (MemoryNeed); computed from the dims, allocating nothing.
  virtual MemoryNeed memory_need(const KernelEntry& k, const CaseSettings& s) const = 0;
  // Builds host inputs and the reference once (later calls do nothing). gpu: the CUDA device the reference may
  // run on (every row), or null where it runs on the CPU.
  virtual void prepare(const CaseSettings& s, Device* gpu) = 0;
  virtual std::unique_ptr<BoundKernel> bind(const KernelEntry& k, Device& dev, const KnobValues& knobs) = 0;
};

std::unique_ptr<OpCase> make_op_case(const ShapeCase& c);

// The dims both attention ops' rows carry: heads, head size, mask, batch, lengths, scale, scores, features, and the
// seqlens where they are not uniform.
nlohmann::json attention_problem_dims(const AttentionProblem& p, const InputSpread& spread);

// Implementations, one per op.
std::unique_ptr<OpCase> make_attention_case(const ShapeCase& c);
std::unique_ptr<OpCase> make_gated_case(const ShapeCase& c);
std::unique_ptr<OpCase> make_attention_bwd_case(const ShapeCase& c);
std::unique_ptr<OpCase> make_gated_bwd_case(const ShapeCase& c);

}  // namespace attnbench
