// attnbench compare: BASE vs NEW result files (or kernels against one kernel), a verdict per row, CI exit code.
#include <algorithm>
#include <iostream>

#include "attnbench/knobs.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "compare/compare.hpp"
#include "core/errors.hpp"
#include "results/control_pair.hpp"
#include "results/results.hpp"

namespace attnbench {

namespace {
struct CompareCli {
  std::vector<std::string> files;
  std::string threshold = "2%";
  std::vector<std::string> fail_on;
  std::string json_out;
  std::string against;  // KERNEL[,KERNEL...]
  std::vector<std::string> ignore_knobs;
  bool force = false;
};

// "A,B" -> {A, B}: each name once, in the order given, spaces around it dropped; an empty name is a usage error.
std::vector<std::string> parse_against(const std::string& text) {
  std::vector<std::string> names;
  for (std::size_t at = 0; !text.empty() && at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    std::string k = text.substr(at, comma - at);
    k.erase(0, k.find_first_not_of(' '));
    k.erase(k.find_last_not_of(' ') + 1);
    if (k.empty()) throw UsageError("compare: --against '" + text + "': an empty kernel name");
    if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    at = comma + 1;
  }
  return names;
}

void compare_callback(const CompareCli& c, Context& ctx) {
  CompareOptions o;
  o.threshold = parse_threshold(c.threshold);
  o.against = parse_against(c.against);
  const FailPolicy policy = parse_fail_on(c.fail_on);
  for (const auto& k : c.ignore_knobs) {
    if (find_knob(k) == nullptr) throw UsageError("compare: --ignore-knob: " + check_knob(k, ""));
    o.ignore_knobs.insert(k);
  }
  if (!o.ignore_knobs.empty() && !o.against.empty())
    throw UsageError("compare: --ignore-knob is for BASE vs NEW; --against already matches rows whatever their knobs");
  if (o.against.empty() && c.files.size() != 2)
    throw UsageError("compare: expected BASE.json NEW.json (or --against KERNEL[,KERNEL...] with one or more files), "
                     "got " + std::to_string(c.files.size()) + " file(s)");
  if (ctx.validate_only) return;
  if (!c.json_out.empty()) {
    check_output_path(c.json_out, "--json", OutputKind::compare_json, {c.files, ctx.command_line, c.force});
    check_writable(c.json_out);
  }
  // Differences inside a file's control-pair noise floor are not differences: the threshold rises to it.
  for (const auto& f : c.files)
    if (const auto floor = control_noise_floor(f); floor && *floor > o.threshold) {
      o.threshold = *floor;
      std::cout << "threshold raised to " << 100.0 * *floor << "%: the control-pair noise floor of " << f << "\n";
    }

  Comparison cmp;
  std::string base_path, new_path, nothing;
  if (o.against.empty()) {
    base_path = c.files[0];
    new_path = c.files[1];
    const auto base = load_timed_rows(base_path);
    const auto now = load_timed_rows(new_path);
    cmp = compare_rows(base, now, o);
    nothing = nothing_compared(cmp, base.size(), now.size());
  } else {
    std::vector<TimedRow> all;
    for (const auto& f : c.files) {
      auto rows = load_timed_rows(f);
      all.insert(all.end(), rows.begin(), rows.end());
      new_path += (new_path.empty() ? "" : " ") + f;
    }
    base_path = new_path;
    cmp = compare_against(all, o);
  }
  std::cout << format_comparison(cmp, o);
  if (!c.json_out.empty()) {
    write_file_atomic(c.json_out, comparison_to_json(cmp, o, base_path, new_path).dump(2) + "\n");
    std::cout << "wrote " << c.json_out << "\n";
  }
  ctx.exit_code = compare_exit_code(cmp, policy);
  if (!nothing.empty()) {  // a comparison of nothing is never a pass
    std::cout << nothing << "\n";
    ctx.exit_code = 1;
  }
}
}  // namespace

void add_compare_command(CLI::App& app, Context& ctx) {
  auto c = std::make_shared<CompareCli>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare two result files row by row (SAME/FAST/SLOW/AMBIG/GATE/LOST), or kernels against one kernel");
  cmd->add_option("files", c->files, "BASE.json NEW.json; with --against: one or more result files")->required();
  cmd->add_option("--threshold", c->threshold,
                  "Smallest median difference that counts, and the largest IQR/median of a quiet row (2% or 0.02)")
      ->capture_default_str();
  cmd->add_option("--fail-on", c->fail_on,
                  "Exit 1 on: slow (SLOW, LOST and UNMATCHED rows: a BASE row no NEW row matches), mismatch "
                  "(mismatch/error rows in NEW), any (those); GATE rows fail under each. A comparison that "
                  "matched no row exits 1 whatever the policy; otherwise the default is 0")
      ->delimiter(',');
  cmd->add_option("--json", c->json_out, "Write the comparison as JSON (schema attnbench.compare/1)");
  add_force_option(cmd, c->force);
  cmd->add_option("--ignore-knob", c->ignore_knobs,
                  "BASE vs NEW: match rows whatever their setting of this knob (repeatable or comma-separated), so one "
                  "binary's runs under two settings compare (an A/B of the knob)")
      ->delimiter(',');
  cmd->add_option("--against", c->against,
                  "Compare every other kernel's rows with this kernel's rows (same group, shape, dtype, mode); "
                  "several, comma-separated: with the fastest of them on each case (the better peer)");
  cmd->callback([c, &ctx] { compare_callback(*c, ctx); });
}

}  // namespace attnbench
