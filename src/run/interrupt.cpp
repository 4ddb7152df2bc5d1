#include "run/interrupt.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace attnbench {

namespace {
std::atomic<int> g_signal{0};
int g_pipe[2] = {-1, -1};
struct sigaction g_old_int, g_old_term, g_old_pipe;

extern "C" void on_signal(int sig) {
  const int saved = errno;
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) {
    if (sig == SIGPIPE) {  // every later write to the closed pipe signals again: the first one stands
      errno = saved;
      return;
    }
    // The second signal: the default action, at once.
    signal(sig, SIG_DFL);
    raise(sig);
  }
  if (g_pipe[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = write(g_pipe[1], &c, 1);
  }
  errno = saved;
}
}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal = 0;
  if (pipe(g_pipe) == 0) {
    for (int fd : g_pipe) {
      fcntl(fd, F_SETFD, FD_CLOEXEC);
      fcntl(fd, F_SETFL, O_NONBLOCK);
    }
  } else {
    g_pipe[0] = g_pipe[1] = -1;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGPIPE, &sa, &g_old_pipe);  // stdout's reader gone (run ... | head): stop as interrupted, exit 141
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGPIPE, &g_old_pipe, nullptr);
  for (int& fd : g_pipe) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

void check_interrupt() {
  if (const int s = interrupt_signal()) throw RunInterrupted{s};
}

int interrupt_fd() { return g_pipe[0]; }

void request_interrupt(int signal) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signal);
  if (g_pipe[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = write(g_pipe[1], &c, 1);
  }
}

void clear_interrupt() { g_signal = 0; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGPIPE: return "SIGPIPE";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGXCPU: return "SIGXCPU";
    case SIGSYS: return "SIGSYS";
  }
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "signal %d", sig);
  return buf;
}

}  // namespace attnbench
