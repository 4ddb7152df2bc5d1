// Runner's cases in worker processes (--isolate case|kernel): a worker per case or per kernel, its rows and clock
// state brought back, a worker that dies or hangs costing only the kernel it was running.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "core/errors.hpp"
#include "run/interrupt.hpp"
#include "run/runner_impl.hpp"

namespace attnbench::detail {

// The case in worker processes: all its kernels in one (per_case) or each in its own (per_kernel). A worker that
// dies or hangs costs the kernel it was running (the marker says which) its rows, as errors naming the cause;
// the kernels it had not finished run again in a fresh worker without it.
Runner::CaseRows Runner::run_case_isolated(const ShapeCase& c) {
  std::unique_ptr<OpCase> op_case = make_op_case(c);
  const auto entries = kernels_for(c);
  if (entries.empty() || !op_case) return decline_case(c, op_case.get());
  std::vector<Slot> slots = make_slots(entries);
  std::vector<std::vector<std::size_t>> groups;
  for (const Slot& s : slots) {
    if (isolation == Isolation::per_kernel || groups.empty()) groups.emplace_back();
    groups.back().push_back(s.index);
  }
  std::map<std::size_t, std::string> failed;
  for (const auto& group : groups) {
    std::vector<std::size_t> pending = group;
    while (!pending.empty()) {
      const double timeout = o.case_timeout_s.value_or(case_timeout_default(o, pending.size() * o.modes.size()));
      const WorkerOutcome w = run_in_worker([&](WorkerMarker& m) {
        marker = &m;
        return worker_job(c, slots, pending);
      }, timeout);
      if (w.interrupted) throw RunInterrupted{w.interrupted};
      std::string cause = w.cause(timeout);
      if (w.finished) {
        const nlohmann::json msg = nlohmann::json::parse(w.message, nullptr, false);
        if (msg.contains("usage_error")) throw UsageError(msg["usage_error"].get<std::string>());
        if (msg.contains("interrupted")) throw RunInterrupted{interrupt_signal() ? interrupt_signal() : SIGINT};
        if (msg.is_object() && msg.contains("rows")) {
          take_worker_result(msg, slots);
          break;
        }
        cause = msg.is_object() && msg.contains("internal_error")
                    ? "internal error in the worker: " + msg["internal_error"].get<std::string>()
                    : "the worker's result was malformed";
      }
      const auto culprit = std::find(pending.begin(), pending.end(), static_cast<std::size_t>(std::max(w.slot, 0)));
      if (w.slot < 0 || culprit == pending.end()) {
        const std::string where = w.stage == kStagePrepare ? std::string(" ") + stage_name(w.stage)
                                                           : std::string(" outside any kernel");
        for (std::size_t j : pending) failed[j] = cause + where;
        break;
      }
      failed[*culprit] = cause + " (" + stage_name(w.stage) + ")";
      pending.erase(culprit);
    }
  }
  for (const auto& [j, why] : failed) {
    Slot& s = slots[j];
    for (Mode m : o.modes) {
      ResultRow r = base_row(c, op_case.get(), s.name, s.entry->backend, m, knob_sets[s.setting]);
      r.status = "error";
      r.reason = why;
      s.rows[m] = std::move(r);
    }
  }
  return case_rows(slots);
}

void Runner::mark(int slot, int stage) const {
  if (!marker) return;
  marker->slot.store(slot, std::memory_order_relaxed);
  marker->stage.store(stage, std::memory_order_relaxed);
}

// In a worker: the slots `run` of the case bound, gated and timed as run_case does, then released; the message
// holds their rows, the clock discipline's state and the devices' facts.
std::string Runner::worker_job(const ShapeCase& c, std::vector<Slot>& slots, const std::vector<std::size_t>& run) {
  std::unique_ptr<OpCase> op_case = make_op_case(c);
  std::vector<Slot*> mine;
  for (std::size_t j : run) {
    Slot& s = slots[j];
    bind_slot(c, *op_case, s);
    mark(-1, kStageStart);
    const ResultRow& first = s.rows.begin()->second;
    if (first.status == "error") end_worker_on_device_fault(s, first.reason);
    mine.push_back(&s);
  }
  if (!o.gate_only) {
    time_case(mine);
    mark(-1, kStageStart);
    if (first_timing_failure >= 0) {
      const Slot& s = slots[static_cast<std::size_t>(first_timing_failure)];
      for (const auto& [m, row] : s.rows)
        if (row.status == "error") {
          mark(first_timing_failure, kStageTime);
          end_worker_on_device_fault(s, row.reason);
        }
    }
  }
  for (Slot* s : mine) {
    mark(static_cast<int>(s->index), kStageRelease);
    s->bound.reset();
  }
  mark(-1, kStageDone);
  nlohmann::json rows = nlohmann::json::object();
  for (Slot* s : mine) {
    nlohmann::json list = nlohmann::json::array();
    for (Mode m : o.modes) list.push_back(row_to_json(s->rows.at(m)));
    rows[std::to_string(s->index)] = std::move(list);
  }
  nlohmann::json facts = nlohmann::json::object();
  for (const auto& [b, slot] : devices.made)
    if (slot.device) facts[backend_name(b)] = slot.device->facts();
  return nlohmann::json{{"rows", rows}, {"clocks", clocks.state()}, {"facts", facts}}.dump();
}

// A worker's rows into their slots; its clock discipline carries on here; the first facts of each device are
// kept, with the readings at the end ("*_end") from the latest worker.
void Runner::take_worker_result(const nlohmann::json& msg, std::vector<Slot>& slots) {
  for (const auto& [index, list] : msg.at("rows").items()) {
    Slot& s = slots.at(std::stoul(index));
    for (std::size_t k = 0; k < o.modes.size(); ++k) s.rows[o.modes[k]] = row_from_json(list.at(k));
  }
  clocks.load(msg.at("clocks"));
  for (const auto& [name, facts] : msg.at("facts").items()) {
    const auto b = parse_backend(name);
    if (!b) continue;
    auto& kept = worker_facts[*b];
    for (const auto& [k, v] : facts.items()) {
      const bool end = k.size() > 4 && k.compare(k.size() - 4, 4, "_end") == 0;
      if (end || !kept.count(k)) kept[k] = v.get<std::string>();
    }
  }
}

// In a worker, after a kernel failed on a GPU: when the device can run nothing more (a sticky error), the worker
// ends here, so the run gives this kernel's rows the error and the case's other kernels a fresh device context.
void Runner::end_worker_on_device_fault(const Slot& s, const std::string& reason) {
  if (!marker || !s.dev || !is_gpu(s.dev->backend())) return;
  if (s.dev->fault().empty()) return;
  mark(static_cast<int>(s.index), marker->stage.load());
  std::snprintf(marker->note, sizeof marker->note, "%s", reason.c_str());
  std::cout.flush();
  _exit(kDeviceFaultExit);
}

}  // namespace attnbench::detail
