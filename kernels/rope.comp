#version 450
// Rotary position embedding (ggml ROPE, modes normal and neox, no context extension), for
// every head of every token in one dispatch: x, d {head_dim, n_head, n_tokens}, token t at
// position pos[t], read here so that recorded work replays with new positions.
// One invocation per pair p < ceil(head_dim / 2) of a head: p < n_dims / 2 rotates by
// theta = pos * freq_scale * theta_scale^p / factor[p] (theta_scale = freq_base^(-2 / n_dims),
// from the host; factor[p] ggml's freq_factors, 1 without them) the pair (2p, 2p + 1) in normal mode or (p, p + n_dims / 2) in neox mode; the other
// invocations copy elements n_dims + 2 (p - n_dims / 2) and the one after (head_dim may be
// odd). d may be x exactly: each element is read, then written, by one invocation.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint pairs, n_head, total;   // pairs = ceil(head_dim / 2); total = pairs * n_head * n_tokens
  uint head_dim, n_dims, neox;
  uint x_offset, x_stride0, x_stride1, x_stride2;
  uint d_offset, d_stride0, d_stride1, d_stride2;
  uint pos_offset, pos_stride;
  float theta_scale, freq_scale;
  uint factors;                // 0: none; else factor[p] = f[factors_offset + p * factors_stride]
  uint factors_offset, factors_stride;
  uint base_group;             // last: the host's linear dispatch writes it there
} pc;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer P { int pos[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
layout(std430, set = 0, binding = 3) readonly buffer F { float f[]; }; // x's buffer when none

#include "rope_angle.glsl"

void main() {
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= pc.total)
    return;
  uint p = i % pc.pairs;
  uint rest = i / pc.pairs;
  uint h = rest % pc.n_head, tok = rest / pc.n_head;
  uint xr = pc.x_offset + h * pc.x_stride1 + tok * pc.x_stride2;
  uint dr = pc.d_offset + h * pc.d_stride1 + tok * pc.d_stride2;
  uint half_dims = pc.n_dims / 2u;
  if (p >= half_dims) {
    uint e = pc.n_dims + 2u * (p - half_dims);
    d[dr + e * pc.d_stride0] = x[xr + e * pc.x_stride0];
    if (e + 1u < pc.head_dim)
      d[dr + (e + 1u) * pc.d_stride0] = x[xr + (e + 1u) * pc.x_stride0];
    return;
  }
  uint e0 = pc.neox != 0u ? p : 2u * p;
  uint e1 = pc.neox != 0u ? p + half_dims : 2u * p + 1u;
  vec2 cs = rope_cos_sin(pos[pc.pos_offset + tok * pc.pos_stride], p, pc.theta_scale,
                         pc.freq_scale, pc.factors != 0u,
                         f[pc.factors_offset + min(pc.factors, 1u) * p * pc.factors_stride]);
  vec2 turned = rope_turn(x[xr + e0 * pc.x_stride0], x[xr + e1 * pc.x_stride0], cs);
  d[dr + e0 * pc.d_stride0] = turned.x;
  d[dr + e1 * pc.d_stride0] = turned.y;
}
