// One file per subcommand; each adds itself to the app and records its exit code in the context.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace attnbench {

struct Context {
  std::string command_line;
  std::vector<std::string> args;  // argv[1..], as given
  bool validate_only = false;      // check the arguments, then stop before any work (the CLI fuzzer)
  int exit_code = 0;
};

void add_run_command(CLI::App& app, Context& ctx);
void add_list_command(CLI::App& app, Context& ctx);
void add_info_command(CLI::App& app, Context& ctx);
void add_compare_command(CLI::App& app, Context& ctx);
void add_sweep_command(CLI::App& app, Context& ctx);
void add_merge_command(CLI::App& app, Context& ctx);

}  // namespace attnbench
