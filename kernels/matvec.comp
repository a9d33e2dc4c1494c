#version 450
// Matrix-vector product for decode (ggml mul_mat with M == 1):
//   dst[n] = sum_k w[k, n] * x[k]   for every batch (i2, i3), w broadcast over batches.
// One workgroup computes ROWS consecutive rows: every invocation walks K in 16-byte loads
// (8 halves or 4 floats of w), reusing each loaded x chunk for all ROWS rows, then each row
// is summed with subgroupAdd and across subgroups through shared memory.
// The vector path needs 16-byte-aligned rows and x; the K % VEC tail is read through the
// scalar aliases (bindings 3 and 4, the same buffers). Offsets/strides of w and x are in
// 16-byte units, those of dst in elements.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#ifndef ROWS
#define ROWS 4
#endif
#define THREADS 128u
#define MAX_SUBGROUPS 64u

layout(local_size_x = 128) in;

layout(push_constant) uniform Push {
  uint K, N;
  uint k_vec;          // number of full 16-byte chunks of a row (K / VEC)
  uint w_row;          // 16-byte units between rows
  uint w_offset, x_offset, d_offset;
  uint w_stride2, w_stride3, x_stride2, x_stride3;  // 16-byte units
  uint d_stride0, d_stride2, d_stride3;             // elements
  uint ne2, r2, r3;    // dst batch dim 2; broadcast ratios x.ne2 / w.ne2, x.ne3 / w.ne3
  uint base_x, base_y, base_z;  // base_y unused (grids are 1 x rows, z = batches)
} pc;

#ifdef W_F16
#define VEC 8u
layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
layout(std430, set = 0, binding = 3) readonly buffer W1 { uint w1[]; };
#else
#define VEC 4u
layout(std430, set = 0, binding = 0) readonly buffer W4 { vec4 w4[]; };
layout(std430, set = 0, binding = 3) readonly buffer W1 { float w1[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer D { float d[]; };
layout(std430, set = 0, binding = 4) readonly buffer X1 { float x1[]; };

shared float partial[ROWS][MAX_SUBGROUPS];

float w_scalar(uint row_base16, uint k) {
#ifdef W_F16
  uint h = row_base16 * 8u + k;
  vec2 pair = unpackHalf2x16(w1[h >> 1]);
  return (h & 1u) != 0u ? pair.y : pair.x;
#else
  return w1[row_base16 * 4u + k];
#endif
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row0 = (pc.base_x + gl_WorkGroupID.x) * ROWS;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3;
  uint rows = min(uint(ROWS), pc.N - row0);

  float acc[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    acc[r] = 0.0;

  for (uint k = tid; k < pc.k_vec; k += THREADS) {
#ifdef W_F16
    vec4 xa = x4[xb + 2u * k];
    vec4 xc = x4[xb + 2u * k + 1u];
#else
    vec4 xa = x4[xb + k];
#endif
    for (uint r = 0u; r < ROWS; r++) {
      if (r < rows) {
#ifdef W_F16
        uvec4 wv = w4[wb + (row0 + r) * pc.w_row + k];
        acc[r] += dot(unpackHalf2x16(wv.x), xa.xy) + dot(unpackHalf2x16(wv.y), xa.zw) +
                  dot(unpackHalf2x16(wv.z), xc.xy) + dot(unpackHalf2x16(wv.w), xc.zw);
#else
        acc[r] += dot(w4[wb + (row0 + r) * pc.w_row + k], xa);
#endif
      }
    }
  }
  for (uint k = pc.k_vec * VEC + tid; k < pc.K; k += THREADS) {
    float xv = x1[xb * 4u + k];
    for (uint r = 0u; r < ROWS; r++)
      if (r < rows)
        acc[r] += w_scalar(wb + (row0 + r) * pc.w_row, k) * xv;
  }

  for (uint r = 0u; r < ROWS; r++) {
    float s = subgroupAdd(acc[r]);
    if (subgroupElect())
      partial[r][gl_SubgroupID] = s;
  }
  barrier();
  if (tid < rows) {
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
      s += partial[tid][i];
    d[pc.d_offset + (row0 + tid) * pc.d_stride0 + i2 * pc.d_stride2 + i3 * pc.d_stride3] = s;
  }
}
