#include "run/worker.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <new>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "run/interrupt.hpp"

namespace attnbench {

namespace {
bool g_in_worker = false;

void write_all(int fd, const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Threads of this process beside the caller. OpenMP's pool is among them once a parallel region ran, and it does
// not survive fork: a worker entering a parallel region would wait for it forever.
int other_threads() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return 0;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;
}

[[noreturn]] void worker_main(int fd, const std::function<std::string(WorkerMarker&)>& job, WorkerMarker& m,
                              pid_t run, bool threads_left_behind) {
  g_in_worker = true;
  if (threads_left_behind) omp_set_num_threads(1);  // no pool to wait for (the CPU plan's summary says threads=1)
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != run) _exit(1);  // the run ended before the line above: nobody waits for this worker
  clear_interrupt();
  std::string msg;
  try {
    msg = job(m);
  } catch (const UsageError& e) {
    msg = nlohmann::json{{"usage_error", e.what()}}.dump();
  } catch (const std::exception& e) {
    msg = nlohmann::json{{"internal_error", e.what()}}.dump();
  } catch (const RunInterrupted&) {
    msg = nlohmann::json{{"interrupted", true}}.dump();
  }
  std::cout.flush();
  std::cerr.flush();
  write_all(fd, msg);
  ::close(fd);
  _exit(0);
}
}  // namespace

bool in_worker() { return g_in_worker; }

const char* stage_name(int stage) {
  switch (stage) {
    case kStagePrepare: return "while the case's inputs and reference were made";
    case kStageBind: return "while its plan and buffers were made";
    case kStageGate: return "in its first call or its gate";
    case kStageTime: return "while it was timed";
    case kStageRelease: return "while its buffers were released";
    case kStageDone: return "finished";
  }
  return "starting";
}

std::string WorkerOutcome::cause(double timeout_s) const {
  if (timed_out) return "timed out after " + seconds_text(timeout_s) + " s (the worker was killed)";
  if (signal == SIGKILL)  // not ours (a timeout says so above): most often the system's out-of-memory killer
    return "killed by SIGKILL (from outside the run: the system's out-of-memory killer sends it)";
  if (signal) return std::string("killed by ") + signal_name(signal) + " (" + strsignal(signal) + ")";
  if (exit_code == kDeviceFaultExit && note[0]) return "device fault: " + note;
  if (exit_code == 0) return "the worker ended without its result";
  return "the worker exited with status " + std::to_string(exit_code);
}

WorkerOutcome run_in_worker(const std::function<std::string(WorkerMarker&)>& job, double timeout_s) {
  void* shared = mmap(nullptr, sizeof(WorkerMarker), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::runtime_error(std::string("worker: mmap failed: ") + std::strerror(errno));
  auto* marker = new (shared) WorkerMarker();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    munmap(shared, sizeof(WorkerMarker));
    throw std::runtime_error(std::string("worker: pipe failed: ") + std::strerror(errno));
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t run = getpid();
  const bool threaded = other_threads() > 0;
  if (threaded) {
    static std::once_flag said;
    std::call_once(said, [] {
      std::cerr << "attnbench: this process had other threads (such as OpenMP's, which fork does not copy) before "
                   "its first worker; workers run OpenMP on one thread\n";
    });
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    munmap(shared, sizeof(WorkerMarker));
    throw std::runtime_error(std::string("worker: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    worker_main(fds[1], job, *marker, run, threaded);
  }
  ::close(fds[1]);
  WorkerOutcome out;
  std::string msg;
  const auto t0 = std::chrono::steady_clock::now();
  bool eof = false;
  char buf[1 << 16];
  while (!eof) {
    const double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {interrupt_fd(), POLLIN, 0}};
    const int nfds = interrupt_fd() >= 0 ? 2 : 1;
    const int ms = static_cast<int>(std::min(left * 1000.0 + 1, 3600e3));
    const int r = poll(p, nfds, ms);
    if (r < 0 && errno != EINTR) break;
    if (interrupt_signal()) {
      out.interrupted = interrupt_signal();
      break;
    }
    if (r > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n > 0) msg.append(buf, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR) eof = true;
    }
  }
  if (!eof) kill(pid, SIGKILL);
  ::close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !out.timed_out && !out.interrupted) out.signal = WTERMSIG(status);
  out.slot = marker->slot.load();
  out.stage = marker->stage.load();
  marker->note[sizeof marker->note - 1] = 0;
  out.note = marker->note;
  marker->~WorkerMarker();
  munmap(shared, sizeof(WorkerMarker));
  out.finished = eof && out.exit_code == 0 && !out.timed_out && !out.interrupted && !msg.empty();
  if (out.finished) out.message = std::move(msg);
  return out;
}

}  // namespace attnbench
