#include "runner.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "case_timing.hpp"
#include "control_pair.hpp"
#include "errors.hpp"
#include "interrupt.hpp"
#include "journal.hpp"
#include "memory_check.hpp"
#include "op_case.hpp"
#include "peer_ratio.hpp"
#include "printer.hpp"
#include "repro.hpp"
#include "registry.hpp"
#include "sha256.hpp"
#include "runner_impl.hpp"
#include "worker.hpp"


namespace attnbench {

namespace {


// sel: auto | all | a backend name; auto is the backend that a GPU with a built backend gives, else cpu.
bool backend_selected(const std::string& sel, Backend b, Backend auto_backend) {
  if (sel == "all") return true;
  if (const auto named = parse_backend(sel)) return b == *named;
  return b == auto_backend;
}

void check_run_options(const RunOptions& o) {
  if (o.gate_only && o.no_gate) throw UsageError("--gate-only and --no-gate exclude each other");
  if (!(o.backend == "auto" || o.backend == "all" || parse_backend(o.backend)))
    throw UsageError("--backend: '" + o.backend + "' is not auto|cpu|cuda|hip|all");
}

KnobValues resolve_knobs(const RunOptions& o) {
  try {
    return KnobValues::resolve(o.knob_overrides);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// Each glob of --kernel must match some kernel: a misspelt one would silently drop its kernels.
void check_kernel_glob(const RunOptions& o) {
  const std::vector<std::string> globs = glob_list(o.kernel_glob);
  if (globs.empty()) throw UsageError("--kernel: empty pattern");
  std::vector<const KernelEntry*> all;
  for (const auto& k : kernel_registry()) all.push_back(&k);
  for (const auto& k : o.extra_kernels) all.push_back(&k);
  std::string known;
  for (const KernelEntry* k : all) known += (known.empty() ? "" : ", ") + k->name;
  for (const auto& g : globs) {
    bool any = false;
    for (const KernelEntry* k : all) any = any || glob_match(g, k->name);
    if (!any) throw UsageError("--kernel: no kernel matches '" + g + "' (known: " + known + ")");
  }
}

}  // namespace

namespace detail {

Runner::Runner(const RunOptions& options, const std::vector<KnobValues>& knob_values,
               const std::vector<ShapeCase>& selected, std::ostream& out)
    : o(options),
      knob_sets(knob_values),
      cases(selected),
      progress(options.progress, isatty(STDERR_FILENO), selected.size()),
      clocks(options) {
  // A run that forks workers must not touch a GPU itself (a context does not survive fork): a worker looks.
  probe_backends(o.isolate != Isolation::off && !in_worker());
  if (gpus[Backend::cuda].available) auto_backend = Backend::cuda;
  else if (gpus[Backend::hip].available) auto_backend = Backend::hip;
  isolation = o.isolate;
  if (in_worker()) isolation = Isolation::off;
  if (isolation == Isolation::automatic) {
    bool gpu_run = false;
    for (const auto& c : cases)
      for (const KernelEntry* e : kernels_for(c)) gpu_run = gpu_run || (is_gpu(e->backend) && gpus[e->backend].available);
    isolation = gpu_run ? Isolation::per_case : kCpuIsolation;
  }
  settings.seed = o.seed;
  settings.block_order = o.block_order;
  settings.reference_gflop = o.reference_gflop;
  settings.gate = !o.no_gate;
  file.provenance = run_provenance(o, knob_sets.front(), gpus[Backend::cuda].available, gpus[Backend::cuda].why_not);
  file.provenance["isolation"] = isolation_name(isolation);
  if (isolation != Isolation::off && o.case_timeout_s) file.provenance["case_timeout_s"] = *o.case_timeout_s;
  table.emplace(out, table_contents(), o.stop);
}

// Whether each GPU backend has a device (and why not), looked up here or, when in_a_worker, in a worker process.
void Runner::probe_backends(bool in_a_worker) {
  const auto look = [](Devices& d) {
    nlohmann::json j = nlohmann::json::object();
    for (Backend b : {Backend::cuda, Backend::hip}) {
      std::string why;
      const bool ok = d.get(b, &why) != nullptr;
      j[backend_name(b)] = {{"available", ok}, {"why_not", why}};
    }
    return j;
  };
  nlohmann::json found;
  if (!in_a_worker) {
    found = look(devices);
  } else {
    constexpr double kProbeTimeout = 300;
    const WorkerOutcome w = run_in_worker([&](WorkerMarker&) { Devices d; return look(d).dump(); }, kProbeTimeout);
    // An interrupt here stops the run at its first case (check_interrupt), with no row to write.
    if (w.finished) found = nlohmann::json::parse(w.message, nullptr, false);
    if (!found.is_object() || !found.contains("cuda")) {
      const std::string why = "the device probe failed: " + w.cause(kProbeTimeout);
      found = {{"cuda", {{"available", false}, {"why_not", why}}}, {"hip", {{"available", false}, {"why_not", why}}}};
    }
  }
  for (Backend b : {Backend::cuda, Backend::hip}) {
    const nlohmann::json& s = found[backend_name(b)];
    gpus[b] = {s.value("available", false), s.value("why_not", std::string())};
  }
}

// Kernels of this case's op that the selection keeps.
std::vector<const KernelEntry*> Runner::kernels_for(const ShapeCase& c) const {
  std::vector<const KernelEntry*> entries;
  const auto keep = [&](const KernelEntry& k) {
    if (k.op == c.op && glob_list_match(o.kernel_glob, k.name) && backend_selected(o.backend, k.backend, auto_backend))
      entries.push_back(&k);
  };
  for (const auto& k : kernel_registry()) keep(k);
  for (const auto& k : o.extra_kernels) keep(k);
  return entries;
}

// Every name a row of this run can print, so the table's columns fit them all from the first line on.
TableContents Runner::table_contents() const {
  TableContents t;
  t.kernels = {"-"};
  for (const auto& c : cases) {
    t.groups.push_back(c.group);
    t.shapes.push_back(c.name);
    t.dtypes.push_back(c.dtype_label());
    const auto entries = kernels_for(c);
    for (const KernelEntry* e : entries) {
      t.kernels.push_back(e->name);
      t.peers = t.peers || e->peer;
    }
    if (o.control && !entries.empty()) t.kernels.push_back(entries.front()->name + kControlSuffix);
  }
  for (Mode m : o.modes) t.modes.push_back(mode_name(m));
  for (std::size_t k = 0; knob_sets.size() > 1 && k < knob_sets.size(); ++k) t.settings.push_back(setting_label(k));
  return t;
}

ResultRow Runner::base_row(const ShapeCase& c, const OpCase* op_case, const std::string& kernel, Backend b, Mode m,
                           const KnobValues& knobs) const {
  ResultRow r;
  r.group = c.group;
  r.shape = c.name;
  r.op = op_name(c.op);
  r.dtype = c.dtype_label();
  r.kernel = kernel;
  r.backend = backend_name(b);
  r.mode = mode_name(m);
  r.l2 = l2_name(o.l2);
  r.knobs = knobs.all();
  const std::string repeated = control_of(kernel);
  r.repro = repro_command(o, c, repeated.empty() ? kernel : repeated, b, m, knobs.all());
  if (op_case) {
    r.dims = op_case->dims();
    const WorkModel w = op_case->work();
    r.flops = w.flops;
    r.bytes = w.bytes;
  }
  return r;
}

void Runner::emit(CaseRows rows) {
  progress.clear();
  for (auto& [r, setting] : rows) {
    table->row(r, setting);
    file.rows.push_back(std::move(r));
  }
}

std::optional<Journal> Runner::open_journal(std::map<std::size_t, JournalCase>* finished) const {
  if (o.journal.empty()) return std::nullopt;
  JournalHeader h;
  h.command = o.journal_command;
  h.binary_sha256 = binary_sha256();
  h.seed = o.seed;
  h.cases = cases.size();
  if (!o.resume) return Journal::create(o.journal, h);
  std::vector<std::string> keys;
  for (const auto& c : cases) keys.push_back(c.group + "/" + c.name + "/" + c.dtype_label());
  return Journal::resume(o.journal, h, keys, finished);
}

ResultsFile Runner::run() {
  std::map<std::size_t, JournalCase> finished;
  std::optional<Journal> journal = open_journal(&finished);
  table->header();
  std::size_t done = 0, resumed_rows = 0;
  try {
    for (size_t i = 0; i < cases.size(); ++i) {
      const ShapeCase& c = cases[i];
      if (auto it = finished.find(i); it != finished.end()) {  // finished before: its rows from the journal
        resumed_rows += it->second.rows.size();
        emit(std::move(it->second.rows));
        ++done;
        continue;
      }
      check_interrupt();
      progress.start(i + 1, c.group, c.name, c.dtype_label());
      CaseRows rows = isolation == Isolation::off ? run_case(c) : run_case_isolated(c);
      if (journal) {
        JournalCase jc;
        jc.index = i;
        jc.key = c.group + "/" + c.name + "/" + c.dtype_label();
        jc.rows = rows;
        journal->append(jc);
      }
      emit(std::move(rows));
      ++done;
    }
  } catch (const RunInterrupted& e) {
    progress.clear();
    file.interrupted_by = e.signal;
    file.provenance["interrupted"] = true;
    file.provenance["interrupted_by"] = signal_name(e.signal);
  }
  file.provenance["cases"] = {{"selected", cases.size()}, {"done", done}};
  if (o.resume)
    file.provenance["resumed"] = {{"journal", o.journal}, {"cases", finished.size()}, {"rows", resumed_rows}};
  table->legend();
  finish_provenance();
  if (o.control) file.provenance["control"] = control_pair_summary(file.rows);
  file.provenance["clock_settle"] = clocks.summary();
  if (nlohmann::json peers = peer_summary(file.rows); !peers.empty()) file.provenance["peers"] = std::move(peers);
  return std::move(file);
}

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
    op_case.prepare(settings);
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

// The device the rows ran on: the GPU when any GPU row ran, else the CPU.
void Runner::finish_provenance() {
  for (Backend b : {Backend::cuda, Backend::hip}) {
    bool ran = false;
    for (const auto& r : file.rows) ran = ran || (r.backend == backend_name(b) && r.status != "declined");
    if (Device* gpu = devices.existing(b); ran && gpu) {
      file.provenance["device"] = gpu->facts();
      return;
    }
    if (const auto it = worker_facts.find(b); ran && it != worker_facts.end()) {
      file.provenance["device"] = it->second;
      return;
    }
  }
  std::string why;
  file.provenance["device"] = devices.get(Backend::cpu, &why)->facts();
}

}  // namespace detail

ResultsFile run_benchmarks(const RunOptions& o, std::ostream& out) { return run_benchmarks(o, {KnobSetting{}}, out); }

namespace {
struct Selection {
  std::vector<ShapeCase> cases;
  std::vector<KnobValues> knob_sets;
};
Selection selection(const RunOptions& o, const std::vector<KnobSetting>& settings) {
  check_run_options(o);
  Selection s;
  s.cases = select_cases(o);
  if (s.cases.empty()) throw UsageError("no shapes selected (check --group/--shapes/--dtype/--filter)");
  if (settings.empty()) throw UsageError("no knob setting to run");
  for (const auto& setting : settings) {
    RunOptions with = o;
    for (const auto& [k, v] : setting) with.knob_overrides[k] = v;
    s.knob_sets.push_back(resolve_knobs(with));
  }
  check_kernel_glob(o);
  return s;
}
}  // namespace

void check_selection(const RunOptions& o, const std::vector<KnobSetting>& settings) { selection(o, settings); }

ResultsFile run_benchmarks(const RunOptions& o, const std::vector<KnobSetting>& settings, std::ostream& out) {
  const Selection s = selection(o, settings);
  return detail::Runner(o, s.knob_sets, s.cases, out).run();
}

const char* isolation_name(Isolation i) {
  switch (i) {
    case Isolation::automatic: return "auto";
    case Isolation::off: return "off";
    case Isolation::per_case: return "case";
    case Isolation::per_kernel: return "kernel";
  }
  return "?";
}

double case_timeout_default(const RunOptions& o, std::size_t kernel_modes) {
  const double per = o.gate_only ? 0.0 : o.stop.timeout_s + o.warmup_s.value_or(kGpuWarmupS);
  return 120.0 + 4.0 * static_cast<double>(kernel_modes) * per + 2.0 * o.settle_s;
}

Tolerance run_tolerance(const RunOptions& o, DType d) {
  Tolerance t = default_tolerance(d);
  if (o.atol) t.atol = *o.atol;
  if (o.rtol) t.rtol = *o.rtol;
  return t;
}

std::string nothing_ran(const ResultsFile& f) {
  if (f.rows.empty()) return "";
  std::vector<std::pair<std::string, int>> reasons;  // first-seen order, so ties keep it after the sort
  for (const auto& r : f.rows) {
    if (r.status != "declined") return "";
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& p) { return p.first == r.reason; });
    if (it == reasons.end()) reasons.emplace_back(r.reason, 1);
    else ++it->second;
  }
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  constexpr size_t kShown = 5;  // reasons that differ only in their numbers would flood the line
  std::string list;
  for (size_t i = 0; i < reasons.size() && i < kShown; ++i)
    list += (list.empty() ? "" : "; ") + std::to_string(reasons[i].second) + " x \"" + reasons[i].first + "\"";
  if (reasons.size() > kShown) list += "; " + std::to_string(reasons.size() - kShown) + " more";
  return "nothing ran: all " + std::to_string(f.rows.size()) + " rows declined (reasons: " + list + ")";
}

int exit_code_for(const ResultsFile& f, bool fail_if_nothing_ran) {
  for (const auto& r : f.rows)
    if (r.status != "ok" && r.status != "declined") return 1;
  return fail_if_nothing_ran && !nothing_ran(f).empty() ? 1 : 0;
}

}  // namespace attnbench
