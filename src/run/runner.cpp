#include "run/runner.hpp"

#include <omp.h>
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

#include "attnbench/reference_gpu.hpp"
#include "cases/op_case.hpp"
#include "cases/registry.hpp"
#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "plugins/plugin.hpp"
#include "results/control_pair.hpp"
#include "results/peer_ratio.hpp"
#include "results/printer.hpp"
#include "results/reference_summary.hpp"
#include "run/host_load.hpp"
#include "run/interrupt.hpp"
#include "run/journal.hpp"
#include "run/repro.hpp"
#include "run/runner_impl.hpp"
#include "run/worker.hpp"


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
  if (o.threads > 0) omp_set_num_threads(o.threads);  // the CPU kernels' and the Eigen reference's threads
  settings.seed = o.seed;
  settings.block_order = o.block_order;
  settings.reference_gflop = o.reference_gflop;
  settings.gate = !o.no_gate;
  settings.reference = o.reference;
  if (o.reference == ReferenceWhere::gpu && !o.no_gate && (!gpus[Backend::cuda].available || !reference::gpu_reference_built()))
    throw UsageError("--reference gpu: " + (reference::gpu_reference_built()
                                                ? "no CUDA device (" + gpus[Backend::cuda].why_not + ")"
                                                : std::string("this build has no CUDA backend")));
  file.provenance = run_provenance(o, knob_sets.front(), gpus[Backend::cuda].available, gpus[Backend::cuda].why_not);
  file.provenance["isolation"] = isolation_name(isolation);
  file.provenance["host_cpu"] = host_cpu_facts(o.threads);
  if (const nlohmann::json unread = unread_swept_knobs(); !unread.empty()) file.provenance["unread_knobs"] = unread;
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

// The swept knobs that no selected kernel reads (the knob table's `kernels`), each warned about on stderr before
// the run: its settings time the same code, so their ratios are noise. [{knob, read_by}] for the provenance.
nlohmann::json Runner::unread_swept_knobs() const {
  nlohmann::json out = nlohmann::json::array();
  if (o.swept_knobs.empty()) return out;
  std::set<std::string> names;
  for (const auto& c : cases)
    for (const KernelEntry* e : kernels_for(c)) names.insert(e->name);
  std::string selected;
  for (const auto& n : names) selected += (selected.empty() ? "" : ", ") + n;
  for (const std::string& k : o.swept_knobs) {
    const KnobSpec* spec = find_knob(k);
    if (!spec || spec->kernels.empty()) continue;
    bool read = false;
    for (const auto& n : names) read = read || glob_list_match(spec->kernels, n);
    if (read) continue;
    std::cerr << "sweep: warning: " << k << " is read by " << spec->kernels << " only, none of which is selected ("
              << (selected.empty() ? "no kernel" : selected) << "): every setting times the same code, so the "
              << "ratios between them are noise\n";
    out.push_back({{"knob", k}, {"read_by", spec->kernels}});
  }
  return out;
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
  if (const KernelEntry* e = find_kernel(repeated.empty() ? kernel : repeated)) {
    r.plugin = e->plugin;
    r.plugin_sha256 = e->plugin_sha256;
  }
  if (op_case) {
    r.dims = op_case->dims();
    const WorkModel w = op_case->work();
    r.flops = w.flops;
    r.bytes = w.bytes;
  }
  return r;
}

namespace {
// Whether the row's backend can time the row's mode at all (timing_support, with the L2 state aside: --l2 cold is
// asked for by name).
bool mode_timeable(const ResultRow& r) {
  const std::optional<Backend> b = parse_backend(r.backend);
  return !b || timing_support(*b, r.mode == "graph" ? Mode::graph : Mode::eager, L2Mode::hot).ok;
}
}  // namespace

void Runner::emit(CaseRows rows) {
  progress.clear();
  for (auto& [r, setting] : rows) {
    if (!o.modes_given && !mode_timeable(r)) continue;  // the default modes: no graph rows of a CPU kernel
    table->row(r, setting);
    file.rows.push_back(std::move(r));
  }
}

std::optional<Journal> Runner::open_journal(std::map<std::size_t, JournalCase>* finished) const {
  if (o.journal.empty()) return std::nullopt;
  JournalHeader h;
  h.command = o.journal_command;
  h.binary_sha256 = binary_sha256();
  h.plugins = plugins_json();
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
  add_load_end(file.provenance["host_cpu"]);
  if (o.resume)
    file.provenance["resumed"] = {{"journal", o.journal}, {"cases", finished.size()}, {"rows", resumed_rows}};
  table->legend();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  file.provenance["reference"] = reference_summary(file.rows, wall_s);
  table->note(reference_summary_line(file.provenance["reference"]));
  finish_provenance();
  if (o.control) file.provenance["control"] = control_pair_summary(file.rows);
  file.provenance["clock_settle"] = clocks.summary();
  if (nlohmann::json peers = peer_summary(file.rows); !peers.empty()) file.provenance["peers"] = std::move(peers);
  return std::move(file);
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
  load_plugins(o.plugins);  // their kernels join the registry before --kernel's globs are checked
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
