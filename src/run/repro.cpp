#include "run/repro.hpp"

#include <algorithm>
#include <sstream>

#include "attnbench/knobs.hpp"
#include "cases/inline_shape.hpp"
#include "cases/registry.hpp"

namespace attnbench {

namespace {
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/=:,") ==
                        std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// Escapes the characters an ECMAScript regex gives a meaning to, so a shape name matches itself.
std::string regex_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (std::string("\\^$.|?*+()[]{}").find(ch) != std::string::npos) o += '\\';
    o += ch;
  }
  return o;
}

}  // namespace

std::string repro_command(const RunOptions& o, const ShapeCase& c, const std::string& kernel, Backend backend,
                          Mode mode, const std::map<std::string, std::string>& knobs) {
  std::ostringstream os;
  os << "attnbench run ";
  // A plugin's kernel needs its file again (a host-registered table without one cannot be rerun from a shell).
  if (const KernelEntry* e = find_kernel(kernel); e && !e->plugin_sha256.empty())
    os << "--plugin " << shell_quote(e->plugin) << " ";
  const bool from_group = std::find(o.groups.begin(), o.groups.end(), c.group) != o.groups.end();
  const auto spec = std::find_if(o.inline_shapes.begin(), o.inline_shapes.end(),
                                 [&](const std::string& s) { return inline_shape_source(s) == c.file; });
  if (from_group) os << "--group " << shell_quote(c.group);
  else if (spec != o.inline_shapes.end()) os << "--shape " << shell_quote(*spec);
  else os << "--shapes " << shell_quote(c.file);
  os << " --filter "
     << shell_quote("^" + regex_escape(c.group + "/" + c.name + "/" + c.dtype_label()) + "$") << " --kernel "
     << shell_quote(kernel) << " --backend " << backend_name(backend) << " --mode " << mode_name(mode) << " --l2 "
     << l2_name(o.l2) << " --seed " << o.seed;
  if (o.block_order != BlockOrder::contiguous) os << " --block-order " << block_order_name(o.block_order);
  if (o.atol) os << " --atol " << *o.atol;
  if (o.rtol) os << " --rtol " << *o.rtol;
  if (o.no_gate) os << " --no-gate";
  if (o.threads > 0) os << " --threads " << o.threads;
  if (o.reference != ReferenceWhere::automatic) os << " --reference " << reference_where_name(o.reference);
  if (o.reference_gflop != RunOptions().reference_gflop) os << " --reference-gflop " << o.reference_gflop;
  for (const auto& [k, v] : knobs) {
    const KnobSpec* spec = find_knob(k);
    if (spec && spec->default_value != v) os << " --set " << k << "=" << v;
  }
  return os.str();
}

}  // namespace attnbench
