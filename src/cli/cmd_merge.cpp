// attnbench merge: join shard result files (same git sha, device and seed) into one JSON and its CSV, recording the
// sources.
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "compare/merge.hpp"
#include "core/errors.hpp"
#include "results/results.hpp"

namespace attnbench {

namespace {
struct MergeCli {
  std::vector<std::string> files;
  std::string out, csv;
  bool force = false;
};

void merge_callback(const MergeCli& c, Context& ctx) {
  if (ctx.validate_only) return;
  const ResultPaths paths = result_paths(c.out, c.csv, {c.files, ctx.command_line, c.force});
  const MergeResult m = merge_result_files(c.files, ctx.command_line);
  write_file_atomic(paths.json, m.doc.dump(2) + "\n");
  write_file_atomic(paths.csv, results_to_csv(m.table));
  if (m.duplicate_rows > 0)
    std::cerr << "merge: warning: " << m.duplicate_rows
              << " row(s) repeat a row of another file (same group, shape, dtype, kernel, mode, l2, knobs); kept all\n";
  if (m.hosts.size() > 1) {
    std::cerr << "merge: warning: the files ran on " << m.hosts.size() << " hosts (";
    for (std::size_t i = 0; i < m.hosts.size(); ++i) std::cerr << (i ? ", " : "") << m.hosts[i];
    std::cerr << "): the same device name, but timings across hosts compare their cards too; provenance.hosts names "
                 "them, merged_from each file's\n";
  }
  std::cout << "merged " << c.files.size() << " file(s), " << m.doc["rows"].size() << " rows into " << paths.json
            << " and " << paths.csv << "\n";
  ctx.exit_code = 0;
}
}  // namespace

void add_merge_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<MergeCli>();
  CLI::App* cmd = app.add_subcommand("merge", "Join result files (e.g. run --shard K/N) into one");
  cmd->add_option("files", c->files, "Result files from the same build, device and seed")->required();
  cmd->add_option("--out,-o", c->out, "The merged results JSON")->required();
  cmd->add_option("--csv", c->csv, "The merged results CSV (default: --out with .csv)");
  add_force_option(cmd, c->force);
  cmd->callback([c, &ctx] { merge_callback(*c, ctx); });
}

}  // namespace attnbench
