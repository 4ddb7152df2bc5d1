// libFuzzer target: the readers of result files as compare, merge and --resume use them: read_results_json,
// compare's rows (against itself and --against each kernel), merge (the file with itself), the rows read back
// (row_from_json) and the journal parser.
#include <cstddef>
#include <cstdint>

#include "compare/compare.hpp"
#include "compare/merge.hpp"
#include "fuzz_common.hpp"
#include "results/results.hpp"
#include "run/journal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::input_file("results.json", data, size);
  fuzz::expect_clean([&] { (void)attnbench::read_results_json(path); });
  fuzz::expect_clean([&] {
    const auto rows = attnbench::load_timed_rows(path);
    attnbench::CompareOptions o;
    (void)attnbench::format_comparison(attnbench::compare_rows(rows, rows, o), o);
    if (!rows.empty()) {
      o.against = {rows.front().kernel};
      (void)attnbench::compare_against(rows, o);
      if (rows.back().kernel != rows.front().kernel) {
        o.against.push_back(rows.back().kernel);
        (void)attnbench::compare_against(rows, o);
      }
    }
  });
  fuzz::expect_clean([&] { (void)attnbench::merge_result_files({path, path}, "attnbench merge"); });
  fuzz::expect_clean([&] {
    const nlohmann::json doc = attnbench::read_results_json(path);
    for (const auto& r : doc["rows"]) (void)attnbench::row_to_json(attnbench::row_from_json(r));
  });
  fuzz::expect_clean([&] {
    (void)attnbench::parse_journal(std::string(reinterpret_cast<const char*>(data), size), "journal", nullptr);
  });
  return 0;
}
