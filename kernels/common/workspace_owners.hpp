// Which plan ran last on each workspace, process-wide. A plan that keeps state in its workspace between calls
// (cuda.unified: the split merge's arrival counters, the L2 walk's table) writes it again when another plan has run
// on any byte of its workspace since its own last call, so one buffer may serve several plans in turn, at the same
// or at overlapping offsets. Writes by anything but a plan are not seen.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attnbench {

// A process-unique plan id, never reused (0 is nobody's).
uint64_t new_plan_id();

// Whether `plan` ran last on the `bytes` from `workspace`, and no plan ran on any of them since.
bool workspace_held_by(const void* workspace, std::size_t bytes, uint64_t plan);

// A call of `plan` on the `bytes` from `workspace` was enqueued: whatever any plan kept on a byte of them is no
// longer trusted. state_known: what the plan keeps there is written once the call runs; false when a capture
// recorded that write (it happens at a replay, not now), so the next call of any plan writes its own again.
void record_workspace_call(const void* workspace, std::size_t bytes, uint64_t plan, bool state_known);

// Forgets `plan` (its destructor), so the record holds live plans only.
void forget_workspace_plan(uint64_t plan);

}  // namespace attnbench
