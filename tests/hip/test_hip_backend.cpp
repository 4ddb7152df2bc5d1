// The HIP backend as built (HIP builds only): the compiler's gfx942 resource report of every hip.unified kernel
// against the budget model (kernels/hip/geometry.hpp), and the runtime shim, the kernel and the CLI on a machine
// without an AMD GPU (skipped where one is visible).
#include <cxxabi.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "attnbench/backends.hpp"
#include "attnbench/gpu_runtime.hpp"
#include "cli_helpers.hpp"
#include "hip/geometry.hpp"

namespace attnbench {
namespace {

// One kernel's resource report: "VGPRs" -> "219", "LDS Size [bytes/block]" -> "53248", ...
using Report = std::map<std::string, std::string>;

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 ? d.get() : name;
}

// The reports of every kernel in the remarks files of -Rpass-analysis=kernel-resource-usage, by demangled name.
std::map<std::string, Report> read_reports(const std::string& files) {
  std::map<std::string, Report> out;
  std::stringstream list(files);
  std::string file;
  while (std::getline(list, file, ';')) {
    std::ifstream f(file);
    EXPECT_TRUE(f) << file;
    std::string line, current;
    const std::regex item(R"(remark:\s+(.*?):\s+(\S+)\s+\[-Rpass-analysis)");
    std::smatch m;
    while (std::getline(f, line)) {
      if (!std::regex_search(line, m, item)) continue;
      if (m[1] == "Function Name") current = demangle(m[2]);
      else if (!current.empty()) out[current][m[1]] = m[2];
    }
  }
  return out;
}

struct Budget {
  int lds = 0, live_registers = 0;
};

// The model's LDS and register floor for a kernel's demangled name; false for a name that is not a hip.unified kernel.
bool budget_of(const std::string& name, std::string* regime, Budget* b) {
  static const std::regex kernel(R"(attnbench::hip::(\w+)_kernel<\(attnbench::DType\)\d, (\d+)(?:, (\d+))?>)");
  std::smatch m;
  if (!std::regex_search(name, m, kernel)) return false;
  *regime = m[1];
  const int d = std::stoi(m[2]);
  if (*regime == "flash") *b = {hip::flash_lds_bytes(d, std::stoi(m[3])), hip::flash_live_registers(d)};
  else if (*regime == "narrow") *b = {hip::narrow_lds_bytes(d, hip::narrow_waves(d)), hip::narrow_live_registers(d)};
  else if (*regime == "decode") *b = {hip::decode_lds_bytes(d), hip::decode_live_registers(d)};
  else *b = {0, 0};  // combine
  return true;
}

TEST(HipResources, EveryKernelMatchesTheBudgetModel) {
  const std::map<std::string, Report> reports = read_reports(ATTNBENCH_HIP_REMARKS);
  std::map<std::string, int> per_regime;
  for (const auto& [name, r] : reports) {
    std::string regime;
    Budget b;
    if (!budget_of(name, &regime, &b)) continue;
    ++per_regime[regime];
    const int regs = std::stoi(r.at("VGPRs")) + std::stoi(r.at("AGPRs"));
    std::printf("%-70s VGPR %3s AGPR %3s LDS %6s (model %6d) occupancy %s\n", name.substr(0, 70).c_str(),
                r.at("VGPRs").c_str(), r.at("AGPRs").c_str(), r.at("LDS Size [bytes/block]").c_str(), b.lds,
                r.at("Occupancy [waves/SIMD]").c_str());
    EXPECT_EQ(std::stoi(r.at("LDS Size [bytes/block]")), b.lds) << name;
    EXPECT_LE(b.lds, hip::kLdsLimit) << name;
    EXPECT_GE(regs, b.live_registers) << name << ": fewer registers than the loop keeps live";
    EXPECT_LE(regs, hip::kRegisterBudget) << name;
    EXPECT_EQ(r.at("ScratchSize [bytes/lane]"), "0") << name;
    EXPECT_EQ(r.at("VGPRs Spill"), "0") << name;
    EXPECT_EQ(r.at("SGPRs Spill"), "0") << name;
    EXPECT_GE(std::stoi(r.at("Occupancy [waves/SIMD]")), 1) << name;
  }
  EXPECT_EQ(per_regime, (std::map<std::string, int>{{"combine", 4}, {"decode", 4}, {"flash", 6}, {"narrow", 4}}));
}

bool no_device() { return gpu::device_count() == 0; }

TEST(HipRuntime, NoDeviceIsAnAnswerNotACrash) {
  if (!no_device()) GTEST_SKIP() << "a HIP device is visible";
  EXPECT_STREQ(gpu::runtime_name(), "HIP");
  EXPECT_EQ(gpu::device_count(), 0);
  EXPECT_EQ(gpu::device_count(), 0);  // the failed query leaves no sticky error behind
  try {
    gpu::device_malloc(1024);
    ADD_FAILURE() << "device_malloc without a device returned";
  } catch (const gpu::Error& e) {
    EXPECT_NE(std::string(e.what()).find("hipMalloc"), std::string::npos) << e.what();
  }
}

TEST(HipKernel, PlansWithoutADevice) {
  const auto k = make_hip_unified();
  EXPECT_EQ(k->name(), "hip.unified");
  EXPECT_EQ(k->backend(), Backend::hip);
  AttentionProblem p;
  p.q_lens = p.kv_lens = {512};
  p.heads = 32;
  p.kv_heads = 8;
  p.head_size = 128;
  p.types = AttentionTypes::all(DType::f16);
  const KnobValues knobs = KnobValues::resolve({}, false);
  ASSERT_TRUE(k->supports(p, knobs).ok) << k->supports(p, knobs).reason;
  const auto plan = k->plan(p, knobs);
  EXPECT_NE(plan->summary.find("2d flash wide4"), std::string::npos) << plan->summary;
  EXPECT_TRUE(plan->graph_replay);
  p.head_size = 256;
  EXPECT_EQ(k->supports(p, knobs).reason, "head_size 256 not in {64, 128} (hip.unified)");
}

TEST(HipCli, KernelsListedAndDeclinedWithoutADevice) {
  if (!no_device()) GTEST_SKIP() << "a HIP device is visible";
  const std::string out = testcli::tmp_path("hip_rows.json");
  const testcli::Result r = testcli::run_cli("run --group decode --backend hip --no-progress -o " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = testcli::read_json(out);
  ASSERT_FALSE(j["rows"].empty());
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["kernel"], "hip.unified") << row.dump();
    EXPECT_EQ(row["status"], "declined") << row.dump();
    EXPECT_EQ(row["reason"], "no HIP device") << row.dump();
  }
  const testcli::Result info = testcli::run_cli("info --no-measure");
  EXPECT_NE(info.output.find("hip: unavailable (no HIP device)"), std::string::npos) << info.output;
  const testcli::Result list = testcli::run_cli("list --kernels");
  EXPECT_NE(list.output.find("hip.unified"), std::string::npos) << list.output;
}

}  // namespace
}  // namespace attnbench
