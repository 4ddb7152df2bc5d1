/* The C ABI of kernels kept outside the attnbench binary (plugins), version 1. Pure C, usable from C and C++.
 *
 * A plugin is a shared library exporting attnbench_plugin_entry(), which returns a table of kernel descriptors.
 * attnbench loads it with `--plugin PATH` or ATTNBENCH_PLUGINS=PATH[:PATH...]; its kernels join the registry under
 * their own names and are selected, gated, timed and journaled like the built-in ones. A host that links the
 * harness as a library (Python over ctypes, say) may hand it the same table with attnbench_register_plugin().
 *
 * Rules (README, "Bring your own kernel"):
 * - Lifetime: the table, its kernels, their names and descriptions stay valid until the process exits (the
 *   library is never unloaded). Every pointer the harness passes in (problem, params, buffers) is valid only
 *   during the call. A handle from plan() is given to run() any number of times, then to release() once; plans of
 *   the same kernel may be alive at once (a case's kernels are bound side by side, a sweep binds one per setting).
 * - Threading: the harness calls one function at a time, from one thread. A call may use threads of its own but
 *   must not leave any running when it returns: the harness forks worker processes between calls, and fork
 *   copies only the calling thread. attnbench_plugin_entry() runs before any fork and must not touch a GPU.
 * - Stream: run() enqueues all of its device work on `stream` (a cudaStream_t or hipStream_t, as void*) and does
 *   not synchronize, so that graph mode can capture it; it allocates nothing (workspace comes from the plan's
 *   workspace_bytes). CPU kernels get stream NULL and compute before run() returns.
 * - Version: ATTNBENCH_PLUGIN_ABI_VERSION changes with any change to a struct's layout or a function's meaning.
 *   The entry is told the harness's version and returns a table of that version, or NULL when it has none;
 *   abi_version is the first field of attnbench_plugin in every version. A mismatch is a usage error.
 */
#ifndef ATTNBENCH_PLUGIN_H
#define ATTNBENCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNBENCH_PLUGIN_ABI_VERSION 1u
/* The symbol the loader looks up (dlsym). */
#define ATTNBENCH_PLUGIN_ENTRY "attnbench_plugin_entry"

#if defined(_WIN32)
#define ATTNBENCH_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ATTNBENCH_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* Storage types (attnbench::DType), backends and ops, as int32_t fields. */
enum { ATTNBENCH_FP16 = 0, ATTNBENCH_BF16 = 1, ATTNBENCH_E4M3 = 2, ATTNBENCH_E5M2 = 3 };
enum { ATTNBENCH_BACKEND_CPU = 0, ATTNBENCH_BACKEND_CUDA = 1, ATTNBENCH_BACKEND_HIP = 2 };
enum { ATTNBENCH_OP_ATTENTION = 0 };

/* What supports() answers; plan() and run() return ATTNBENCH_OK or anything else for an error. */
enum {
  ATTNBENCH_OK = 0,
  ATTNBENCH_DECLINE = 1,     /* the problem is outside what the kernel implements */
  ATTNBENCH_NO_INSTANCE = 2  /* the kernel would serve it with an instance this build leaves out */
};

/* Attention features (README, "Attention features"). In the problem the lists are in host memory, in the params
 * in the backend's; NULL where the problem has none. */
typedef struct attnbench_features {
  int32_t window_left, window_right; /* sliding window; -1 = unbounded */
  float softcap;                     /* s <- c tanh(s / c) when > 0 */
  const float* alibi_slopes;         /* [heads] */
  const float* sinks;                /* [heads] */
  const float* qq_bias;              /* [qq_bias_len, qq_bias_len] */
  int32_t qq_bias_len;
  float q_scale, k_scale, v_scale;   /* dequantisation scales of 8-bit storage; 1 otherwise */
} attnbench_features;

/* The gated block's fusions (attnbench::AttentionFusion): O * sigmoid(gate), and a Q RMSNorm / RoPE prologue. */
typedef struct attnbench_fusion {
  int32_t output_gate, q_norm, q_rope_dim;
} attnbench_fusion;

/* The problem, as supports() and plan() see it: host memory, valid during the call. Sequence s has q_lens[s]
 * query rows and kv_lens[s] keys. Causal masking is bottom-right aligned unless top_left: key j is visible to
 * row i iff j <= i + (kv_len - q_len) (top_left: j <= i). Query head h reads kv head h / (heads / kv_heads). */
typedef struct attnbench_problem {
  int32_t op; /* ATTNBENCH_OP_ATTENTION */
  int32_t num_seqs;
  const int32_t* q_lens;  /* [num_seqs] */
  const int32_t* kv_lens; /* [num_seqs] */
  int64_t total_q;
  int32_t max_seqlen_q, max_seqlen_k;
  int32_t heads, kv_heads, head_size, block_size;
  int32_t causal, top_left;
  int32_t return_lse; /* the kernel must also write each row's log-sum-exp (params.lse) */
  float scale;        /* the softmax scale, resolved (never 0) */
  int32_t q_dtype, kv_dtype, o_dtype;
  attnbench_features features;
  /* The shape-file name of the first feature set ("window_left", "softcap", ...), NULL for plain attention: a
   * kernel without features declines when it is set. */
  const char* first_feature;
  attnbench_fusion fusion;
} attnbench_problem;

