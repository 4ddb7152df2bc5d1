// Backends: names, the hip value in a binary without HIP kernels, and the rule that the harness (src/) reaches a
// GPU only through the runtime shim (attnbench/gpu_runtime.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "attnbench/kernel.hpp"
#include "cases/registry.hpp"
#include "cli_helpers.hpp"

namespace fs = std::filesystem;
using namespace attnbench;
using testcli::Result;
using testcli::run_cli;
using testcli::tmp_path;

namespace {

constexpr const char* kHipNotBuilt = "HIP backend not built (this binary has no hip kernels)";

std::string write_tiny_shapes() {
  const std::string p = tmp_path("backends_tiny.json");
  std::ofstream(p) << R"({"group": "tiny", "defaults": {"heads": 4, "kv_heads": 2, "head_size": 64, "block_size": 16},
    "shapes": [{"name": "prefill", "seqlens": [[3, 40], [17, 17]]},
               {"name": "decode", "batch": 3, "seqlen_q": 1, "seqlen_k": 70}]})";
  return p;
}

// Code without its comments, so that a comment may name a runtime call; string literals are kept.
std::string strip_comments(const std::string& src) {
  std::string out;
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src.compare(i, 2, "//") == 0) {
      while (i < src.size() && src[i] != '\n') ++i;
      if (i < src.size()) out += '\n';
    } else if (src.compare(i, 2, "/*") == 0) {
      const std::size_t end = src.find("*/", i + 2);
      i = end == std::string::npos ? src.size() : end + 1;
    } else {
      out += src[i];
    }
  }
  return out;
}

// Each line of `src` that calls a GPU runtime, names a runtime type or includes a runtime header: cudaX / hipX
// identifiers, driver types (CUstream), the CUDA layer's check macro, runtime headers and kernels/cuda's runtime.
std::vector<std::string> runtime_uses(const std::string& src) {
  static const std::regex use(
      R"((^|[^A-Za-z0-9_])((cuda|hip)[A-Z][A-Za-z0-9_]*|CU[a-z][A-Za-z0-9_]*|ATTNBENCH_CUDA_CHECK)|)"
      R"(#\s*include\s*[<"](cuda_runtime|cuda\.h|hip/|cuda/runtime\.hpp|cuda/timing\.hpp))");
  std::vector<std::string> hits;
  std::istringstream lines(strip_comments(src));
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n)
    if (std::regex_search(line, use)) hits.push_back(std::to_string(n) + ": " + line);
  return hits;
}

}  // namespace

TEST(Backends, NameParseRoundTrip) {
  std::set<std::string> names;
  for (Backend b : {Backend::cpu, Backend::cuda, Backend::hip}) {
    const std::string name = backend_name(b);
    names.insert(name);
    ASSERT_TRUE(parse_backend(name).has_value()) << name;
    EXPECT_EQ(*parse_backend(name), b) << name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"cpu", "cuda", "hip"}));
  for (const char* other : {"", "auto", "all", "HIP", "Cuda", "rocm", "hip "})
    EXPECT_FALSE(parse_backend(other).has_value()) << "'" << other << "'";
}

TEST(Backends, RegistryKnowsWhatIsBuilt) {
  EXPECT_TRUE(backend_built(Backend::cpu));
#ifdef ATTNBENCH_WITH_CUDA
  EXPECT_TRUE(backend_built(Backend::cuda));
#else
  EXPECT_FALSE(backend_built(Backend::cuda));
#endif
#ifndef ATTNBENCH_WITH_HIP
  EXPECT_FALSE(backend_built(Backend::hip));
  EXPECT_EQ(backend_not_built_reason(Backend::hip), kHipNotBuilt);
  std::string why;
  EXPECT_EQ(make_backend_device(Backend::hip, &why), nullptr);
  EXPECT_EQ(why, kHipNotBuilt);
#else
  EXPECT_TRUE(backend_built(Backend::hip));
  std::string why;
  if (!make_backend_device(Backend::hip, &why)) {
    EXPECT_EQ(why, "no HIP device");
  }
#endif
  std::string none;
  const auto cpu = make_backend_device(Backend::cpu, &none);
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->backend(), Backend::cpu);
}

#ifndef ATTNBENCH_WITH_HIP
TEST(Backends, HipRowsAreDeclinedWithTheReason) {
  // Attention and gated-block cases alike: one declined row per (shape, dtype, mode), exit 0.
  int n = 0;
  for (const std::string& shapes : {write_tiny_shapes(), std::string(ATTNBENCH_SOURCE_DIR "/tests/data/gated_small.json")}) {
    const std::string out = tmp_path("hip" + std::to_string(n++) + ".json");
    const Result r = run_cli("run --shapes " + shapes + " --backend hip --no-progress -o " + out);
    ASSERT_EQ(r.code, 0) << r.output;
    const auto j = testcli::read_json(out);
    ASSERT_FALSE(j["rows"].empty()) << shapes;
    for (const auto& row : j["rows"]) {
      EXPECT_EQ(row["status"], "declined") << row.dump();
      EXPECT_EQ(row["backend"], "hip") << row.dump();
      EXPECT_EQ(row["reason"], kHipNotBuilt) << row.dump();
      EXPECT_NE(row["repro"].get<std::string>().find("--backend hip"), std::string::npos) << row.dump();
    }
    EXPECT_NE(r.output.find(std::string("nothing ran")), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(kHipNotBuilt), std::string::npos) << r.output;
  }
  const Result strict = run_cli("run --shapes " + write_tiny_shapes() + " --backend hip --fail-if-nothing-ran -o " +
                                tmp_path("hip_strict.json"));
  EXPECT_EQ(strict.code, 1) << strict.output;
}
#endif

