// cudnn.sdpa's graphs: cuDNN's SDPA node on a problem and a layout, built through the cuDNN frontend with the plans
// a PlanChoice needs and cached by key (graph.cpp); the variant pack of one execution; autotune's timing of the
// candidates (autotune.cpp).
#pragma once
#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "attnbench/attention.hpp"
#include "cudnn/plan_key.hpp"

namespace attnbench::cudnn {

namespace fe = cudnn_frontend;
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kSeqLenQ, kSeqLenKv, kTableK, kTableV, kQOffsets, kOOffsets, kSinks,
  kFp8First  // the FP8 graph's scalars, Fp8Scalars' fields in order (derived.hpp): kFp8First + field index
};

// A cuDNN handle, created on the current device.
struct Handle {
  cudnnHandle_t h = nullptr;
  Handle() {
    const cudnnStatus_t s = cudnnCreate(&h);
    if (s != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string("cudnnCreate: ") + cudnnGetErrorString(s));
  }
  ~Handle() {
    if (h) cudnnDestroy(h);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

// Built graphs and cuDNN's refusals by key (a declined problem is asked once), the `capacity` most recent kept.
template <class Built>
class GraphLru {
 public:
  // The graph built on the cache's handle, or nullptr and cuDNN's refusal in *why.
  using Build = std::function<std::shared_ptr<const Built>(cudnnHandle_t, std::string* why)>;

  explicit GraphLru(std::size_t capacity) : capacity_(capacity) {}

  // The graph of key, built on a miss under the lock; *why: "" or cuDNN's refusal, or a throw's message.
  std::shared_ptr<const Built> get(const std::string& key, const Build& build, std::string* why) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key != key) continue;
      entries_.splice(entries_.begin(), entries_, it);
      *why = it->why;
      return it->graph;
    }
    Entry e{key, nullptr, ""};
    try {
      if (!handle_) handle_ = new Handle();  // lazily, on the device current at the first build
      e.graph = build(handle_->h, &e.why);
    } catch (const std::exception& ex) {
      *why = std::string("cuDNN: ") + ex.what();  // not kept: a failure outside cuDNN's answer
      return nullptr;
    }
    entries_.push_front(e);
    if (entries_.size() > capacity_) entries_.pop_back();
    *why = e.why;
    return e.graph;
  }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Built> graph;  // nullptr: cuDNN refused, `why` says so
    std::string why;
  };
  const std::size_t capacity_;
  std::mutex mu_;
  std::list<Entry> entries_;
  Handle* handle_ = nullptr;  // never destroyed (callers leak the cache too): it outlives the kernels at exit
};

// One built plan of a graph: its place in the heuristics' list, its engine, cuDNN's workspace bytes.
struct Candidate {
  int64_t index = 0;
  std::string engine;
  std::size_t workspace = 0;
};

// Autotune's pick: a position in the graph's candidates, and every candidate's time as the plan summary says it.
struct Tuning {
  std::size_t chosen = 0;
  std::string text;
};

// One built graph: the SDPA of a problem's dims on one layout with its plans, shared by every plan with that key.
struct BuiltGraph {
  fe::graph::Graph graph;
  Layout layout;
  bool ragged = false;
  bool fp8 = false;            // 8-bit Q/K/V (fp8_graph): an e4m3 O in the workspace, the scalars as tensors
  std::string implementation;  // the frontend's SDPA node for these attributes: composite or unified
  std::string fallback;        // under auto: why the frontend's pick was not kept ("" when it was)
  PlanChoice choice;
  std::vector<Candidate> candidates;  // first and N: the one plan; autotune: each engine that built, once
  mutable std::mutex mu;              // one execute() on the graph at a time
  mutable std::mutex tune_mu;
  mutable std::optional<Tuning> tuning;  // autotune's, timed by the first plan() that needs it
};

// The graph of (p, l) under the choice, from the process-wide cache (cuDNN's refusals kept too, so a declined
// problem is asked once), or nullptr and why not.
std::shared_ptr<const BuiltGraph> cached_graph(const AttentionProblem& p, const Layout& l, const PlanChoice& c,
                                               std::string* why);

// The device pointers of one execution, as cuDNN's variant pack by uid.
struct Pointers {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* o = nullptr;
  int32_t* seq_len_q = nullptr;
  const int32_t *seq_len_kv = nullptr, *table = nullptr;
  int32_t *q_offsets = nullptr, *o_offsets = nullptr;  // ragged only
  const float* sinks = nullptr;                         // [heads], with sinks only
  float* fp8 = nullptr;                                 // [kFp8Scalars], FP8 graphs only
};
std::unordered_map<int64_t, void*> variant_pack(const Pointers& x, bool ragged);
void set_stream(cudnnHandle_t h, cudaStream_t s);

// Autotune's pick among g's candidates for p's shape: timed by the first plan() that needs it, then kept.
const Tuning& tuned(const BuiltGraph& g, const AttentionProblem& p, cudnnHandle_t h);

}  // namespace attnbench::cudnn
