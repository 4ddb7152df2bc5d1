/* An attnbench plugin in plain C: naive paged attention on the CPU (fp16 or bf16 storage, fp32 accumulation,
 * causal or not, GQA, the paged KV cache through the block table). It declines what it does not implement.
 *   attnbench run --plugin build/libattnbench_example_plugin.so --kernel 'example.*' --backend cpu --group quickstart
 * Built with -DEXAMPLE_PLANTED_BUG it is example.naive_planted instead, which forgets the softmax scale on the
 * last head: the gate must call its rows a mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnbench/plugin.h"

#ifdef EXAMPLE_PLANTED_BUG
#define KERNEL_NAME "example.naive_planted"
#else
#define KERNEL_NAME "example.naive"
#endif

static float f16_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  float f;
  if (exp == 0) return (sign ? -1.f : 1.f) * ldexpf((float)man, -24); /* zero and subnormals */
  u = sign | (exp == 31 ? 0x7f800000u : (exp + 112u) << 23) | (man << 13);
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even, as the harness's own conversions do. */
static uint16_t float_to_f16(float f) {
  uint32_t x, a, r, rem;
  memcpy(&x, &f, 4);
  a = x & 0x7fffffffu;
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u; /* rounds to 65520 or more: inf */
  if (a < 0x38800000u) return sign | (uint16_t)nearbyintf(fabsf(f) * 16777216.f); /* subnormal: units of 2^-24 */
  r = (a >> 13) - (112u << 10);
  rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return sign | (uint16_t)r;
}

static float load(const void* base, int64_t i, int32_t dtype) {
  const uint16_t h = ((const uint16_t*)base)[i];
  uint32_t u = (uint32_t)h << 16;
  float f;
  if (dtype == ATTNBENCH_FP16) return f16_to_float(h);
  memcpy(&f, &u, 4);
  return f;
}

static void store(void* base, int64_t i, float f, int32_t dtype) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (dtype == ATTNBENCH_FP16) {
    ((uint16_t*)base)[i] = float_to_f16(f);
    return;
  }
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x400000u; /* NaN stays NaN */
  else u += 0x7fffu + ((u >> 16) & 1u);
  ((uint16_t*)base)[i] = (uint16_t)(u >> 16);
}

static int32_t decline(char* reason, size_t size, const char* why) {
  snprintf(reason, size, "%s: %s", KERNEL_NAME, why);
  return ATTNBENCH_DECLINE;
}

static int32_t supports(void* user, const attnbench_problem* p, char* reason, size_t size) {
  (void)user;
  if (p->op != ATTNBENCH_OP_ATTENTION) return decline(reason, size, "attention only");
  if (p->q_dtype != p->kv_dtype || p->kv_dtype != p->o_dtype ||
      (p->q_dtype != ATTNBENCH_FP16 && p->q_dtype != ATTNBENCH_BF16))
    return decline(reason, size, "fp16 or bf16 storage of Q, K/V and O in one dtype only");
  if (p->first_feature) {
    snprintf(reason, size, "%s: feature '%s' not implemented", KERNEL_NAME, p->first_feature);
    return ATTNBENCH_DECLINE;
  }
  if (p->fusion.output_gate || p->fusion.q_norm || p->fusion.q_rope_dim)
    return decline(reason, size, "the gated block's fusions are not implemented");
  if (p->return_lse) return decline(reason, size, "return_lse: not written");
  return ATTNBENCH_OK;
}

/* The plan is scratch for one row: run() allocates nothing. */
typedef struct {
  float* scores; /* [max_seqlen_k] */
  float* q;      /* [head_size]: the row's query in fp32 */
  float* acc;    /* [head_size] */
} scratch;

static int32_t plan(void* user, const attnbench_problem* p, attnbench_plan* out, char* error, size_t size) {
  (void)user;
  scratch* s = (scratch*)calloc(1, sizeof *s);
  if (s) {
    s->scores = (float*)malloc(sizeof(float) * (size_t)(p->max_seqlen_k > 0 ? p->max_seqlen_k : 1));
    s->q = (float*)malloc(sizeof(float) * (size_t)p->head_size);
    s->acc = (float*)malloc(sizeof(float) * (size_t)p->head_size);
  }
  if (!s || !s->scores || !s->q || !s->acc) {
    if (s) {
      free(s->scores);
      free(s->q);
      free(s->acc);
      free(s);
    }
    snprintf(error, size, "out of memory for %d scores", p->max_seqlen_k);
    return -1;
  }
  out->handle = s;
  snprintf(out->summary, sizeof out->summary, "naive fp32, one row at a time");
  return ATTNBENCH_OK;
}

