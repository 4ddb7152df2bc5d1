#include "cli/cli_main.hpp"

#include <iostream>

#include "core/errors.hpp"
#include "run/interrupt.hpp"

#ifndef ATTNBENCH_VERSION
#define ATTNBENCH_VERSION "0.0.0"
#endif

namespace attnbench {

int cli_main(int argc, char** argv, Context& ctx) {
  for (int i = 0; i < argc; ++i) ctx.command_line += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) ctx.args.emplace_back(argv[i]);
  CLI::App app{"attnbench: gate and time attention kernels on shape groups; write JSON/CSV results"};
  app.set_version_flag("--version", std::string("attnbench ") + ATTNBENCH_VERSION + " (" + ATTNBENCH_GIT_SHA + ")");
  app.require_subcommand(1);
  add_run_command(app, ctx);
  add_list_command(app, ctx);
  add_info_command(app, ctx);
  add_compare_command(app, ctx);
  add_sweep_command(app, ctx);
  add_merge_command(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const UsageError& e) {
    std::cerr << "attnbench: error: " << e.what() << "\n";
    return 2;
  } catch (const RunInterrupted& e) {  // stopped before its run began (a run itself writes what it did)
    std::cerr << "attnbench: interrupted by " << signal_name(e.signal) << "\n";
    return 128 + e.signal;
  } catch (const std::exception& e) {
    std::cerr << "attnbench: internal error: " << e.what() << "\n";
    return 1;
  }
  return ctx.exit_code;
}

}  // namespace attnbench
