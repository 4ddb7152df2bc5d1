// Shared by the libFuzzer targets: an input written to a file (the readers under test take paths), and the rule
// every target holds: an input ends in success or a UsageError (the CLI's exit 2); any other exception is a
// finding (abort, so libFuzzer keeps the input), as are crashes, hangs and sanitizer reports.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "errors.hpp"

namespace fuzz {

// A file of this process in the temp folder, rewritten per input.
inline std::string input_file(const std::string& name, const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("attnbench_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  const std::string path = dir + "/" + name;
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