static void release(void* user, void* handle) {
  scratch* s = (scratch*)handle;
  (void)user;
  free(s->scores);
  free(s->q);
  free(s->acc);
  free(s);
}

/* One query row of one head: softmax(q K^T * scale) V over the keys it sees, written to O. */
static void attend_row(const attnbench_params* a, scratch* w, int seq, int64_t token, int visible, int h) {
  const int d = a->head_size, kvh = h / (a->heads / a->kv_heads);
  const int32_t* table = a->block_table + (int64_t)seq * a->block_table_stride;
  float scale = a->scale, m = -INFINITY, sum = 0.f;
  int j, i;
#ifdef EXAMPLE_PLANTED_BUG
  if (h == a->heads - 1) scale = 1.f;
#endif
  for (i = 0; i < d; ++i) w->q[i] = load(a->q, token * a->q_stride_token + h * a->q_stride_head + i, a->q_dtype);
  for (j = 0; j < visible; ++j) {
    const int64_t k0 = table[j / a->block_size] * a->kv_stride_block + (j % a->block_size) * a->kv_stride_token +
                       kvh * a->kv_stride_head;
    float dot = 0.f;
    for (i = 0; i < d; ++i) dot += w->q[i] * load(a->k_cache, k0 + i, a->kv_dtype);
    w->scores[j] = dot * scale;
    if (w->scores[j] > m) m = w->scores[j];
  }
  memset(w->acc, 0, sizeof(float) * (size_t)d);
  for (j = 0; j < visible; ++j) {
    const int64_t v0 = table[j / a->block_size] * a->kv_stride_block + (j % a->block_size) * a->kv_stride_token +
                       kvh * a->kv_stride_head;
    const float p = expf(w->scores[j] - m);
    sum += p;
    for (i = 0; i < d; ++i) w->acc[i] += p * load(a->v_cache, v0 + i, a->kv_dtype);
  }
  for (i = 0; i < d; ++i) /* a row that sees no key writes zeros */
    store(a->out, token * a->o_stride_token + h * a->o_stride_head + i, sum > 0.f ? w->acc[i] / sum : 0.f,
          a->o_dtype);
}

static int32_t run(void* user, void* handle, const attnbench_params* a, void* stream, char* error, size_t size) {
  int seq, h;
  (void)user, (void)stream, (void)error, (void)size; /* a CPU kernel: stream is NULL, nothing here fails */
  for (seq = 0; seq < a->num_seqs; ++seq) {
    const int q_len = a->cu_seqlens_q[seq + 1] - a->cu_seqlens_q[seq], kv_len = a->seqused_k[seq];
    int row;
    for (row = 0; row < q_len; ++row) {
      /* Bottom-right causal: row i sees keys j <= i + kv_len - q_len (top-left: j <= i). */
      const int pos = a->top_left ? row : row + kv_len - q_len;
      int visible = a->causal ? pos + 1 : kv_len;
      if (visible > kv_len) visible = kv_len;
      if (visible < 0) visible = 0;
      for (h = 0; h < a->heads; ++h) attend_row(a, (scratch*)handle, seq, a->cu_seqlens_q[seq] + row, visible, h);
    }
  }
  return ATTNBENCH_OK;
}

static const attnbench_kernel kernels[] = {{
    KERNEL_NAME, "naive paged attention in C (a plugin example): fp32 scores and softmax, one row at a time",
    ATTNBENCH_BACKEND_CPU, ATTNBENCH_OP_ATTENTION, NULL, supports, plan, run, release,
}};

static const attnbench_plugin table = {ATTNBENCH_PLUGIN_ABI_VERSION, 1, kernels};

ATTNBENCH_PLUGIN_EXPORT const attnbench_plugin* attnbench_plugin_entry(uint32_t host_abi_version) {
  return host_abi_version == ATTNBENCH_PLUGIN_ABI_VERSION ? &table : NULL;
}
