// The run's engine, shared by runner.cpp (the run: options, backends, journal, provenance), runner_case.cpp (a case in
// this process: slots, binding, the gate, timing) and runner_isolate.cpp (cases in worker processes): one Runner per
// run or sweep. Internal to the harness; runner.hpp is the interface.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cases/op_case.hpp"
#include "cases/registry.hpp"
#include "results/printer.hpp"
#include "run/case_timing.hpp"
#include "run/journal.hpp"
#include "run/run_options.hpp"
#include "run/worker.hpp"

namespace attnbench::detail {

// base_provenance plus the run's settings (provenance.cpp).
nlohmann::json run_provenance(const RunOptions& o, const KnobValues& knobs, bool cuda_available,
                              const std::string& cuda_why_not);

// Device handles per backend, each made on first use; a backend without one keeps the reason.
struct Devices {
  struct Slot {
    std::unique_ptr<Device> device;
    std::string why_not;
  };
  std::map<Backend, Slot> made;
  Device* get(Backend b, std::string* why_not) {
    auto it = made.find(b);
    if (it == made.end()) {
      Slot s;
      s.device = make_backend_device(b, &s.why_not);
      it = made.emplace(b, std::move(s)).first;
    }
    if (!it->second.device) *why_not = it->second.why_not;
    return it->second.device.get();
  }
  Device* existing(Backend b) const {
    const auto it = made.find(b);
    return it == made.end() ? nullptr : it->second.device.get();
  }
};

// One run: the selected cases, each through every kernel that the selection keeps, one row per mode.
class Runner {
 public:
  Runner(const RunOptions& options, const std::vector<KnobValues>& knob_sets, const std::vector<ShapeCase>& cases,
         std::ostream& out);
  ResultsFile run();

 private:
  std::vector<const KernelEntry*> kernels_for(const ShapeCase& c) const;
  nlohmann::json unread_swept_knobs() const;
  TableContents table_contents() const;
  ResultRow base_row(const ShapeCase& c, const OpCase* op_case, const std::string& kernel, Backend b, Mode m,
                     const KnobValues& k) const;
  // A case's rows with their setting labels, in the order they are written.
  using CaseRows = std::vector<std::pair<ResultRow, std::string>>;
  void emit(CaseRows rows);
  std::optional<Journal> open_journal(std::map<std::size_t, JournalCase>* finished) const;
  // One kernel of a case under one knob setting: its entry, the name its rows carry (the control copy's has
  // kControlSuffix), its bound kernel while the case runs, and its row per mode.
  struct Slot {
    std::size_t index = 0;  // in the case's slots
    const KernelEntry* entry = nullptr;
    std::size_t setting = 0;  // index into knob_sets
    std::string name;
    Device* dev = nullptr;
    std::unique_ptr<BoundKernel> bound;
    std::map<Mode, ResultRow> rows;
  };
  std::vector<Slot> make_slots(const std::vector<const KernelEntry*>& entries) const;
  CaseRows run_case(const ShapeCase& c);
  CaseRows run_case_isolated(const ShapeCase& c);
  std::string worker_job(const ShapeCase& c, std::vector<Slot>& slots, const std::vector<std::size_t>& run);
  void take_worker_result(const nlohmann::json& msg, std::vector<Slot>& slots);
  void end_worker_on_device_fault(const Slot& s, const std::string& reason);
  void mark(int slot, int stage) const;
  CaseRows case_rows(std::vector<Slot>& slots) const;
  void time_case(const std::vector<Slot*>& slots);
  std::string setting_label(std::size_t k) const;
  CaseRows decline_case(const ShapeCase& c, const OpCase* op_case);
  void bind_slot(const ShapeCase& c, OpCase& op_case, Slot& s);
  void gate_slot(const ShapeCase& c, const OpCase& op_case, Slot& s);
  Support check_before_allocation(const OpCase& op_case, const KernelEntry& e, const Device& dev) const;
  // The CUDA device the reference runs on (every row), or null for the Eigen reference on the CPU.
  Device* reference_device();
  void probe_backends(bool in_a_worker);
  void finish_provenance();

  const RunOptions& o;
  const std::vector<KnobValues>& knob_sets;  // one per sweep setting; a run has one
  const std::vector<ShapeCase>& cases;
  Devices devices;
  struct BackendState {
    bool available = false;
    std::string why_not;
  };
  std::map<Backend, BackendState> gpus;  // cuda, hip: whether a device is there, else why not
  Backend auto_backend = Backend::cpu;  // what --backend auto runs
  Isolation isolation = Isolation::off;  // resolved: off, per_case or per_kernel
  WorkerMarker* marker = nullptr;        // in a worker: what it is doing, for the run to read if it dies
  int first_timing_failure = -1;         // in a worker: the slot whose timing failed first
  std::map<Backend, std::map<std::string, std::string>> worker_facts;  // device facts the workers reported
  CaseSettings settings;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  ResultsFile file;
  std::optional<ResultTable> table;
  Progress progress;
  ClockDiscipline clocks;
};

}  // namespace attnbench::detail
