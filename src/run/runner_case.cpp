// Runner's cases one by one in this process: each kernel of a case (under every knob setting of a sweep) bound,
// called once and gated, then each mode's ok rows timed together in interleaved rounds.
#include <algorithm>
#include <iostream>

#include "attnbench/reference_gpu.hpp"
#include "cases/memory_check.hpp"
#include "core/errors.hpp"
#include "results/control_pair.hpp"
#include "results/peer_ratio.hpp"
#include "run/case_timing.hpp"
#include "run/interrupt.hpp"
#include "run/repro.hpp"
#include "run/runner.hpp"
#include "run/runner_impl.hpp"

namespace attnbench::detail {

// Every kernel of the case under every knob setting of a sweep, then the control copy.
std::vector<Runner::Slot> Runner::make_slots(const std::vector<const KernelEntry*>& entries) const {
  std::vector<Slot> slots;
  const auto add = [&slots](const KernelEntry* e, std::size_t setting, std::string name) {
    Slot& s = slots.emplace_back();
    s.index = slots.size() - 1;
    s.entry = e;
    s.setting = setting;
    s.name = std::move(name);
  };
  for (std::size_t k = 0; k < knob_sets.size(); ++k)
    for (const KernelEntry* e : entries) add(e, k, e->name);
  if (o.control) add(entries.front(), 0, entries.front()->name + kControlSuffix);
  return slots;
}

// The kernels of a case (under every knob setting of a sweep) are bound together, then each mode's timed rows are
// measured in interleaved rounds, and the rows, with their ratios to the case's peer, are emitted slot by slot.
Runner::CaseRows Runner::run_case(const ShapeCase& c) {
  std::unique_ptr<OpCase> op_case = make_op_case(c);
  const auto entries = kernels_for(c);
  if (entries.empty() || !op_case) return decline_case(c, op_case.get());
  std::vector<Slot> slots = make_slots(entries);
  std::vector<Slot*> all;
  for (Slot& s : slots) {
    check_interrupt();
    bind_slot(c, *op_case, s);
    all.push_back(&s);
  }
  if (!o.gate_only) time_case(all);
  return case_rows(slots);
}

// Every slot's rows in order, with their ratios to the case's peer.
Runner::CaseRows Runner::case_rows(std::vector<Slot>& slots) const {
  std::vector<ResultRow> rows;
  std::vector<std::string> labels;
  for (Slot& s : slots)
    for (Mode m : o.modes) {
      rows.push_back(std::move(s.rows.at(m)));
      labels.push_back(setting_label(s.setting));
    }
  set_peer_ratios(rows);
  CaseRows out;
  for (std::size_t i = 0; i < rows.size(); ++i) out.emplace_back(std::move(rows[i]), labels[i]);
  return out;
}

// The printed table's name of a knob setting: "S1", "S2", ... in a sweep, nothing in a run.
std::string Runner::setting_label(std::size_t k) const {
  return knob_sets.size() > 1 ? "S" + std::to_string(k + 1) : "";
}

// Each mode's ok rows timed together, after the clocks of their devices are settled when due; the settle's
// report goes into the case's timed rows.
void Runner::time_case(const std::vector<Slot*>& slots) {
  std::map<Device*, nlohmann::json> settles;
  for (Slot* s : slots) {
    const bool timed = std::any_of(s->rows.begin(), s->rows.end(), [](const auto& r) { return r.second.status == "ok"; });
    if (s->bound && timed && !settles.count(s->dev)) settles[s->dev] = clocks.before_timing(*s->dev);
  }
  for (Mode m : o.modes) {
    std::vector<TimedSlot> timed;
    for (Slot* s : slots)
      if (s->bound && s->rows.at(m).status == "ok" && settles.count(s->dev)) {
        std::function<void()> call = [b = s->bound.get()] { b->call(); };
        if (marker)  // a worker notes whose call runs, for the run to read should it die or hang
          call = [b = s->bound.get(), mk = marker, j = static_cast<int>(s->index)] {
            mk->slot.store(j, std::memory_order_relaxed);
            b->call();
          };
        std::function<void()> failed;
        if (marker)  // the first kernel whose timing fails is the one a lost device context is blamed on
          failed = [this, j = static_cast<int>(s->index)] {
            if (first_timing_failure < 0) first_timing_failure = j;
          };
        timed.push_back({&s->rows.at(m), s->dev, std::move(call), std::move(failed)});
      }
    mark(-1, kStageTime);
    time_slots(timed, m, o);
  }
  for (auto& [dev, settle] : settles) clocks.after_timing(*dev);
  for (Slot* s : slots) {
    const auto it = settles.find(s->dev);
    if (it == settles.end() || it->second.is_null()) continue;
    for (auto& [m, row] : s->rows)
      if (row.clocks.is_object()) row.clocks["settle"] = it->second;
  }
}

// A case no selected kernel can take: one declined row per mode, naming why (a GPU backend asked for by name
// that has no device or is not built says so).
Runner::CaseRows Runner::decline_case(const ShapeCase& c, const OpCase* op_case) {
  const std::optional<Backend> named = parse_backend(o.backend);
  const bool gpu_missing = named && *named != Backend::cpu && !gpus[*named].available;
  const Backend b = gpu_missing ? *named : gpus[Backend::cuda].available ? Backend::cuda : Backend::cpu;
  CaseRows rows;
  for (std::size_t k = 0; k < knob_sets.size(); ++k)
    for (Mode m : o.modes) {
      ResultRow r = base_row(c, op_case, "-", b, m, knob_sets[k]);
      r.status = "declined";
      r.reason = gpu_missing ? gpus[*named].why_not : std::string("no selected kernel implements op ") + op_name(c.op);
      rows.emplace_back(std::move(r), setting_label(k));
    }
  return rows;
}

// One kernel of a case: declined, or prepared and bound (its own plan and buffers), called once and gated; each
// mode's row is then final, or "ok" and waiting for its time.
void Runner::bind_slot(const ShapeCase& c, OpCase& op_case, Slot& s) {
  const KernelEntry& e = *s.entry;
  const KnobValues& knobs = knob_sets[s.setting];
  const auto all_rows = [&](const std::string& status, const std::string& reason) {
    for (Mode m : o.modes) {
      ResultRow r = base_row(c, &op_case, s.name, e.backend, m, knobs);
      r.status = status;
      r.reason = reason;
      s.rows[m] = std::move(r);
    }
  };
  const int me = static_cast<int>(s.index);
  mark(me, kStageBind);
  std::string why_not;
  s.dev = devices.get(e.backend, &why_not);
  if (!s.dev) return all_rows("declined", why_not);
  const Support ok = op_case.supports(e, knobs);
  if (!ok.ok) return all_rows("declined", ok.reason);
  const Support fits = check_before_allocation(op_case, e, *s.dev);
  if (!fits.ok) return all_rows("declined", fits.reason);
  try {
    mark(-1, kStagePrepare);
    op_case.prepare(settings, reference_device());
    mark(me, kStageBind);
    s.bound = op_case.bind(e, *s.dev, knobs);
    mark(me, kStageGate);
    gate_slot(c, op_case, s);
  } catch (const UsageError&) {
    throw;
  } catch (const std::bad_alloc&) {
    s.bound.reset();
    all_rows("error", "out of memory: a host allocation failed (std::bad_alloc) after the memory estimate passed");
  } catch (const std::exception& ex) {
    s.bound.reset();
    all_rows("error", allocation_failure_reason(ex.what()));
  }
}

Device* Runner::reference_device() {
  if (settings.reference == ReferenceWhere::cpu || !gpus[Backend::cuda].available || !reference::gpu_reference_built())
    return nullptr;
  std::string why_not;
  return devices.get(Backend::cuda, &why_not);
}

// Declines decided before prepare() and bind() allocate anything (inputs, reference, device buffers).
Support Runner::check_before_allocation(const OpCase& op_case, const KernelEntry& e, const Device& dev) const {
  return memory_fits(op_case, e, dev, settings);
}

// A bound kernel: one call, the gate, the optional breakdown, then each mode's row: mismatch, declined (the mode
// cannot be timed here) or ok.
void Runner::gate_slot(const ShapeCase& c, const OpCase& op_case, Slot& s) {
  s.bound->call();
  s.dev->synchronize();
  std::optional<GateResult> gate;
  if (!o.no_gate) gate = s.bound->gate(run_tolerance(o, c.dtype));
  nlohmann::json breakdown;
  if (o.breakdown && !o.gate_only && (!gate || gate->passed)) {
    breakdown = time_stages(*s.bound, *s.dev, o);
    table->breakdown(breakdown);
  }
  for (Mode m : o.modes) {
    ResultRow r = base_row(c, &op_case, s.name, s.entry->backend, m, knob_sets[s.setting]);
    r.gate = gate;
    r.plan = s.bound->plan_summary;
    r.graph_recommended = s.bound->graph_recommended;
    r.breakdown = breakdown;
    if (gate && !gate->passed) {
      r.status = "mismatch";
      r.reason = gate_failure_reason(*gate);
    } else if (const Support t = s.dev->can_time(m, o.l2); !t.ok) {
      r.status = "declined";
      r.reason = t.reason;
    } else {
      r.status = "ok";
    }
    s.rows[m] = std::move(r);
  }
}

}  // namespace attnbench::detail
