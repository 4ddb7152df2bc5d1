// attnbench: benchmarking and parity harness for attention kernels. The one exception boundary is cli_main().
// Exit codes: 0 every row ok or declined; 1 a row mismatched or errored (or an internal error); 2 bad usage or
// input; 130 / 143 a run or sweep stopped by SIGINT / SIGTERM (what was done is written, the journal kept).
#include "cli/cli_main.hpp"

int main(int argc, char** argv) {
  attnbench::Context ctx;
  return attnbench::cli_main(argc, argv, ctx);
}
