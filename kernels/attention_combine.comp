#version 450
// Decode attention, the combine pass of flash-decoding: workgroup (h, jj, z) merges the
// splits attention_split.comp wrote for query head h of query q0 + jj, elements
// 32 z .. 32 z + 31 of the head. Only the splits that start below that query's kv_len
// (read here again; the split pass cut it into splits of max(ceil(kv_len / n_split),
// min_split)) exist; with M the largest split max, dst[d] = sum_s e^(m_s - M) o_s[d] /
// sum_s e^(m_s - M) l_s. kv_len <= 0 writes zeros. Invocation t takes element t % 32 of
// every (WG / 32)-th split (128-byte rows), the split groups summed through shared memory at
// the end; the first splits' partials (m, l of WG splits, o of WG / 4) are loaded before
// kv_len returns, so a short cache's merge waits on memory once. The weights e^(m_s - M)
// are computed once per split into shared memory (CHUNK at a time past those).
// Up to IN_ORDER live splits (the few of a short cache), invocations 0..31 instead merge
// their element alone, split after split: no shared memory and no barrier, where the trees
// above cost more than the sums they save.
// Specialization constants: 0 workgroup size (a power of two, 32..256; 32 where every split
// is merged in order), 1 D (head dim), 2 IN_ORDER.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint D = 128u;
layout(constant_id = 2) const uint IN_ORDER = 0u;
const uint WG = gl_WorkGroupSize.x;
const uint DS = 32u;      // elements of the head per workgroup
const uint SG = WG / DS;  // split groups
const uint CHUNK = 1024u; // split weights held at once
const uint OB = 8u;       // splits an invocation loads with the maxima (SG * OB of them)
const float LOW = -3.402823466e38;

layout(push_constant) uniform Push {
  uint len_off, len_s0;   // I32 elements
  uint d_off, d_s1, d_s2; // f32 elements
  uint n_ctx, n_split, min_split;
  uint q0, n_head;
  uint ml_base;           // floats
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Len { int kv_len[]; };
layout(std430, set = 0, binding = 1) readonly buffer P { float part[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Dst { float dst[]; };

#include "attention_split_len.glsl"
#include "attention_merge.glsl"

shared float red[WG];
shared float wt[CHUNK];

// max (is_max) or sum of every invocation's x, in all invocations
float reduce(float x, bool is_max) {
  uint t = gl_LocalInvocationID.x;
  red[t] = x;
  barrier();
  for (uint w = WG / 2u; w > 0u; w /= 2u) {
    if (t < w)
      red[t] = is_max ? max(red[t], red[t + w]) : red[t] + red[t + w];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  uint h = pc.base_x + gl_WorkGroupID.x;
  uint jj = pc.base_y + gl_WorkGroupID.y;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint j = pc.q0 + jj;
  uint tid = gl_LocalInvocationID.x;
  uint e0 = (jj * pc.n_head + h) * pc.n_split; // this head's first split
  uint ml = pc.ml_base + 2u * e0;
  uint d = z * DS + tid % DS, g = tid / DS;
  uint dc = min(d, D - 1u); // past D (D not a multiple of 32): valid reads, never stored

  // The first WG splits' max and sum and the first SG * OB splits' o go out with kv_len:
  // one memory latency for all where the splits are that few. Partials of splits past the
  // query's length are stale (earlier queries') and are selected away, never multiplied.
  float m_s = LOW, l_s = 0.0;
  if (tid < pc.n_split) {
    m_s = part[ml + 2u * tid];
    l_s = part[ml + 2u * tid + 1u];
  }
  float ov[OB];
  [[unroll]] for (uint i = 0u; i < OB; i++) {
    uint s = g + i * SG;
    ov[i] = 0.0;
    if (s < pc.n_split)
      ov[i] = part[(e0 + s) * D + dc];
  }
  int len = clamp(kv_len[pc.len_off + j * pc.len_s0], 0, int(pc.n_ctx));
  uint split_len = attention_split_len(uint(len), pc.n_split, pc.min_split);
  uint n_live = len > 0 ? (uint(len) + split_len - 1u) / split_len : 0u;
  bool live = tid < n_live;
  if (n_live <= IN_ORDER) { // uniform: no barrier below is reached by part of the workgroup
    if (g == 0u && d < D)
      dst[pc.d_off + h * pc.d_s1 + j * pc.d_s2 + d] = attention_merge(ml, e0, D, d, n_live);
    return;
  }

  float m = live ? m_s : LOW;
  for (uint s = tid + WG; s < n_live; s += WG)
    m = max(m, part[ml + 2u * s]);
  m = reduce(m, true);
  float w_s = live ? exp(m_s - m) : 0.0;
  float l = live ? w_s * l_s : 0.0;
  for (uint s = tid + WG; s < n_live; s += WG)
    l += exp(part[ml + 2u * s] - m) * part[ml + 2u * s + 1u];
  l = reduce(l, false);

  wt[tid] = w_s;
  barrier();
  float o = 0.0;
  [[unroll]] for (uint i = 0u; i < OB; i++) {
    uint s = g + i * SG;
    if (s < n_live)
      o += wt[s] * ov[i];
  }
  // splits past the first SG * OB: their weights CHUNK at a time
  for (uint s0 = SG * OB; s0 < n_live; s0 += CHUNK) {
    uint count = min(CHUNK, n_live - s0);
    barrier(); // the weights before are read
    for (uint s = tid; s < count; s += WG)
      wt[s] = exp(part[ml + 2u * (s0 + s)] - m);
    barrier();
    for (uint s = g; s < count; s += SG)
      o += wt[s] * part[(e0 + s0 + s) * D + dc];
  }
  red[tid] = o;
  barrier();
  if (g == 0u && d < D) {
    for (uint i = 1u; i < SG; i++)
      o += red[i * DS + tid];
    dst[pc.d_off + h * pc.d_s1 + j * pc.d_s2 + d] = n_live > 0u ? o / l : 0.0;
  }
}
