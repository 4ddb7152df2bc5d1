#include <ucontext.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hip/device/mfma_layout.hpp"
#include "hip/emulator/arch.hpp"
#include "hip/geometry.hpp"

namespace attnbench::hip::emu {
namespace {

enum class Op { run, barrier, wave_sync, shfl, atom, done };
const char* op_name(Op op) {
  switch (op) {
    case Op::run: return "running";
    case Op::barrier: return "barrier";
    case Op::wave_sync: return "wave_sync";
    case Op::shfl: return "shfl_xor";
    case Op::atom: return "mfma";
    case Op::done: return "returned";
  }
  return "?";
}

// What a lane brings to a rendezvous and what it takes away.
struct Request {
  Op op = Op::run;
  Atom atom = Atom::mfma32x32x8;
  DType dtype = DType::f16;
  int mask = 0;
  Frag a = 0, b = 0;
  float c[16] = {};
  float v = 0.f;
};
struct Reply {
  float d[16] = {};
  float v = 0.f;
};

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr std::size_t kGuardBytes = 256;
thread_local Workgroup* t_current = nullptr;

template <class Layout>
void gather_atom(DType dt, const Frag* a, const Frag* b, const float* const* c, float* const* d) {
  float am[Layout::M][Layout::K], bm[Layout::K][Layout::N], cm[Layout::M][Layout::N];
  const auto half = [dt](Frag f, int i) {
    return dt == DType::f16 ? half_to_float<DType::f16>(frag_half(f, i)) : half_to_float<DType::bf16>(frag_half(f, i));
  };
  for (int l = 0; l < kWaveSize; ++l) {
    for (int i = 0; i < Layout::kOperand; ++i) {
      const Coord ea = Layout::a(l, i), eb = Layout::b(l, i);
      am[ea.row][ea.col] = half(a[l], i);
      bm[eb.row][eb.col] = half(b[l], i);
    }
    for (int r = 0; r < Layout::kAcc; ++r) {
      const Coord e = Layout::acc(l, r);
      cm[e.row][e.col] = c[l][r];
    }
  }
  for (int l = 0; l < kWaveSize; ++l)
    for (int r = 0; r < Layout::kAcc; ++r) {
      const Coord e = Layout::acc(l, r);
      float s = cm[e.row][e.col];
      for (int k = 0; k < Layout::K; ++k) s += am[e.row][k] * bm[k][e.col];
      d[l][r] = s;
    }
}

}  // namespace

void run_atom(Atom kind, DType dt, const Frag* a, const Frag* b, const float* const* c, float* const* d) {
  if (kind == Atom::mfma32x32x8)
    gather_atom<Mfma32x32x8>(dt, a, b, c, d);
  else
    gather_atom<Mfma16x16x16>(dt, a, b, c, d);
}

// One workgroup's threads as fibers, resumed round by round: each runs until it reaches a rendezvous or returns;
// then every wave whose 64 lanes wait at the same operation performs it, and a barrier opens once every thread
// waits at it.
class Workgroup {
 public:
  Workgroup(Dim3 grid, int threads, std::size_t lds_bytes, const Body& body)
      : grid_(grid), threads_(threads), lds_bytes_(lds_bytes), body_(body), fibers_(threads),
        lds_(lds_bytes + kGuardBytes) {
    if (threads <= 0 || threads % kWaveSize != 0)
      throw std::invalid_argument("emulator: " + std::to_string(threads) + " threads is not a multiple of 64");
    for (Fiber& f : fibers_) f.stack.reset(new char[kStackBytes]);
  }

  void run(Dim3 block) {
    block_ = block;
    std::memset(lds_.data(), 0xFF, lds_.size());
    for (int t = 0; t < threads_; ++t) start(t);
    // Rounds alternate their order, so a read of LDS that another wave writes without a barrier between sees the
    // poison in one direction or the other.
    for (bool forward = true;; forward = !forward) {
      for (int i = 0; i < threads_; ++i) {
        const int t = forward ? i : threads_ - 1 - i;
        if (fibers_[t].req.op == Op::run) resume(t);
      }
      if (all_done()) break;
      if (!wave_ops() && !open_barrier()) throw std::runtime_error(where() + ": no thread can go on (deadlock)");
    }
    for (std::size_t i = lds_bytes_; i < lds_.size(); ++i)
      if (lds_[i] != 0xFF)
        throw std::runtime_error(where() + ": LDS written past its " + std::to_string(lds_bytes_) + " bytes");
  }

  // From a fiber: wait at a rendezvous, return what it gave.
  const Reply& meet(int tid, const Request& r) {
    Fiber& f = fibers_[tid];
    f.req = r;
    swapcontext(&f.ctx, &main_);
    return f.rep;
  }
  Dim3 block() const { return block_; }

 private:
  struct Fiber {
    ucontext_t ctx{};
    std::unique_ptr<char[]> stack;
    Request req;
    Reply rep;
  };

  static void entry(int tid) {
    Workgroup* g = t_current;
    g->body_(EmuArch(g, tid), g->lds_.data());
    g->fibers_[tid].req.op = Op::done;  // uc_link returns to the scheduler
  }

