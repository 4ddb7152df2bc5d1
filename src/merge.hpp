// merge: shard result files joined into one, provided they come from the same build, device and seed.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnbench {

struct MergeResult {
  nlohmann::json doc;        // {schema, provenance (+ merged_from), rows}
  int duplicate_rows = 0;    // rows whose key (group, shape, dtype, kernel, mode, l2, knobs) another file also has
};

// Reads every file (read_results_json's checks); UsageError naming the field (git_sha, device, seed) and both
// files' values when the provenance differs. Every row is kept, in file order; provenance.peers is summed up anew
// over them all (peer_summary), and a malformed vs_peer is an error naming the file and row.
MergeResult merge_result_files(const std::vector<std::string>& paths, const std::string& command_line);

}  // namespace attnbench