/* The output-gate epilogue's and the Q prologue's inputs (attnbench::AttentionEpilogue, AttentionQPrologue). */
typedef struct attnbench_fusion_params {
  const void* gate;
  int64_t gate_stride_token, gate_stride_head;
  const void* q_norm_weight;
  float q_norm_offset, q_norm_eps;
  const void* rope_cos;
  const void* rope_sin;
  int32_t q_rope_dim;
} attnbench_fusion_params;

/* One call's inputs (attnbench::AttentionParams): pointers in the backend's memory, strides in elements.
 * Q, O: [total_q, heads, head_size]; K, V caches: [num_blocks, block_size, kv_heads, head_size]; sequence s's
 * key j is in block block_table[s * block_table_stride + j / block_size], slot j % block_size. The output is
 * poisoned (NaN) before the first call: every element must be written. */
typedef struct attnbench_params {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  const int32_t* cu_seqlens_q; /* [num_seqs + 1] */
  const int32_t* seqused_k;    /* [num_seqs] */
  const int32_t* block_table;  /* [num_seqs, block_table_stride] */
  void* workspace;             /* the plan's workspace_bytes, owned by the harness */
  float* lse;                  /* with return_lse: lse[q_start * stride_start + i * stride_row + h * stride_head] */
  int64_t lse_stride_start, lse_stride_row, lse_stride_head;
  int64_t q_stride_token, q_stride_head;
  int64_t o_stride_token, o_stride_head;
  int64_t kv_stride_block, kv_stride_token, kv_stride_head;
  int32_t block_table_stride;
  int32_t num_seqs, heads, kv_heads, head_size, block_size;
  int32_t max_seqlen_q, max_seqlen_k;
  int64_t total_q;
  float scale;
  int32_t causal, top_left;
  int32_t q_dtype, kv_dtype, o_dtype;
  attnbench_features features;
  attnbench_fusion_params fusion;
} attnbench_params;

/* What plan() fills in (zeroed before the call). */
typedef struct attnbench_plan {
  void* handle;             /* the kernel's own state, given to run() and release() */
  uint64_t workspace_bytes; /* allocated by the harness in the backend's memory: params.workspace */
  int32_t graph_replay;     /* whether graph replay is recommended for this problem */
  char summary[256];        /* recorded in each row's "plan" (e.g. "naive fp32"), NUL-terminated */
} attnbench_plan;

/* One kernel. `user` is passed back to every call. Messages go to the caller's buffer (at most `size` bytes,
 * NUL-terminated): supports() writes the reason of a decline, plan() and run() that of an error (an error row). */
typedef struct attnbench_kernel {
  const char* name;        /* the registry name, e.g. "mylib.paged": letters, digits and ._+- */
  const char* description; /* one line for `attnbench list --kernels`; may be NULL */
  int32_t backend;         /* ATTNBENCH_BACKEND_* */
  int32_t op;              /* ATTNBENCH_OP_ATTENTION */
  void* user;
  int32_t (*supports)(void* user, const attnbench_problem* problem, char* reason, size_t size);
  int32_t (*plan)(void* user, const attnbench_problem* problem, attnbench_plan* plan, char* error, size_t size);
  int32_t (*run)(void* user, void* handle, const attnbench_params* params, void* stream, char* error, size_t size);
  void (*release)(void* user, void* handle); /* may be NULL when plans hold nothing */
} attnbench_kernel;

typedef struct attnbench_plugin {
  uint32_t abi_version; /* ATTNBENCH_PLUGIN_ABI_VERSION of the header the plugin was built with */
  uint32_t num_kernels;
  const attnbench_kernel* kernels;
} attnbench_plugin;

/* Defined by a plugin (ATTNBENCH_PLUGIN_EXPORT): its table for the harness's ABI version, or NULL. */
typedef const attnbench_plugin* (*attnbench_plugin_entry_fn)(uint32_t host_abi_version);
ATTNBENCH_PLUGIN_EXPORT const attnbench_plugin* attnbench_plugin_entry(uint32_t host_abi_version);

/* Defined by the harness (never by a plugin), for a host that links it as a library: registers the table's
 * kernels as --plugin would, `origin` (a file path or a module name) standing for the file in messages and rows.
 * Returns ATTNBENCH_OK, or nonzero with the reason in `error` (a version mismatch, a bad descriptor, a name
 * clash); the same table registered again is a no-op. Not thread-safe; call it before a run starts. */
int32_t attnbench_register_plugin(const attnbench_plugin* plugin, const char* origin, char* error, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* ATTNBENCH_PLUGIN_H */
