// attnbench merge: join shard result files (same git sha, device and seed) into one, recording the sources.
#include <iostream>

#include "cli_options.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "merge.hpp"
#include "results.hpp"

namespace attnbench {

namespace {
struct MergeCli {
  std::vector<std::string> files;
  std::string out;
  bool force = false;
};

void merge_callback(const MergeCli& c, Context& ctx) {
  if (ctx.validate_only) return;
  check_output_path(c.out, "--out", OutputKind::results_json, {c.files, ctx.command_line, c.force});
  check_writable(c.out);
  const MergeResult m = merge_result_files(c.files, ctx.command_line);
  write_file_atomic(c.out, m.doc.dump(2) + "\n");
  if (m.duplicate_rows > 0)
    std::cerr << "merge: warning: " << m.duplicate_rows
              << " row(s) repeat a row of another file (same group, shape, dtype, kernel, mode, l2, knobs); kept all\n";
  std::cout << "merged " << c.files.size() << " file(s), " << m.doc["rows"].size() << " rows into " << c.out << "\n";
  ctx.exit_code = 0;
}
}  // namespace

void add_merge_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<MergeCli>();
  CLI::App* cmd = app.add_subcommand("merge", "Join result files (e.g. run --shard K/N) into one");
  cmd->add_option("files", c->files, "Result files from the same build, device and seed")->required();
  cmd->add_option("--out,-o", c->out, "The merged results JSON")->required();
  add_force_option(cmd, c->force);
  cmd->callback([c, &ctx] { merge_callback(*c, ctx); });
}

}  // namespace attnbench
