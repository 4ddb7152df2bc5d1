// Shared by the libFuzzer targets: an input written to a file (the readers under test take paths), and the rule
// every target holds: an input ends in success or a UsageError (the CLI's exit 2); any other exception is a
// finding (abort, so libFuzzer keeps the input), as are crashes, hangs and sanitizer reports.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "../temp_dir.hpp"
#include "core/errors.hpp"

namespace fuzz {

// A file of this process in its temp folder (removed at exit), rewritten per input.
inline std::string input_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = testtmp::path(name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const attnbench::UsageError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: not a usage error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace fuzz
