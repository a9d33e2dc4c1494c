#version 450
// KV-cache append (ggml SET_ROWS): row i of the f32 source goes to row rows[i] of d, one
// invocation per element (F32: the bits moved; F16: rounded to nearest even; Q8_0: by
// blocks of 32, ggml quantize_row_q8_0: d = max|x| / 127, id = d ? 1 / d : 0, q = roundf(x id)
// with halves away from zero, d stored as f16; both divisions correctly rounded as on the
// CPU, without relying on a fused fma, and x id rounded before it is rounded to an integer). A row index outside [0, n_rows) is skipped. Source
// offsets and strides are elements; destination ones elements (F32, F16) or bytes (Q8_0,
// blocks dense along dim 0).
// ROPE (vkrt_op_rope_set_rows): the source row of token i is its heads {head_dim, n_head}
// (head h at s_stride_h), each turned as rope.comp turns it at position pos[i] before it is
// converted: the KV-cache append of a roped K in one dispatch. Each element is computed
// from its pair by its own invocation.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n, total;           // n: elements per row; total: invocations (elements or blocks)
  uint s_offset, s_stride0, s_stride1;
  uint d_offset, d_stride0, d_stride1;
  uint r_offset, r_stride, n_rows;
  // ROPE only (declared in every form, so that one host struct pushes them all)
  uint s_stride_h, head_dim, n_dims, neox;
  uint pos_offset, pos_stride;
  float theta_scale, freq_scale;
  uint factors, factors_offset, factors_stride; // factors 0: none (f is s's buffer)
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer S { uint s[]; };
layout(std430, set = 0, binding = 1) readonly buffer R { int rows[]; };
#ifdef F32
layout(std430, set = 0, binding = 2) writeonly buffer D { uint d[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer D { uint16_t d[]; };
#endif
#ifdef ROPE
layout(std430, set = 0, binding = 3) readonly buffer P { int pos[]; };
layout(std430, set = 0, binding = 4) readonly buffer F { float f[]; };
#include "rope_angle.glsl"

// Element e (0 .. n - 1: head e / head_dim) of token i1's source row, roped.
float roped(uint i1, uint e) {
  uint h = e / pc.head_dim, j = e % pc.head_dim;
  uint base = pc.s_offset + i1 * pc.s_stride1 + h * pc.s_stride_h;
  if (j >= pc.n_dims)
    return uintBitsToFloat(s[base + j * pc.s_stride0]);
  uint half_dims = pc.n_dims / 2u;
  uint p = pc.neox != 0u ? j % half_dims : j / 2u;
  uint e0 = pc.neox != 0u ? p : 2u * p, e1 = pc.neox != 0u ? p + half_dims : 2u * p + 1u;
  vec2 cs = rope_cos_sin(pos[pc.pos_offset + i1 * pc.pos_stride], p, pc.theta_scale,
                         pc.freq_scale, pc.factors != 0u,
                         f[pc.factors_offset + min(pc.factors, 1u) * p * pc.factors_stride]);
  vec2 turned = rope_turn(uintBitsToFloat(s[base + e0 * pc.s_stride0]),
                         uintBitsToFloat(s[base + e1 * pc.s_stride0]), cs);
  return j == e0 ? turned.x : turned.y;
}
#endif

#include "kv_convert.glsl"

#ifdef ROPE
#define SRC_VALUE(i1, e) roped(i1, e)
#else
#define SRC_VALUE(i1, e) uintBitsToFloat(s[pc.s_offset + (i1) * pc.s_stride1 + (e) * pc.s_stride0])
#endif

#ifdef Q8_0
shared float sv[256]; // the workgroup's values: 8 whole blocks (n is a multiple of 32)

// One invocation per element: each computes its value into shared memory, then every one
// of a block finds the block's max (so d and 1 / d are the same everywhere in it), and the
// even ones write their pair of quants, the first the f16 d.
void main() {
  uint lid = gl_LocalInvocationID.x;
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u + lid;
  bool live = i < pc.total;
  uint ic = min(i, pc.total - 1u); // past the end: the last element again, not written
  uint i0 = ic % pc.n, i1 = ic / pc.n;
  int row = rows[pc.r_offset + i1 * pc.r_stride]; // in flight with the value's loads
  sv[lid] = SRC_VALUE(i1, i0);
  barrier();
  if (!live || row < 0 || uint(row) >= pc.n_rows)
    return;
  uint b0 = lid & ~31u, e = i0 & 31u;
  float amax = 0.0;
  for (uint j = 0u; j < 32u; j++)
    amax = max(amax, abs(sv[b0 + j]));
  float dq = q8_0_scale(amax), id = q8_0_inverse(dq);
  uint h = (pc.d_offset + uint(row) * pc.d_stride1 + 34u * (i0 >> 5)) >> 1; // 2-byte aligned
  if (e == 0u)
    d[h] = uint16_t(f32_to_f16_bits(floatBitsToUint(dq)));
  if ((e & 1u) == 0u)
    d[h + 1u + (e >> 1)] = uint16_t(q8_0_pair(sv[lid], sv[lid + 1u], id));
}
#else
void main() {
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= pc.total)
    return;
  uint i0 = i % pc.n, i1 = i / pc.n;
  // the value is loaded before the row is known (one memory latency for both)
  int row = rows[pc.r_offset + i1 * pc.r_stride];
#ifdef ROPE
  uint bits = floatBitsToUint(roped(i1, i0));
#else
  uint bits = s[pc.s_offset + i1 * pc.s_stride1 + i0 * pc.s_stride0]; // f32: moved bit for bit
#endif
  if (row < 0 || uint(row) >= pc.n_rows)
    return;
#ifdef F32
  d[pc.d_offset + uint(row) * pc.d_stride1 + i0 * pc.d_stride0] = bits;
#else
  d[pc.d_offset + uint(row) * pc.d_stride1 + i0 * pc.d_stride0] = uint16_t(f32_to_f16_bits(bits));
#endif
}
#endif
