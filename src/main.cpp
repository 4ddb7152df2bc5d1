// attnbench: benchmarking and parity harness for attention kernels. The one exception boundary.
// Exit codes: 0 every row ok or declined; 1 a row mismatched or errored (or an internal error); 2 bad usage or input.
#include <iostream>

#include "commands.hpp"
#include "errors.hpp"

#ifndef ATTNBENCH_VERSION
#define ATTNBENCH_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  attnbench::Context ctx;
  for (int i = 0; i < argc; ++i) ctx.command_line += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) ctx.args.emplace_back(argv[i]);
  CLI::App app{"attnbench: gate and time attention kernels on shape groups; write JSON/CSV results"};
  app.set_version_flag("--version", std::string("attnbench ") + ATTNBENCH_VERSION + " (" + ATTNBENCH_GIT_SHA + ")");
  app.require_subcommand(1);
  attnbench::add_run_command(app, ctx);
  attnbench::add_list_command(app, ctx);
  attnbench::add_info_command(app, ctx);
  attnbench::add_compare_command(app, ctx);
  attnbench::add_sweep_command(app, ctx);
  attnbench::add_merge_command(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const attnbench::UsageError& e) {
    std::cerr << "attnbench: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attnbench: internal error: " << e.what() << "\n";
    return 1;
  }
  return ctx.exit_code;
}
