// SIGINT, SIGTERM and SIGPIPE during run/sweep: the first one asks the run to stop at the next point where it can
// (between cases, between kernels, between timing samples; at once while a worker process runs a case), so that
// what is done is written as an interrupted results file and the journal is kept for --resume (exit 128 + the
// signal). A second SIGINT or SIGTERM ends the process the default way (the journal, flushed row by row, still holds
// every finished case); SIGPIPE, which every write to a closed pipe raises again, never escalates.
#pragma once

namespace attnbench {

// Thrown at the check points once a signal came (not a std::exception, so no per-kernel handler turns it into an
// error row); the runner catches it and finishes the file with what is done.
struct RunInterrupted {
  int signal = 0;
};

// Installs the handlers for its lifetime (the previous ones come back after).
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The signal that asked the run to stop (SIGINT, SIGTERM, SIGPIPE), 0 while none did.
int interrupt_signal();
// Throws RunInterrupted when a signal came.
void check_interrupt();
// A descriptor that turns readable when a signal comes (for poll), -1 without a guard.
int interrupt_fd();
// Requests a stop as a signal would (tests).
void request_interrupt(int signal);
// Forgets a request (a process that serves as a worker starts clean).
void clear_interrupt();

// "SIGINT", "SIGSEGV", ..., or "signal N".
const char* signal_name(int signal);

}  // namespace attnbench
