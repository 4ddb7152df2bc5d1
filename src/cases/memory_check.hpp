// The memory check before a case allocates: its estimate (OpCase::memory_need) against the host's available
// memory and the device's free memory, so that a shape too large for the machine is a declined row that says
// how much it needs, not a std::bad_alloc halfway through building its inputs.
#pragma once
#include <optional>
#include <string>

#include "attnbench/attention.hpp"
#include "cases/op_case.hpp"

namespace attnbench {

// Declines (naming both sizes) when kernel k on this case would not fit; yes when it fits or nothing is known.
Support memory_fits(const OpCase& c, const KernelEntry& k, const Device& dev, const CaseSettings& s);

// The decision alone: host_bytes against host_available and device_bytes against device_free (nullopt: unknown,
// not checked); device_is_host adds both needs up against host_available (the CPU backend).
Support memory_decision(const MemoryNeed& need, std::optional<double> host_available,
                        std::optional<double> device_free, bool device_is_host);

// An upper bound of an attention plan's workspace on any backend: split-KV partial results, which only problems
// with few query rows per sequence take (decode, short q against a long KV), at most 128 splits; else the wide
// kernel's L2 walk table.
double attention_workspace_bound(const AttentionProblem& p);

// An error row's reason for a failed allocation the estimate let through: what(), prefixed "out of memory: " when it
// is a runtime error whose string is "out of memory" (a device allocation that failed); else unchanged.
std::string allocation_failure_reason(const std::string& what);

// "12.3 GiB", "512.0 MiB", "80 B".
std::string format_bytes(double bytes);

}  // namespace attnbench
