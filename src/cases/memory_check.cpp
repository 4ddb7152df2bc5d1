#include "cases/memory_check.hpp"

#include <cstdio>

namespace attnbench {

namespace {
// Below this the estimate is not worth a look at /proc/meminfo or the device: small cases always run.
constexpr double kAlwaysFits = 64.0 * (1 << 20);

// The split-KV paths (cpu.unified and cuda.unified): decode, or at most this many packed query rows per sequence.
constexpr long long kSplitPathRows = 64;
constexpr double kMaxSplits = 128;
}  // namespace

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string allocation_failure_reason(const std::string& what) {
  // The runtime shim's gpu::Error ends with the runtime's error string in parentheses: "(out of memory)".
  if (what.find("(out of memory)") != std::string::npos && what.rfind("out of memory", 0) != 0)
    return "out of memory: a device allocation failed after the memory estimate passed: " + what;
  return what;
}

double attention_workspace_bound(const AttentionProblem& p) {
  const long long packed_rows = static_cast<long long>(p.max_seqlen_q()) * p.group_size();
  if (p.max_seqlen_q() != 1 && packed_rows > kSplitPathRows) {
    // The wide kernel's L2 walk: an offset per CTA (fewer than 1024), then one entry per q-tile of 64+ rows per head.
    const double units = static_cast<double>(p.num_seqs()) * p.heads * (p.max_seqlen_q() / 64 + 1);
    return (1024 + 1 + units) * sizeof(int32_t);
  }
  const double rows = static_cast<double>(p.total_q()) * p.heads;
  const double partials = kMaxSplits * rows * (p.head_size + 2) * sizeof(float);  // O, max and sum per split
  const double counters = static_cast<double>(p.num_seqs()) * p.heads * p.max_seqlen_q() * sizeof(int32_t);
  return partials + counters;
}

Support memory_decision(const MemoryNeed& need, std::optional<double> host_available,
                        std::optional<double> device_free, bool device_is_host) {
  const auto no = [](double needs, const char* where, double has) {
    return Support::no("needs " + format_bytes(needs) + " of " + where + ", " + format_bytes(has) + " available");
  };
  if (device_is_host) {
    const double total = need.host_bytes + need.device_bytes;
    if (host_available && total > *host_available) return no(total, "host memory", *host_available);
    return Support::yes();
  }
  if (host_available && need.host_bytes > *host_available) return no(need.host_bytes, "host memory", *host_available);
  if (device_free && need.device_bytes > *device_free) return no(need.device_bytes, "device memory", *device_free);
  return Support::yes();
}

Support memory_fits(const OpCase& c, const KernelEntry& k, const Device& dev, const CaseSettings& s) {
  const MemoryNeed need = c.memory_need(k, s);
  if (need.host_bytes + need.device_bytes < kAlwaysFits) return Support::yes();
  const bool device_is_host = dev.backend() == Backend::cpu;
  return memory_decision(need, host_available_bytes(), device_is_host ? std::nullopt : dev.free_memory_bytes(),
                         device_is_host);
}

}  // namespace attnbench
