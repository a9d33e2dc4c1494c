#version 450
// Decode attention, the combine pass of flash-decoding: workgroup (h, jj) merges the
// splits attention_split.comp wrote for query head h of query q0 + jj. Only the splits
// that start below that query's kv_len (read here again) exist; with M the largest split
// max, dst[d] = sum_s e^(m_s - M) o_s[d] / sum_s e^(m_s - M) l_s. kv_len <= 0 writes zeros.
// Invocation t takes element t % D of every (WG / D)-th split; the split groups are summed
// through shared memory. Specialization constants: 0 workgroup size (a multiple of D, at
// most 256), 1 D (head dim).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint D = 128u;
const uint WG = gl_WorkGroupSize.x;
const uint SG = WG / D; // split groups

layout(push_constant) uniform Push {
  uint len_off, len_s0;   // I32 elements
  uint d_off, d_s1, d_s2; // f32 elements
  uint n_ctx, split_len, n_split;
  uint q0, n_head;
  uint ml_base;           // floats
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Len { int kv_len[]; };
layout(std430, set = 0, binding = 1) readonly buffer P { float part[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Dst { float dst[]; };

shared float red[WG];

// max (is_max) or sum of every invocation's x, in all invocations (WG <= 256)
float reduce(float x, bool is_max) {
  red[gl_LocalInvocationID.x] = x;
  barrier();
  for (uint w = 128u; w > 0u; w /= 2u) {
    uint t = gl_LocalInvocationID.x;
    if (t < w && t + w < WG)
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
  uint j = pc.q0 + jj;
  uint tid = gl_LocalInvocationID.x;
  int len = clamp(kv_len[pc.len_off + j * pc.len_s0], 0, int(pc.n_ctx));
  uint n_live = (uint(len) + pc.split_len - 1u) / pc.split_len;
  uint e0 = (jj * pc.n_head + h) * pc.n_split; // this head's first split

  float m = -3.402823466e38;
  for (uint s = tid; s < n_live; s += WG)
    m = max(m, part[pc.ml_base + 2u * (e0 + s)]);
  m = reduce(m, true);
  float l = 0.0;
  for (uint s = tid; s < n_live; s += WG)
    l += exp(part[pc.ml_base + 2u * (e0 + s)] - m) * part[pc.ml_base + 2u * (e0 + s) + 1u];
  l = reduce(l, false);

  uint d = tid % D, g = tid / D;
  float o = 0.0;
  for (uint s = g; s < n_live; s += SG)
    o += exp(part[pc.ml_base + 2u * (e0 + s)] - m) * part[(e0 + s) * D + d];
  red[tid] = o;
  barrier();
  if (g == 0u) {
    for (uint i = 1u; i < SG; i++)
      o += red[i * D + d];
    dst[pc.d_off + h * pc.d_s1 + j * pc.d_s2 + d] = n_live > 0u ? o / l : 0.0;
  }
}
