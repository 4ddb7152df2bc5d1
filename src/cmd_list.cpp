// attnbench list: groups, shapes, kernels, knobs.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "commands.hpp"
#include "registry.hpp"
#include "shapes.hpp"

namespace attnbench {

namespace {
struct ListCli {
  bool groups = false, shapes = false, kernels = false, knobs = false;
  std::vector<std::string> only_groups;
};

void list_callback(const ListCli& c) {
  const bool all = !c.groups && !c.shapes && !c.kernels && !c.knobs;
  if (all || c.groups) {
    std::cout << "groups (" << shapes_dir() << "):\n";
    for (const auto& g : list_groups()) std::cout << "  " << g << "\n";
  }
  if (c.shapes) {
    const auto names = c.only_groups.empty() ? list_groups() : c.only_groups;
    for (const auto& g : names) {
      std::cout << g << ":\n";
      std::string last;
      for (const auto& s : load_group(g)) {
        if (s.name == last) continue;
        last = s.name;
        std::cout << "  " << std::left << std::setw(36) << s.name << s.describe() << "\n";
      }
    }
  }
  if (all || c.kernels) {
    std::cout << "kernels:\n";
    for (const auto& k : kernel_registry())
      std::cout << "  " << std::left << std::setw(20) << k.name << std::setw(6) << backend_name(k.backend)
                << std::setw(12) << op_name(k.op) << k.description << "\n";
  }
  if (all || c.knobs) {
    std::cout << "knobs (environment variables; override with run --set NAME=VALUE):\n";
    std::size_t name_w = 0, vals_w = 0, def_w = 0;
    auto values_of = [](const KnobSpec& k) {
      std::string vals;
      for (const auto& v : k.values) vals += (vals.empty() ? "" : "|") + v;
      return vals.empty() ? std::string("integer") : vals;
    };
    for (const auto& k : knob_table()) {
      name_w = std::max(name_w, k.name.size());
      vals_w = std::max(vals_w, values_of(k).size());
      def_w = std::max(def_w, k.default_value.size());
    }
    for (const auto& k : knob_table())
      std::cout << "  " << std::left << std::setw(static_cast<int>(name_w + 2)) << k.name
                << std::setw(static_cast<int>(vals_w + 2)) << values_of(k) << "default "
                << std::setw(static_cast<int>(def_w + 1)) << k.default_value << k.meaning << "\n";
  }
}
}  // namespace

void add_list_command(CLI::App& app, Context&) {
  auto c = std::make_shared<ListCli>();
  CLI::App* cmd = app.add_subcommand("list", "List shape groups, shapes, kernels and knobs");
  cmd->add_flag("--groups", c->groups, "Shape groups");
  cmd->add_flag("--shapes", c->shapes, "Shapes of every group (or of --group)");
  cmd->add_flag("--kernels", c->kernels, "Kernels");
  cmd->add_flag("--knobs", c->knobs, "Knob table");
  cmd->add_option("--group", c->only_groups, "With --shapes: only these groups");
  cmd->callback([c] { list_callback(*c); });
}

}  // namespace attnbench
