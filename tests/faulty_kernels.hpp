// Test-only faulty kernels, built into the test binaries alone (RunOptions::extra_kernels): cpu.unified with one
// fault each, the faults that kernels under development have: a wild write, a hang, an abort, a NaN in one
// element, an element never written, a crash that only repeated calls reach (past the gate, in the timing).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "cases/registry.hpp"

namespace attnbench::testing {

enum class Fault { oob_write, spin, abort, nan_element, unwritten_element, crash_when_timed };

inline const char* fault_name(Fault f) {
  switch (f) {
    case Fault::oob_write: return "oob_write";
    case Fault::spin: return "spin";
    case Fault::abort: return "abort";
    case Fault::nan_element: return "nan_element";
    case Fault::unwritten_element: return "unwritten_element";
    case Fault::crash_when_timed: return "crash_when_timed";
  }
  return "?";
}

class FaultyKernel final : public AttentionKernel {
 public:
  explicit FaultyKernel(Fault f) : inner_(make_cpu_unified()), fault_(f) {}
  std::string name() const override { return std::string("test.fault_") + fault_name(fault_); }
  Backend backend() const override { return Backend::cpu; }
  Support supports(const AttentionProblem& p, const KnobValues& k) const override { return inner_->supports(p, k); }
  std::unique_ptr<AttentionPlan> plan(const AttentionProblem& p, const KnobValues& k) const override {
    return inner_->plan(p, k);
  }
  void run(const AttentionPlan& plan, const AttentionParams& a, void* stream) const override {
    auto* out = static_cast<uint16_t*>(a.out);
    const int64_t last = a.total_q * a.heads * a.head_size - 1;
    switch (fault_) {
      case Fault::oob_write:  // far past any mapping: SIGSEGV
        reinterpret_cast<volatile uint16_t*>(out)[int64_t(1) << 45] = 1;
        break;
      case Fault::spin:
        for (volatile uint64_t i = 0;; i = i + 1) {
        }
      case Fault::abort:
        std::abort();
      case Fault::crash_when_timed:
        if (++calls_ > 1) std::abort();
        break;
      default:
        break;
    }
    const uint16_t kept = out[last];
    inner_->run(plan, a, stream);
    if (fault_ == Fault::nan_element) out[last / 2] = 0x7FFF;  // a NaN in fp16 and bf16
    if (fault_ == Fault::unwritten_element) out[last] = kept;  // still the poison the harness wrote
  }

 private:
  std::shared_ptr<const AttentionKernel> inner_;
  Fault fault_;
  mutable int calls_ = 0;
};

inline const std::vector<Fault>& every_fault() {
  static const std::vector<Fault> all = {Fault::oob_write,         Fault::spin,
                                         Fault::abort,             Fault::nan_element,
                                         Fault::unwritten_element, Fault::crash_when_timed};
  return all;
}

inline std::vector<KernelEntry> faulty_entries(const std::vector<Fault>& faults = every_fault()) {
  std::vector<KernelEntry> out;
  for (Fault f : faults) {
    auto k = std::make_shared<FaultyKernel>(f);
    out.push_back({Op::attention, k, k->name(), Backend::cpu, "test-only faulty kernel", nullptr});
  }
  return out;
}

}  // namespace attnbench::testing
