// merge: shard result files joined into one, provided they come from the same build, device and seed.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "results/results.hpp"

namespace attnbench {

struct MergeResult {
  nlohmann::json doc;        // {schema, provenance (+ merged_from), rows}
  int duplicate_rows = 0;    // rows whose key (group, shape, dtype, kernel, mode, l2, knobs) another file also has
  std::vector<std::string> hosts;  // the distinct hosts the files ran on, in file order
  ResultsFile table;               // the same rows read back, for the CSV
};

// Reads every file (read_results_json's checks); UsageError naming the field (git_sha, device, seed) and both
// files' values when the provenance differs. Every row is kept, in file order; provenance.peers is summed up anew
// over them all (peer_summary), and a malformed vs_peer or a row that does not read back as a result row is an error
// naming the file and row. Files from several hosts (shards on several runners) are joined: provenance.hosts names
// them all, and merged_from each file's.
MergeResult merge_result_files(const std::vector<std::string>& paths, const std::string& command_line);

}  // namespace attnbench
