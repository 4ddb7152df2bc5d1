#include "run/case_list.hpp"

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

#include "attnbench/gated_block.hpp"
#include "cases/op_case.hpp"
#include "cases/shape_features.hpp"
#include "run/runner.hpp"

namespace attnbench {

std::vector<ShapeCase> listed_cases(RunOptions o) {
  if (!o.selects_cases()) o.groups = list_groups();
  return select_cases(o);
}

namespace {

// The row's dims, with what a caller rebuilding the problem needs and rows leave out (uniform seqlens).
nlohmann::json listed_dims(const ShapeCase& c, const OpCase& op) {
  nlohmann::json d = op.dims();
  if (c.is_attention_like()) {
    const AttentionProblem& p = c.attention;
    nlohmann::json seq = nlohmann::json::array();
    for (int s = 0; s < p.num_seqs(); ++s) seq.push_back({p.q_lens[s], p.kv_lens[s]});
    d["seqlens"] = seq;
    d["num_seqs"] = p.num_seqs();
    d["total_q"] = p.total_q();
  } else if (!d.contains("n_qkvg")) {  // a geometry the kernels decline: its rows omit these, a caller still needs them
    const GatedShape& g = c.gated;
    d["n_qkvg"] = static_cast<int64_t>(2 * g.h_q + 2 * g.h_kv) * g.d_head;
    d["scale"] = GatedOptions{}.softmax_scale(g.d_head);
  }
  return d;
}

}  // namespace

nlohmann::json case_to_json(const ShapeCase& c) {
  const auto op = make_op_case(c);
  const WorkModel w = op->work();
  const std::string dt = c.dtype_label();
  const bool att = c.is_attention_like();
  const AttentionTypes t = att ? c.attention.types : AttentionTypes::all(c.dtype);
  return {{"group", c.group},
          {"shape", c.name},
          {"file", c.file},
          {"op", op_name(c.op)},
          {"dtype", dt},
          {"types", {{"q", dtype_name(t.q)}, {"kv", dtype_name(t.kv)}, {"o", dtype_name(t.o)},
                     {"acc", AttentionTypes::accumulator}}},
          {"dims", listed_dims(c, *op)},
          {"features", att && c.attention.features.any() ? features_json(c.attention.features) : nlohmann::json::object()},
          {"work", {{"flops", w.flops}, {"bytes", w.bytes}}}};
}

nlohmann::json cases_document(const std::vector<ShapeCase>& cases) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : cases) list.push_back(case_to_json(c));
  return {{"schema", kCasesSchema}, {"cases", list}};
}

void print_case_table(const std::vector<ShapeCase>& cases, std::ostream& out) {
  struct Line {
    std::string id, op, dims, gflop, mb;
  };
  std::vector<Line> lines;
  std::size_t id_w = 4, op_w = 2, dims_w = 4;
  for (const auto& c : cases) {
    const WorkModel w = make_op_case(c)->work();
    std::ostringstream gflop, mb;
    gflop << std::fixed << std::setprecision(3) << w.flops * 1e-9;
    mb << std::fixed << std::setprecision(3) << w.bytes * 1e-6;
    lines.push_back({c.group + "/" + c.name + "/" + c.dtype_label(), op_name(c.op), c.describe(), gflop.str(),
                     mb.str()});
    id_w = std::max(id_w, lines.back().id.size());
    op_w = std::max(op_w, lines.back().op.size());
    dims_w = std::max(dims_w, lines.back().dims.size());
  }
  const auto cell = [&out](const std::string& s, std::size_t w) { out << std::left << std::setw(static_cast<int>(w + 2)) << s; };
  cell("case", id_w);
  cell("op", op_w);
  cell("dims", dims_w);
  out << std::right << std::setw(12) << "GFLOP" << std::setw(12) << "MB" << "\n";
  for (const auto& l : lines) {
    cell(l.id, id_w);
    cell(l.op, op_w);
    cell(l.dims, dims_w);
    out << std::right << std::setw(12) << l.gflop << std::setw(12) << l.mb << "\n";
  }
  out << cases.size() << " cases\n";
}

}  // namespace attnbench
