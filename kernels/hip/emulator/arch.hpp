// The CPU emulator of the hip.unified kernels: the same kernel bodies (kernels/hip/device) compiled by the host
// compiler against EmuArch, the emulated counterpart of DeviceArch. A workgroup's threads run as fibers in one OS
// thread; every cross-lane operation (shuffle, MFMA atom, wave-local sync) is a rendezvous of the 64 lanes of the
// wave and the barrier one of the whole workgroup, so the kernel's per-lane code runs as written. The MFMA atoms
// build their A, B and accumulator matrices from the hardware lane layouts (hip/device/mfma_layout.hpp) and
// multiply in fp32; nothing here knows a kernel.
#pragma once
#include <cmath>
#include <cstddef>
#include <functional>

#include "attnbench/dtype.hpp"
#include "hip/device/common.hpp"

namespace attnbench::hip::emu {

struct Dim3 {
  int x = 1, y = 1, z = 1;
};

template <int N>
struct Floats {
  float v[N] = {};
  float& operator[](int i) { return v[i]; }
  const float& operator[](int i) const { return v[i]; }
};

enum class Atom { mfma32x32x8, mfma16x16x16 };

class Workgroup;

class EmuArch {
 public:
  using f32x4 = Floats<4>;
  using f32x16 = Floats<16>;

  EmuArch(Workgroup* g, int tid) : g_(g), tid_(tid) {}
  int thread() const { return tid_; }
  int block_x() const;
  int block_y() const;
  int block_z() const;
  void barrier() const;
  void wave_sync() const;
  float shfl_xor(float v, int mask) const;
  float exp2(float x) const { return std::exp2(x); }
  float log2(float x) const { return std::log2(x); }
  template <DType DT>
  f32x16 mfma32(Frag a, Frag b, const f32x16& c) const {
    f32x16 d;
    atom(Atom::mfma32x32x8, DT, a, b, c.v, d.v);
    return d;
  }
  template <DType DT>
  f32x4 mfma16(Frag a, Frag b, const f32x4& c) const {
    f32x4 d;
    atom(Atom::mfma16x16x16, DT, a, b, c.v, d.v);
    return d;
  }

 private:
  void atom(Atom kind, DType dt, Frag a, Frag b, const float* c, float* d) const;
  Workgroup* g_;
  int tid_;
};

// A kernel body for one thread: its arch and the workgroup's LDS.
using Body = std::function<void(const EmuArch&, unsigned char* lds)>;

// Runs `body` for every thread of every workgroup of `grid` (workgroups one after another). LDS starts as 0xFF bytes
// (NaN in fp16, bf16 and fp32), so a read of a byte no thread wrote yet shows in the output; threads run until they
// block, in alternating order from round to round. Throws
// std::runtime_error when the lanes of a wave meet at different operations (divergence at a shuffle or an atom),
// when threads wait at a barrier that threads which returned never reach, or when LDS is written past lds_bytes.
void launch(Dim3 grid, int threads, std::size_t lds_bytes, const Body& body);

// The atom the emulator runs: D = A B + C over fp32 products of the 16-bit operands, matrices gathered from the
// 64 lanes' operands by the hardware layout (exposed for the layout tests).
void run_atom(Atom kind, DType dt, const Frag* a, const Frag* b, const float* const* c, float* const* d);

}  // namespace attnbench::hip::emu
