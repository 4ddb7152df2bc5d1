// libFuzzer target: the command-line parser. The input is argv[1..], one argument per line; each command checks
// its arguments (options, files, shapes, knobs, kernel globs) and stops before any work (Context::validate_only).
// The exit code must be 0 (valid, or --help), 1 never (no work is done), or 2 (a usage error).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/cli_main.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Help and error text is not what is tested; the shipped shapes/ folder is what --group reads.
  std::freopen("/dev/null", "w", stdout);
  setenv("ATTNBENCH_SHAPES_DIR", ATTNBENCH_SOURCE_DIR "/shapes", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args = {"attnbench"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  attnbench::Context ctx;
  ctx.validate_only = true;
  const int code = attnbench::cli_main(static_cast<int>(args.size()), argv.data(), ctx);
  if (code != 0 && code != 2) {
    std::fprintf(stderr, "fuzz: exit code %d\n", code);
    std::abort();
  }
  return 0;
}
