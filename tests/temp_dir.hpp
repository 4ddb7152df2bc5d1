// The files a test process writes live in one folder of the temp folder, removed with them when the process exits
// (ATTNBENCH_KEEP_TEST_FILES=1 keeps it, to read a failed test's inputs and results). The pid and a clock reading at
// the folder's making name it, so a later process that reuses the pid never finds an earlier one's files (a stale
// results folder or journal changes what a run does). A process that is killed or aborts (a timeout, a sanitizer's
// report, a fuzzer's finding) leaves it. The CLI tests put its paths into shell commands unquoted, so a temp folder
// whose path the shell would split or expand is refused by name.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace testtmp {

inline const std::filesystem::path& dir() {
  struct Folder {
    std::filesystem::path path;
    pid_t owner = ::getpid();  // a forked child that exits normally must not remove its parent's folder
    Folder() {
      const auto start = std::chrono::steady_clock::now().time_since_epoch().count() % 1000000000;
      path = std::filesystem::temp_directory_path() /
             ("attnbench_test_" + std::to_string(::getpid()) + "_" + std::to_string(start));
      const std::string text = path.string();
      if (text.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-+") !=
          std::string::npos)
        throw std::runtime_error("the tests' temp folder '" + text + "' (TMPDIR) holds a character their shell " +
                                 "commands would split or expand; point TMPDIR at a plain path");
      std::filesystem::create_directories(path);
    }
    ~Folder() {
      const char* keep = std::getenv("ATTNBENCH_KEEP_TEST_FILES");
      std::error_code ec;  // a failed removal must not turn a passing process into a failing one
      if (::getpid() == owner && (keep == nullptr || std::string(keep) != "1")) std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

// `name` inside this process's folder.
inline std::string path(const std::string& name) { return (dir() / name).string(); }

}  // namespace testtmp
