#version 450
// Q6_K weights x f32 activations -> f32 (ggml mul_mat, w ne = {K, N}, x ne = {K, M}):
//   dst[n, m] = sum_k w[k, n] * x[k, m]   for NCOLS columns of x per workgroup (grid y walks
// groups of NCOLS columns; one column: NCOLS = 1), every batch (i2, i3) on z, w broadcast
// over batches. ROWS rows per workgroup.
// A Q6_K super-block (210 bytes: ql[128], qh[64], int8 scales[16], f16 d at 208) is two
// halves of 128 weights, each four quarters of 32 (ggml dequantize_row_q6_K). Eight
// invocations share a super-block: invocation t takes half t / 4 and weights l .. l + 7
// (l = 8 (t % 4)) of each of its quarters, from 8 bytes of ql at l and at l + 32, 8 bytes of qh
// at l, its quarters' four scales (l / 16 + 2 j) and d; so the eight read ql and qh in runs
// of 32 contiguous bytes and x in runs of 32 floats. Rows start at any even byte (every other
// super-block 2 mod 4): such 8 bytes come out of three words shifted by 16 bits (q6_words).
// Each row's 32 quants become floats once (exact, less 32), then each column's x (read once
// per super-block, as floats: any offset) is dotted with every row's, scaled by d scale per
// quarter.
// Offsets and strides of w are bytes; those of x and dst elements.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require

#ifndef NCOLS
#define NCOLS 1
#endif
#define ROWS 2u
#define THREADS 128u
#define MAX_SUBGROUPS 64u

layout(local_size_x = 128) in;

layout(push_constant) uniform Push {
  uint N, M, blocks;        // rows, columns of x, super-blocks per row (K / 256)
  uint w_offset, w_row, w_stride2, w_stride3;                  // bytes
  uint x_offset, x_col, x_stride2, x_stride3;                  // elements
  uint d_offset, d_stride0, d_col, d_stride2, d_stride3;       // elements
  uint ne2, r2, r3;
  uint accumulate;          // 1: dst += the product (vkrt_op_matmul_add)
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };

#define Q6_K_QUANTS
#include "quant_blocks.glsl"

shared float partial[ROWS * NCOLS][MAX_SUBGROUPS];

// the 8 bytes of w at byte b (even)
uvec2 bytes8(uint b) {
  uint i = b >> 2;
  bool odd = (b & 2u) != 0u;
  return q6_words(w[i], w[i + 1u], w[odd ? i + 2u : i + 1u], odd);
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row0 = (pc.base_x + gl_WorkGroupID.x) * ROWS;
  uint col0 = (pc.base_y + gl_WorkGroupID.y) * NCOLS;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3;
  uint rows = min(ROWS, pc.N - row0);
  uint cols = min(uint(NCOLS), pc.M - col0);
  // rows past N and columns past M clamped to the last one (read, not stored): no load
  // branches
  uint row_byte[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_byte[r] = wb + (min(r, rows - 1u) + row0) * pc.w_row;
  uint xcol[NCOLS];
  for (uint c = 0u; c < NCOLS; c++)
    xcol[c] = xb + (col0 + min(c, cols - 1u)) * pc.x_col;
  uint hf = (tid >> 2) & 1u, l = 8u * (tid & 3u);

  float acc[ROWS * NCOLS];
  for (uint i = 0u; i < ROWS * NCOLS; i++)
    acc[i] = 0.0;
  for (uint sb = tid >> 3; sb < pc.blocks; sb += THREADS / 8u) {
    vec4 f[ROWS][8]; // quarter j: quants of weights l .. l + 3 at 2 j, l + 4 .. l + 7 at 2 j + 1
    vec4 ds[ROWS];   // d scale of the four quarters
    for (uint r = 0u; r < ROWS; r++) {
      uint bb = row_byte[r] + 210u * sb;
      uvec2 qa = bytes8(bb + 64u * hf + l), qb = bytes8(bb + 64u * hf + 32u + l);
      uvec2 qh = bytes8(bb + 128u + 32u * hf + l), sc = bytes8(bb + 192u + 8u * hf);
      uint db = bb + 208u;
      float dd = unpackHalf2x16(w[db >> 2] >> (8u * (db & 2u))).x;
      int is = int(8u * (l >> 4)); // bit of scale l / 16 (and + 2, + 4, + 6) in its word
      ds[r] = dd * vec4(bitfieldExtract(int(sc.x), is, 8), bitfieldExtract(int(sc.x), is + 16, 8),
                        bitfieldExtract(int(sc.y), is, 8), bitfieldExtract(int(sc.y), is + 16, 8));
      for (uint j = 0u; j < 4u; j++) {
        uvec2 ql = (j & 1u) != 0u ? qb : qa;
        f[r][2u * j] = q6_floats(q6_quants(ql.x, qh.x, j));
        f[r][2u * j + 1u] = q6_floats(q6_quants(ql.y, qh.y, j));
      }
    }
    for (uint c = 0u; c < NCOLS; c++) {
      uint xi = xcol[c] + sb * 256u + 128u * hf + l;
      vec4 xv[8];
      for (uint j = 0u; j < 4u; j++)
        for (uint e = 0u; e < 2u; e++) {
          uint a = xi + 32u * j + 4u * e;
          xv[2u * j + e] = vec4(x[a], x[a + 1u], x[a + 2u], x[a + 3u]);
        }
      for (uint r = 0u; r < ROWS; r++)
        acc[r * NCOLS + c] += dot(ds[r], vec4(dot(f[r][0], xv[0]) + dot(f[r][1], xv[1]),
                                              dot(f[r][2], xv[2]) + dot(f[r][3], xv[3]),
                                              dot(f[r][4], xv[4]) + dot(f[r][5], xv[5]),
                                              dot(f[r][6], xv[6]) + dot(f[r][7], xv[7])));
    }
  }

  for (uint i = 0u; i < ROWS * NCOLS; i++) {
    float s = subgroupAdd(acc[i]);
    if (subgroupElect())
      partial[i][gl_SubgroupID] = s;
  }
  barrier();
  for (uint i = tid; i < ROWS * NCOLS; i += THREADS) {
    uint r = i / NCOLS, c = i % NCOLS;
    if (r < rows && c < cols) {
      float s = 0.0;
      for (uint j = 0u; j < gl_NumSubgroups; j++)
        s += partial[i][j];
      uint at = pc.d_offset + (row0 + r) * pc.d_stride0 + (col0 + c) * pc.d_col +
               i2 * pc.d_stride2 + i3 * pc.d_stride3;
      d[at] = pc.accumulate != 0u ? d[at] + s : s;
    }
  }
}
