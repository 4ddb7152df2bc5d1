// The command line's entry: parses argv into the subcommands and runs the one given, turning every failure into
// its exit code (0, 1, 2; a run stopped by a signal 128 + the signal). main() is this; the CLI fuzzer calls it with
// Context::validate_only, so that a command checks its arguments and stops before doing any work.
#pragma once
#include "cli/commands.hpp"

namespace attnbench {

int cli_main(int argc, char** argv, Context& ctx);

}  // namespace attnbench