  void start(int t) {
    Fiber& f = fibers_[t];
    f.req = Request{};
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = &main_;
    makecontext(&f.ctx, reinterpret_cast<void (*)()>(&Workgroup::entry), 1, t);
  }

  void resume(int t) {
    t_current = this;
    swapcontext(&main_, &fibers_[t].ctx);
  }

  bool all_done() const {
    for (const Fiber& f : fibers_)
      if (f.req.op != Op::done) return false;
    return true;
  }

  std::string where() const {
    return "emulator: workgroup (" + std::to_string(block_.x) + ", " + std::to_string(block_.y) + ", " +
           std::to_string(block_.z) + ")";
  }

  // Performs every wave operation whose 64 lanes all wait at it; false when none did.
  bool wave_ops() {
    bool any = false;
    for (int w0 = 0; w0 < threads_; w0 += kWaveSize) {
      const Request& r0 = fibers_[w0].req;
      bool wave_op = false;
      for (int l = 0; l < kWaveSize; ++l) {
        const Op op = fibers_[w0 + l].req.op;
        wave_op = wave_op || op == Op::wave_sync || op == Op::shfl || op == Op::atom;
      }
      if (!wave_op) continue;
      for (int l = 0; l < kWaveSize; ++l) {
        const Request& r = fibers_[w0 + l].req;
        if (r.op != r0.op || r.atom != r0.atom || r.dtype != r0.dtype || r.mask != r0.mask)
          throw std::runtime_error(where() + ", wave " + std::to_string(w0 / kWaveSize) + ": lane 0 at " +
                                   op_name(r0.op) + ", lane " + std::to_string(l) + " at " + op_name(r.op) +
                                   " (divergent)");
      }
      if (r0.op == Op::shfl && (r0.mask <= 0 || r0.mask >= kWaveSize))
        throw std::runtime_error(where() + ": shfl_xor mask " + std::to_string(r0.mask) + " outside the wave");
      perform(w0);
      any = true;
    }
    return any;
  }

  void perform(int w0) {
    const Request& r0 = fibers_[w0].req;
    if (r0.op == Op::shfl) {
      for (int l = 0; l < kWaveSize; ++l) fibers_[w0 + l].rep.v = fibers_[w0 + (l ^ r0.mask)].req.v;
    } else if (r0.op == Op::atom) {
      Frag a[kWaveSize], b[kWaveSize];
      const float* c[kWaveSize];
      float* d[kWaveSize];
      for (int l = 0; l < kWaveSize; ++l) {
        Fiber& f = fibers_[w0 + l];
        a[l] = f.req.a, b[l] = f.req.b, c[l] = f.req.c, d[l] = f.rep.d;
      }
      run_atom(r0.atom, r0.dtype, a, b, c, d);
    }
    for (int l = 0; l < kWaveSize; ++l) fibers_[w0 + l].req.op = Op::run;
  }

  bool open_barrier() {
    int waiting = 0, done = 0;
    for (const Fiber& f : fibers_) waiting += f.req.op == Op::barrier, done += f.req.op == Op::done;
    if (waiting == 0) return false;
    if (waiting + done != threads_) return false;
    if (done > 0)
      throw std::runtime_error(where() + ": " + std::to_string(waiting) + " threads wait at a barrier, " +
                               std::to_string(done) + " returned before it");
    for (Fiber& f : fibers_) f.req.op = Op::run;
    return true;
  }

  Dim3 grid_, block_;
  int threads_;
  std::size_t lds_bytes_;
  const Body& body_;
  std::vector<Fiber> fibers_;
  std::vector<unsigned char> lds_;
  ucontext_t main_{};
};

int EmuArch::block_x() const { return g_->block().x; }
int EmuArch::block_y() const { return g_->block().y; }
int EmuArch::block_z() const { return g_->block().z; }

void EmuArch::barrier() const {
  Request r;
  r.op = Op::barrier;
  g_->meet(tid_, r);
}

void EmuArch::wave_sync() const {
  Request r;
  r.op = Op::wave_sync;
  g_->meet(tid_, r);
}

float EmuArch::shfl_xor(float v, int mask) const {
  Request r;
  r.op = Op::shfl;
  r.mask = mask;
  r.v = v;
  return g_->meet(tid_, r).v;
}

void EmuArch::atom(Atom kind, DType dt, Frag a, Frag b, const float* c, float* d) const {
  Request r;
  r.op = Op::atom;
  r.atom = kind;
  r.dtype = dt;
  r.a = a;
  r.b = b;
  const int n = kind == Atom::mfma32x32x8 ? 16 : 4;
  std::memcpy(r.c, c, n * sizeof(float));
  std::memcpy(d, g_->meet(tid_, r).d, n * sizeof(float));
}

void launch(Dim3 grid, int threads, std::size_t lds_bytes, const Body& body) {
  Workgroup g(grid, threads, lds_bytes, body);
  for (int z = 0; z < grid.z; ++z)
    for (int y = 0; y < grid.y; ++y)
      for (int x = 0; x < grid.x; ++x) g.run({x, y, z});
}

}  // namespace attnbench::hip::emu
