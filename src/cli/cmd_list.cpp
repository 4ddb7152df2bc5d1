// attnbench list: groups, shapes, cases, kernels, knobs.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "cases/inline_shape.hpp"
#include "cases/registry.hpp"
#include "cases/shapes.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "core/errors.hpp"
#include "plugins/plugin.hpp"
#include "run/case_list.hpp"

namespace attnbench {

namespace {
struct ListCli {
  bool groups = false, shapes = false, cases = false, json = false, kernels = false, knobs = false;
  // --shapes is both the flag that lists shapes and the option naming shape files; a bare --shapes gives "".
  std::vector<std::string> shape_args;
  RunOptions selection;  // groups, shape files, dtypes, filter
  std::vector<std::string> plugins;
};

// Sorts the --shapes values into the flag and the files, and refuses options that would be ignored.
void resolve_list_options(ListCli& c) {
  for (const auto& s : c.shape_args) {
    if (!s.empty()) c.selection.shape_files.push_back(s);
    else if (c.cases) throw UsageError("--shapes: expected a shape FILE with --cases");
    else c.shapes = true;
  }
  if (c.json && !c.cases) throw UsageError("--json: only with --cases");
  if (c.cases && (c.groups || c.kernels || c.knobs))
    throw UsageError("--cases: give it without --groups, --kernels and --knobs (its output is one listing)");
  if ((!c.selection.dtypes.empty() || !c.selection.filter.empty()) && !c.cases)
    throw UsageError("--dtype and --filter: only with --cases");
  if ((!c.selection.shape_files.empty() || !c.selection.inline_shapes.empty()) && !c.cases) c.shapes = true;
}

void list_shapes(const ListCli& c) {
  std::vector<std::string> names = c.selection.groups;
  if (!c.selection.selects_cases()) names = list_groups();
  std::vector<std::pair<std::string, std::vector<ShapeCase>>> sources;
  for (const auto& g : names) sources.emplace_back(g, load_group(g));
  for (const auto& f : c.selection.shape_files) sources.emplace_back(f, load_shape_file(f));
  for (const auto& spec : c.selection.inline_shapes)
    sources.emplace_back(inline_shape_source(spec), load_inline_shape(spec));
  for (const auto& [title, cases] : sources) {
    std::cout << title << ":\n";
    std::string last;
    for (const auto& s : cases) {
      if (s.name == last) continue;
      last = s.name;
      std::cout << "  " << std::left << std::setw(36) << s.name << s.describe() << "\n";
    }
  }
}

void list_callback(ListCli& c) {
  resolve_list_options(c);
  load_plugins(c.plugins);
  if (c.cases) {
    const auto cases = listed_cases(c.selection);
    if (c.json) std::cout << cases_document(cases).dump(2) << "\n";
    else print_case_table(cases, std::cout);
    return;
  }
  const bool all = !c.groups && !c.shapes && !c.kernels && !c.knobs;
  if (all || c.groups) {
    std::cout << "groups (" << shapes_dir() << "):\n";
    for (const auto& g : list_groups()) std::cout << "  " << g << "\n";
  }
  if (c.shapes) list_shapes(c);
  if (all || c.kernels) {
    std::cout << "kernels:\n";
    std::size_t name_w = 0, op_w = 0;  // columns as wide as their widest entry (a plugin's names are its own)
    for (const auto& k : kernel_registry()) {
      name_w = std::max(name_w, k.name.size());
      op_w = std::max(op_w, std::string(op_name(k.op)).size());
    }
    for (const auto& k : kernel_registry())
      std::cout << "  " << std::left << std::setw(static_cast<int>(name_w + 1)) << k.name << std::setw(6)
                << backend_name(k.backend) << std::setw(static_cast<int>(op_w + 1)) << op_name(k.op) << k.description
                << (k.plugin.empty() ? "" : " (plugin " + k.plugin + ")") << "\n";
  }
  if (all || c.knobs) {
    std::cout << "knobs (environment variables; override with run --set NAME=VALUE):\n";
    std::size_t name_w = 0, vals_w = 0, def_w = 0;
    for (const auto& k : knob_table()) {
      name_w = std::max(name_w, k.name.size());
      vals_w = std::max(vals_w, knob_values_text(k).size());
      def_w = std::max(def_w, k.default_value.size());
    }
    for (const auto& k : knob_table())
      std::cout << "  " << std::left << std::setw(static_cast<int>(name_w + 2)) << k.name
                << std::setw(static_cast<int>(vals_w + 2)) << knob_values_text(k) << "default "
                << std::setw(static_cast<int>(def_w + 1)) << k.default_value << k.meaning << "\n";
  }
}
}  // namespace

void add_list_command(CLI::App& app, Context&) {
  auto c = std::make_shared<ListCli>();
  CLI::App* cmd = app.add_subcommand("list", "List shape groups, shapes, cases, kernels and knobs");
  cmd->add_flag("--groups", c->groups, "Shape groups");
  cmd->add_option("--shapes", c->shape_args,
                  "Alone: the shapes of every group (or of --group); with FILE: that shape file (repeatable)")
      ->expected(0, CLI::detail::expected_max_vector_size);
  cmd->add_flag("--cases", c->cases, "The cases run would take (one per shape x dtype) of --group / --shapes FILE");
  cmd->add_flag("--json", c->json, "With --cases: one JSON document (schema attnbench.cases/1)");
  cmd->add_flag("--kernels", c->kernels, "Kernels");
  cmd->add_flag("--knobs", c->knobs, "Knob table");
  add_plugin_option(cmd, c->plugins);
  cmd->add_option("--group,-g", c->selection.groups, "With --shapes or --cases: only these groups");
  cmd->add_option("--shape", c->selection.inline_shapes,
                  std::string("An inline attention shape, as run takes it (repeatable): ") + kInlineShapeGrammar);
  cmd->add_option("--dtype", c->selection.dtypes, "With --cases: keep only these dtypes (bf16, fp16)")->delimiter(',');
  cmd->add_option("--filter", c->selection.filter, "With --cases: regex over 'group/shape/dtype'");
  cmd->callback([c] { list_callback(*c); });
}

}  // namespace attnbench
