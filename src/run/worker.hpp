// A worker process for one piece of a run (a case, or one kernel of a case): forked from the run, so it shares
// the run's state as it was, and is given a device context of its own (the run's process never touches a GPU
// while it forks workers: a CUDA context does not survive fork). Whatever the worker does to itself (a signal,
// a sticky device error, an abort, a hang) ends only the worker: the run sees how it ended, and which kernel it
// was running at the time from the marker the worker keeps in memory both share.
#pragma once
#include <atomic>
#include <functional>
#include <string>

namespace attnbench {

// What a worker was doing, in memory shared with the run (written by the worker, read after it ended).
struct WorkerMarker {
  std::atomic<int> slot{-1};  // the case's kernel slot being run; -1: none (shared work, or between kernels)
  std::atomic<int> stage{0};  // WorkerStage
  char note[1024] = {0};      // a device fault's message, written before the worker exits with kDeviceFaultExit
};

enum WorkerStage : int { kStageStart = 0, kStagePrepare, kStageBind, kStageGate, kStageTime, kStageRelease, kStageDone };
const char* stage_name(int stage);

// The exit status of a worker whose device context was lost to a kernel's fault (the marker's note says which).
inline constexpr int kDeviceFaultExit = 86;

struct WorkerOutcome {
  bool finished = false;  // exited 0 with its whole message
  std::string message;    // what the worker wrote (its result), when finished
  int exit_code = -1;     // when it exited
  int signal = 0;         // when a signal ended it (SIGKILL for a timeout)
  bool timed_out = false;
  int interrupted = 0;    // the run's interrupt signal, when one came while the worker ran (it was killed)
  int slot = -1, stage = 0;
  std::string note;
  // The row's reason: "killed by SIGSEGV", "timed out after 2 s", the device's error, "exited with status 3".
  std::string cause(double timeout_s) const;
};

// Forks a worker that runs `job` (its return value is the message) and waits for it: at most timeout_s (then
// SIGKILL), and no longer than an interrupt of the run (interrupt.hpp), which also kills it. The worker ignores
// SIGINT and SIGTERM (the run decides its fate) and dies with the run.
WorkerOutcome run_in_worker(const std::function<std::string(WorkerMarker&)>& job, double timeout_s);

// Whether this process is a worker (so that it does not fork workers itself).
bool in_worker();

}  // namespace attnbench
