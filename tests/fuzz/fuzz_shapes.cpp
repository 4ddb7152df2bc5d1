// libFuzzer target: the shape-file loader (every check of a shape file), then the cases it gives as `run` and
// `list --cases` would expand them; the same bytes as an inline `--shape` spec.
#include <cstddef>
#include <cstdint>

#include "cases/inline_shape.hpp"
#include "cases/shapes.hpp"
#include "fuzz_common.hpp"
#include "run/case_list.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::input_file("shapes.json", data, size);
  fuzz::expect_clean([&] {
    const auto cases = attnbench::load_shape_file(path);
    for (const auto& c : cases) (void)c.dtype_label();
  });
  const std::string spec(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean([&] { (void)attnbench::load_inline_shape(spec); });
  return 0;
}