TEST(Backends, AllAndAutoRunNoHipRows) {
  for (const char* sel : {"all", "auto"}) {
    const std::string out = tmp_path(std::string("sel_") + sel + ".json");
    const Result r = run_cli("run --shapes " + write_tiny_shapes() + " --backend " + sel +
                             " --gate-only --mode eager --no-progress -o " + out);
    ASSERT_EQ(r.code, 0) << sel << "\n" << r.output;
    const auto j = testcli::read_json(out);
    ASSERT_FALSE(j["rows"].empty());
    bool cpu_ran = false;
    for (const auto& row : j["rows"]) {
#ifdef ATTNBENCH_WITH_HIP
      // A HIP build lists its kernels under "all"; without an AMD GPU each such row is a decline that says so.
      if (row["backend"] == "hip" && row["status"] != "ok") {
        EXPECT_EQ(std::string(sel), "all") << row.dump();
        EXPECT_EQ(row["status"], "declined") << row.dump();
        EXPECT_EQ(row["reason"], "no HIP device") << row.dump();
      }
#else
      EXPECT_NE(row["backend"], "hip") << sel << " " << row.dump();
#endif
      cpu_ran = cpu_ran || (row["backend"] == "cpu" && row["status"] == "ok");
    }
    if (std::string(sel) == "all") {
      EXPECT_TRUE(cpu_ran) << r.output;
    }
  }
}

TEST(Backends, BackendOptionNamesHip) {
  const Result bad = run_cli("run --group decode --backend tpu");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("auto|cpu|cuda|hip|all"), std::string::npos) << bad.output;
  const Result help = run_cli("run --help");
  EXPECT_NE(help.output.find("| hip |"), std::string::npos) << help.output;
}

TEST(Backends, InfoSaysWhetherHipIsBuilt) {
  const Result r = run_cli("info --no-measure");
  ASSERT_EQ(r.code, 0) << r.output;
#ifndef ATTNBENCH_WITH_HIP
  EXPECT_NE(r.output.find("hip: not built (this binary has no hip kernels)"), std::string::npos) << r.output;
#else
  EXPECT_NE(r.output.find("hip:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("hip: not built"), std::string::npos) << r.output;
#endif
}

TEST(Backends, RuntimeUseScannerFindsCallsAndTypes) {
  // The scanner itself: it must flag what the source check exists for, and only that.
  EXPECT_EQ(runtime_uses("  ATTNBENCH_CUDA_CHECK(cudaMalloc(&p, n));\n").size(), 1u);
  EXPECT_EQ(runtime_uses("cudaStream_t s = nullptr;\n").size(), 1u);
  EXPECT_EQ(runtime_uses("void f(hipStream_t s);\n").size(), 1u);
  EXPECT_EQ(runtime_uses("CUtensorMap m;\n").size(), 1u);
  EXPECT_EQ(runtime_uses("#include <cuda_runtime_api.h>\n").size(), 1u);
  EXPECT_EQ(runtime_uses("#include \"cuda/runtime.hpp\"\n").size(), 1u);
  EXPECT_EQ(runtime_uses("a();\nb(); (void)cudaGetLastError();\n"), std::vector<std::string>{"2: b(); (void)cudaGetLastError();"});
  EXPECT_TRUE(runtime_uses("auto d = make_cuda_device(&why);\n").empty());
  EXPECT_TRUE(runtime_uses("cuda::measure_copy_gbps(n); gpu::device_malloc(n);\n").empty());
  EXPECT_TRUE(runtime_uses("x(); // cudaFree is the shim's job\n/* cudaMemcpy\n cudaMalloc */ y();\n").empty());
  EXPECT_TRUE(runtime_uses("#include \"cuda/peaks.hpp\"\nstd::string s = \"no CUDA device\";\n").empty());
}

TEST(Backends, HarnessHasNoRuntimeCalls) {
  // The harness reaches a GPU only through the shim, so that one harness serves every GPU backend.
  const fs::path src = fs::path(ATTNBENCH_SOURCE_DIR) / "src";
  int scanned = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    std::ifstream f(entry.path());
    std::stringstream text;
    text << f.rdbuf();
    ++scanned;
    for (const auto& hit : runtime_uses(text.str()))
      ADD_FAILURE() << fs::relative(entry.path(), src).string() << ":" << hit;
  }
  EXPECT_GT(scanned, 10) << "no harness sources found under " << src;
  EXPECT_TRUE(fs::exists(src / "device" / "device_gpu.cpp")) << "the GPU device moved: point this check at it";
}
