// attnbench run: select shapes and kernels, gate, time, write JSON + CSV.
#include <filesystem>
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "results/control_pair.hpp"
#include "results/peer_ratio.hpp"
#include "run/case_timing.hpp"
#include "run/host_load.hpp"
#include "run/interrupt.hpp"
#include "run/journal.hpp"
#include "run/runner.hpp"

namespace attnbench {

namespace {
struct RunCli {
  RunOptions opt;
  std::vector<std::string> modes{"eager", "graph"};
  CLI::Option* mode_option = nullptr;
  std::vector<std::string> sets;
  std::string l2 = "hot", block_order = "contiguous", reference = "auto";
  std::string out, csv;
  double atol = -1, rtol = -1, peak_tflops = 0, peak_gbps = 0;
  bool no_progress = false;
  bool fail_if_nothing_ran = false;
  bool force = false;
  std::string shard;
};

std::string default_out(const RunOptions& o) { return "results/" + selection_stem(o) + ".json"; }

void run_callback(RunCli& c, Context& ctx) {
  RunOptions& o = c.opt;
  warn_unknown_environment(std::cerr);
  if (!o.selects_cases()) throw UsageError("run: give at least one --group, --shapes FILE or --shape SPEC");
  o.modes = parse_modes(c.modes);
  o.modes_given = c.mode_option->count() > 0;
  if (c.l2 == "hot") o.l2 = L2Mode::hot;
  else if (c.l2 == "cold") o.l2 = L2Mode::cold;
  else throw UsageError("--l2: '" + c.l2 + "' is not hot|cold");
  try {
    o.block_order = parse_block_order(c.block_order);
    o.reference = parse_reference_where(c.reference);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  for (const auto& s : c.sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--set: expected NAME=VALUE, got '" + s + "'");
    const std::string name = s.substr(0, eq), value = s.substr(eq + 1);
    const std::string err = check_knob(name, value);
    if (!err.empty()) throw UsageError("--set: " + err);
    if (o.knob_overrides.count(name)) throw UsageError("--set: " + name + " given twice");
    o.knob_overrides[name] = value;
  }
  if (!c.shard.empty()) {
    const std::string bad = "--shard: expected K/N with 1 <= K <= N (e.g. 2/4), got '" + c.shard + "'";
    const auto slash = c.shard.find('/');
    if (slash == std::string::npos) throw UsageError(bad);
    const std::string k = c.shard.substr(0, slash), n = c.shard.substr(slash + 1);
    const auto digits = [](const std::string& s) {
      return !s.empty() && s.size() < 7 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(k) || !digits(n)) throw UsageError(bad);
    o.shard = {std::stoi(k), std::stoi(n)};
    if (o.shard.first < 1 || o.shard.first > o.shard.second) throw UsageError(bad);
  }
  if (c.atol >= 0) o.atol = c.atol;
  if (c.rtol >= 0) o.rtol = c.rtol;
  if (c.peak_tflops > 0) o.peak_tflops = c.peak_tflops;
  if (c.peak_gbps > 0) o.peak_gbps = c.peak_gbps;
  o.progress = !c.no_progress;
  o.command_line = ctx.command_line;
  check_selection(o, {KnobSetting{}});  // bad input is named before the output paths are judged
  if (ctx.validate_only) return;
  if (c.out.empty()) make_default_out_folder(default_out(o));
  const std::string out_path = c.out.empty() ? default_out(o) : c.out;
  const bool journal = std::filesystem::exists(journal_path(out_path));
  const ResultPaths paths = result_paths(out_path, c.csv, {o.shape_files, ctx.command_line, c.force, journal});
  const std::string &out = paths.json, &csv = paths.csv;

  set_journal(o, out, ctx.args);
  InterruptGuard interrupts;
  const ResultsFile f = run_benchmarks(o, std::cout);
  write_run_files(f, paths, o);
  int ok = 0, declined = 0, mismatch = 0, error = 0;
  for (const auto& r : f.rows) {
    ok += r.status == "ok";
    declined += r.status == "declined";
    mismatch += r.status == "mismatch";
    error += r.status == "error";
  }
  std::cout << "rows: " << f.rows.size() << " (ok " << ok << ", declined " << declined << ", mismatch " << mismatch
            << ", error " << error << ")\n";
  if (const std::string none = nothing_ran(f); !none.empty()) std::cout << none << "\n";
  if (f.provenance.contains("control"))
    if (const std::string line = control_pair_line(f.provenance["control"]); !line.empty()) std::cout << line << "\n";
  if (const std::string line = clock_summary_line(f); !line.empty()) std::cout << line << "\n";
  if (const std::string w = load_warning(f.provenance.value("host_cpu", nlohmann::json())); !w.empty())
    std::cout << w << "\n";
  if (f.provenance.contains("peers"))
    for (const std::string& line : peer_summary_lines(f.provenance["peers"])) std::cout << line << "\n";
  std::cout << "wrote " << out << " and " << csv << "\n";
  ctx.exit_code = exit_code_for(f, c.fail_if_nothing_ran);
  if (const int code = interrupted_exit(f, o, std::cout)) ctx.exit_code = code;
}
}  // namespace

void add_run_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<RunCli>();
  CLI::App* cmd = app.add_subcommand("run", "Gate and time the kernels on shape groups; write JSON and CSV");
  add_case_options(cmd, c->opt);
  c->mode_option = cmd->add_option("--mode", c->modes,
                                   "Timing modes: eager, graph (by default a CPU kernel gets no graph row; named, "
                                   "it gets a declined one)")
                       ->delimiter(',')
                       ->capture_default_str();
  cmd->add_option("--out,-o", c->out, "Results JSON (default results/<groups>.json)");
  cmd->add_option("--csv", c->csv, "Results CSV (default: the JSON path with .csv)");
  cmd->add_option("--atol", c->atol, "Gate bound on max |out - ref| (default: fp16 2e-2, bf16 4e-2)")
      ->check(positive_finite());
  cmd->add_option("--rtol", c->rtol,
                  "Gate bound on each checked row's relative L2 error (default: fp16 1e-3, bf16 8e-3; gated block x5)")
      ->check(positive_finite());
  cmd->add_flag("--gate-only", c->opt.gate_only, "Gate every row, time nothing");
  cmd->add_flag("--no-gate", c->opt.no_gate, "Time without gating (rows are not checked)");
  add_stop_options(cmd, c->opt.stop);
  add_timing_options(cmd, c->opt);
  cmd->add_flag("--control", c->opt.control,
                "Also time the first selected kernel as a second, independent entry (KERNEL#control): its ratio to "
                "the first is the run's noise floor");
  cmd->add_option("--l2", c->l2, "hot: back-to-back; cold: L2 flushed before each sample (CUDA)")->capture_default_str();
  cmd->add_option("--block-order", c->block_order, "contiguous | shuffled | repeated (random, shared) physical KV blocks")->capture_default_str();
  cmd->add_option("--set", c->sets, "Knob override NAME=VALUE (repeatable; see list --knobs)");
  cmd->add_option("--reference", c->reference,
                  "Where the fp32 reference runs: auto (the GPU when a CUDA device is there: every row checked; "
                  "else the CPU), cpu (Eigen, rows sampled past --reference-gflop), gpu")->capture_default_str();
  cmd->add_option("--reference-gflop", c->opt.reference_gflop,
                  "CPU reference work per shape before the gate samples rows (with coverage: README, The gate)")
      ->capture_default_str()
      ->check(positive_finite());
  cmd->add_option("--peak-tflops", c->peak_tflops, "Device peak TFLOP/s for % of peak (from attnbench info)")
      ->check(positive_finite());
  cmd->add_option("--peak-gbps", c->peak_gbps, "Device peak GB/s for % of peak (from attnbench info)")
      ->check(positive_finite());
  cmd->add_flag("--no-progress", c->no_progress, "No progress on stderr (a line per case)");
  cmd->add_flag("--fail-if-nothing-ran", c->fail_if_nothing_ran, "Exit 1 when every row is declined");
  cmd->add_flag("--breakdown", c->opt.breakdown,
                "Also time each stage of staged kernels (gated block): a 'breakdown' field in their rows");
  add_resume_option(cmd, c->opt);
  add_force_option(cmd, c->force);
  add_isolation_options(cmd, c->opt);
  cmd->add_option("--shard", c->shard, "K/N: only the K-th (1-based) of N slices of the selected cases");
  cmd->callback([c, &ctx] { run_callback(*c, ctx); });
}

}  // namespace attnbench
