// Helpers of the gated block's host tests: a small geometry, plain options, knobs without the environment, and
// the field a GatedDecline names.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "attnbench/gated_block.hpp"

namespace attnbench::gatedtest {

inline GatedDims small_dims(int seqlen = 100, int batch = 1, DType dt = DType::bf16) {
  GatedDims d;
  d.batch = batch;
  d.seqlen = seqlen;
  d.d_model = 256;
  d.h_q = 4;
  d.h_kv = 2;
  d.d_head = 64;
  d.rope_dim = 16;
  d.dtype = dt;
  return d;
}

inline GatedOptions plain_options(bool causal = true) {
  GatedOptions o;
  o.is_causal = causal;
  o.fuse_gate = false;
  return o;
}

inline KnobValues knobs(std::map<std::string, std::string> over = {}) { return KnobValues::resolve(over, false); }

template <class F>
std::string decline_field(F&& f) {
  try {
    f();
  } catch (const GatedDecline& e) {
    EXPECT_NE(std::string(e.what()).find("field '" + e.field() + "': "), std::string::npos) << e.what();
    EXPECT_FALSE(e.reason().empty());
    return e.field();
  }
  return "<no decline>";
}

}  // namespace attnbench::gatedtest
