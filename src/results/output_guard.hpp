// What an output path (-o, --csv, --json) may replace. Results are written atomically by a rename, which would
// replace whatever sits at the path, so the path is held to rules first, before any work: never a non-regular file
// (a device node, a folder, a FIFO, a socket), never one of the command's own inputs, and, unless --force, only a
// file this same command wrote before (a results file of another command, or any other file, is somebody's data).
#pragma once
#include <string>
#include <vector>

namespace attnbench {

struct OutputGuard {
  std::vector<std::string> inputs;  // the command's input files (shape files, results files it reads)
  std::string command;              // the command line as provenance records it; its first word is not compared
  bool force = false;               // --force: replace any regular file that is not an input
  // An unfinished run's journal sits beside the output: whether this command may continue it (and so replace its
  // partial results) is the journal's to decide (--resume's rules), not the command line's.
  bool journal_decides = false;
};

// The kinds of file an output may replace without --force.
enum class OutputKind {
  results_json,  // an attnbench results file whose provenance.command is this command
  results_csv,   // an attnbench results CSV (its header) whose JSON beside it may be replaced
  compare_json,  // an attnbench comparison (schema attnbench.compare/1)
};

// UsageError naming the path, the flag and why, when `path` may not be written.
void check_output_path(const std::string& path, const char* flag, OutputKind kind, const OutputGuard& g);

}  // namespace attnbench
