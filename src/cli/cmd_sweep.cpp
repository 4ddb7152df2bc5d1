// attnbench sweep: run a group once per knob setting (cartesian over --knob), one file, a side-by-side table.
#include <filesystem>
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "run/host_load.hpp"
#include "run/interrupt.hpp"
#include "run/journal.hpp"
#include "run/runner.hpp"
#include "run/sweep.hpp"

namespace attnbench {

namespace {
struct SweepCli {
  RunOptions opt;
  std::vector<std::string> knobs;
  std::vector<std::string> modes{"eager", "graph"};
  CLI::Option* mode_option = nullptr;
  std::string out, csv;
  bool no_progress = false;
  bool fail_if_nothing_ran = false;
  bool force = false;
};

void sweep_callback(SweepCli& c, Context& ctx) {
  RunOptions& o = c.opt;
  warn_unknown_environment(std::cerr);
  if (!o.selects_cases()) throw UsageError("sweep: give --group, --shapes FILE or --shape SPEC");
  const auto axes = parse_knob_axes(c.knobs);  // before any work: a typo must not cost a run
  o.modes = parse_modes(c.modes);
  for (const KnobAxis& a : axes) o.swept_knobs.push_back(a.name);
  o.modes_given = c.mode_option->count() > 0;
  o.progress = !c.no_progress;
  o.command_line = ctx.command_line;
  check_selection(o, knob_settings(axes));  // bad input is named before the output paths are judged
  if (ctx.validate_only) return;
  std::string out = c.out;
  if (out.empty()) {
    out = "results/sweep_" + selection_stem(o) + ".json";
    make_default_out_folder(out);
  }
  const bool journal = std::filesystem::exists(journal_path(out));
  const ResultPaths paths = result_paths(out, c.csv, {o.shape_files, ctx.command_line, c.force, journal});
  const std::string& csv = paths.csv;

  set_journal(o, out, ctx.args);
  InterruptGuard interrupts;
  const ResultsFile f = run_sweep(o, axes, std::cout);
  write_run_files(f, paths, o);
  std::cout << "\n" << sweep_table(f, knob_settings(axes), o.stop) << "rows: " << f.rows.size() << "\n";
  if (const std::string none = nothing_ran(f); !none.empty()) std::cout << none << "\n";
  if (const std::string w = load_warning(f.provenance.value("host_cpu", nlohmann::json())); !w.empty())
    std::cout << w << "\n";
  std::cout << "wrote " << out << " and " << csv << "\n";
  ctx.exit_code = exit_code_for(f, c.fail_if_nothing_ran);
  if (const int code = interrupted_exit(f, o, std::cout)) ctx.exit_code = code;
}
}  // namespace

void add_sweep_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<SweepCli>();
  CLI::App* cmd = app.add_subcommand("sweep", "Run shapes once per knob setting (cartesian over --knob); one file");
  cmd->add_option("--knob", c->knobs, "NAME=v1,v2,... (repeatable; see list --knobs)")->required();
  add_case_options(cmd, c->opt);
  c->mode_option = cmd->add_option("--mode", c->modes,
                                   "Timing modes: eager, graph (by default a CPU kernel gets no graph row; named, "
                                   "it gets a declined one)")
                       ->delimiter(',')
                       ->capture_default_str();
  add_stop_options(cmd, c->opt.stop);
  add_timing_options(cmd, c->opt);
  cmd->add_option("--out,-o", c->out, "Results JSON (default results/sweep_<groups>.json)");
  cmd->add_option("--csv", c->csv, "Results CSV (default: the JSON path with .csv)");
  cmd->add_flag("--no-progress", c->no_progress, "No progress on stderr (a line per case)");
  cmd->add_flag("--fail-if-nothing-ran", c->fail_if_nothing_ran, "Exit 1 when every row is declined");
  add_resume_option(cmd, c->opt);
  add_force_option(cmd, c->force);
  add_isolation_options(cmd, c->opt);
  cmd->callback([c, &ctx] { sweep_callback(*c, ctx); });
}

}  // namespace attnbench
