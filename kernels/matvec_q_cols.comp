#version 450
#extension GL_GOOGLE_include_directive : require
// Q4_K (default) or Q8_0 (-DQ8_0) weights x f32 activations -> f32 for a few columns of x in
// one pass (small batches: speculative decoding, a few sequences; ggml mul_mat, w ne = {K, N},
// x ne = {K, M}):
//   dst[n, m] = sum_k w[k, n] x[k, m]   for NCOLS columns per workgroup row (grid y walks
// groups of NCOLS columns), every batch (i2, i3) on z, w broadcast over batches.
// w streams once per pass as the one-column prefetching kernels read it (the next unit's
// loads issued before this unit's arithmetic), each unit's quants become floats once and
// serve every column, x comes from L1/L2, and every row keeps NCOLS accumulators. Columns
// past M are clamped to the last one (read, not stored), so no load branches.
// Q4_K (rows and x 16-byte aligned): matvec_q_stream.comp's lanes. A workgroup takes
// ROWS = 4 R rows and its WARPS groups of 32 invocations split the super-blocks; lanes
// 8 g .. 8 g + 7 take rows g, g + 4, .. (R rows each) at quant unit p (16 bytes) of the same
// super-block, so the four groups load the same x. x of CG columns at a time stays in
// registers (32 floats a column) while each row's quants are converted.
// Q8_0 with STREAM (rows and x 16-byte aligned, whole runs of 8 blocks per row): the same
// lanes on 16-byte pieces (8 two-byte granules, at most one a block's d; the one-column form
// is matvec_q_stream.comp's), each row's quants scaled by their block's d once, x as 8 vec2
// a column.
// Q8_0 (x 16-byte aligned, rows at any 2-byte alignment): matvec_q8_0.comp's kspace units.
// Invocation t takes half-blocks u = t, t + 128, .. (16 weights) of each of ROWS rows (the
// five words around its quants and the word of its block's d, quant_blocks.glsl), its x four
// aligned vec4 a column; the quants are scaled by d once, then dotted with every column.
// Offsets and strides of w are bytes; those of x and dst elements.
#ifndef NCOLS
#define NCOLS 2
#endif

#include "matvec_push.glsl"

#if defined(Q8_0) && !defined(STREAM)
#define KSPACE
#endif

#ifdef KSPACE
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#ifndef ROWS
#define ROWS 4
#endif
#define THREADS 128u
layout(local_size_x = 128) in;
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#define Q8_0_HALF_BLOCK
#include "quant_blocks.glsl"
// subgroups of at least 4 invocations (lavapipe's smallest)
shared float partial[ROWS * NCOLS][THREADS / 4u];
#else
#ifndef R
#define R 4
#endif
#ifndef WARPS
#define WARPS 4
#endif
#define THREADS (32u * uint(WARPS))
#define ROWS (4u * uint(R))
#if WARPS == 8
layout(local_size_x = 256) in;
#elif WARPS == 4
layout(local_size_x = 128) in;
#else
#error "WARPS: 4 or 8"
#endif
layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#ifdef Q8_0
layout(std430, set = 0, binding = 3) readonly buffer W { uint w[]; };
#define Q8_0_PIECES
#else
#define Q4_K_SCALES
#define Q4_K_FLOATS
#endif
#include "quant_blocks.glsl"
// one more float a row of lanes, so the eight lanes of a group store to different banks
shared float red[WARPS * 8u][ROWS * NCOLS + 1u];
#endif
#if defined(Q8_0) && !defined(KSPACE)
layout(std430, set = 0, binding = 1) readonly buffer X { vec2 x2[]; };
#define XSHIFT 1u // x indices in vec2
#else
layout(std430, set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#define XSHIFT 2u // x indices in vec4
#endif
layout(std430, set = 0, binding = 2) buffer D { float d[]; };

#ifdef KSPACE
// the four int8 quants of word v
vec4 quads(uint v) {
  int s = int(v);
  return vec4(bitfieldExtract(s, 0, 8), bitfieldExtract(s, 8, 8), bitfieldExtract(s, 16, 8),
              bitfieldExtract(s, 24, 8));
}
#elif !defined(CG)
#define CG (NCOLS < 4 ? NCOLS : 4) // columns whose x is held at once
#endif

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
  uint xcol[NCOLS]; // vec4 (vec2) index of each column's x (x 16-byte aligned)
  for (uint c = 0u; c < NCOLS; c++)
    xcol[c] = (xb + (col0 + min(c, cols - 1u)) * pc.x_col) >> XSHIFT;

#ifdef KSPACE
  uint row_byte[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_byte[r] = wb + (min(r, rows - 1u) + row0) * pc.w_row;
  float acc[ROWS * NCOLS];
  for (uint i = 0u; i < ROWS * NCOLS; i++)
    acc[i] = 0.0;
  uint nu = pc.blocks * 2u;
  // the raw words of this unit and the next (past the end: the last unit again, not used)
  uint raw[2][ROWS][6];
  for (uint r = 0u; r < ROWS; r++)
    q8_0_half_raw(row_byte[r], min(tid, nu - 1u), raw[0][r]);
  for (uint u = tid; u < nu; u += THREADS) {
    for (uint r = 0u; r < ROWS; r++)
      q8_0_half_raw(row_byte[r], min(u + THREADS, nu - 1u), raw[1][r]);
    vec4 f[ROWS][4];
    for (uint r = 0u; r < ROWS; r++) {
      float dq;
      uvec4 q = q8_0_half_decode(row_byte[r], u, raw[0][r], dq);
      for (uint e = 0u; e < 4u; e++)
        f[r][e] = dq * quads(q[e]);
    }
    raw[0] = raw[1];
    for (uint c = 0u; c < NCOLS; c++) {
      uint xi = xcol[c] + 4u * u;
      vec4 x0 = x4[xi], x1 = x4[xi + 1u], x2 = x4[xi + 2u], x3 = x4[xi + 3u];
      for (uint r = 0u; r < ROWS; r++)
        acc[r * NCOLS + c] += dot(f[r][0], x0) + dot(f[r][1], x1) + dot(f[r][2], x2) +
                              dot(f[r][3], x3);
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
#else
  uint warp = tid >> 5, l = tid & 31u, g = l >> 3, p = l & 7u;
  // this lane's rows (past N: the last row, read but not stored), in 16-byte units
  uint row_u4[R];
  for (uint r = 0u; r < R; r++)
    row_u4[r] = (wb + (min(4u * r + g, rows - 1u) + row0) * pc.w_row) >> 4;
  float acc[R * NCOLS];
  for (uint i = 0u; i < R * NCOLS; i++)
    acc[i] = 0.0;
#ifdef Q8_0
  uint pieces = pc.blocks * 17u / 8u; // 16-byte pieces per row (whole runs of 8 blocks)
  // R rows' piece of runs u and u + WARPS and the word of the d its first granules belong
  // to: the next run's loads are in flight while this run's arithmetic runs
  uvec4 q[2][R];
  uint dw[2][R];
  piece_t pp = piece(warp, pieces);
  for (uint r = 0u; r < R; r++) {
    q[0][r] = w4[row_u4[r] + pp.c];
    dw[0][r] = w[(row_u4[r] * 16u + pp.dbyte) >> 2];
  }
  for (uint u = warp; u * 8u < pieces; u += WARPS) {
    piece_t nx = piece(u + WARPS, pieces); // past the end: the last piece, not used
    for (uint r = 0u; r < R; r++) {
      q[1][r] = w4[row_u4[r] + nx.c];
      dw[1][r] = w[(row_u4[r] * 16u + nx.dbyte) >> 2];
    }
    // each row's granule pairs times their block's d, moved past the d granule so that h[m]
    // weighs x pair m (h[7] only where the piece holds no d)
    vec2 h[R][8];
    for (uint r = 0u; r < R; r++) {
      uint rb = row_u4[r] * 16u + pp.dbyte;
      float da = unpackHalf2x16(dw[0][r] >> (8u * (rb & 2u))).x;
      float dz = unpackHalf2x16(q[0][r][min(pp.id, 7u) >> 1] >> (16u * (pp.id & 1u))).x;
      vec2 sc[8];
      for (uint e = 0u; e < 4u; e++) {
        vec4 f = q8_floats(q[0][r][e]);
        sc[2u * e] = f.xy * (2u * e < pp.id ? da : dz);
        sc[2u * e + 1u] = f.zw * (2u * e + 1u < pp.id ? da : dz);
      }
      for (uint m = 0u; m < 7u; m++)
        h[r][m] = m < pp.id ? sc[m] : sc[m + 1u];
      h[r][7] = sc[7];
    }
    uint last = pp.id < 8u ? 6u : 7u;
    for (uint c = 0u; c < NCOLS; c++) {
      uint xi = xcol[c] + (pp.kq >> 1);
      vec2 xp[8];
      for (uint m = 0u; m < 8u; m++)
        xp[m] = x2[xi + min(m, last)];
      for (uint r = 0u; r < R; r++) {
        float sum = 0.0;
        for (uint m = 0u; m < 7u; m++)
          sum += dot(h[r][m], xp[m]);
        sum += pp.id < 8u ? 0.0 : dot(h[r][7], xp[7]);
        acc[r * NCOLS + c] += pp.valid ? sum : 0.0;
      }
    }
    q[0] = q[1];
    dw[0] = dw[1];
    pp = nx;
  }
#else
  uint sub = 2u * (p >> 1);
  // R rows' header and quant unit of super-blocks s and s + WARPS: the next one's loads are
  // in flight while this one's arithmetic runs (past the end: the last one again, not used)
  uvec4 h[2][R], q[2][R];
  for (uint r = 0u; r < R; r++) {
    uint base = row_u4[r] + min(warp, pc.blocks - 1u) * 9u;
    h[0][r] = w4[base];
    q[0][r] = w4[base + 1u + p];
  }
  for (uint s = warp; s < pc.blocks; s += WARPS) {
    for (uint r = 0u; r < R; r++) {
      uint base = row_u4[r] + min(s + WARPS, pc.blocks - 1u) * 9u;
      h[1][r] = w4[base];
      q[1][r] = w4[base + 1u + p];
    }
    vec4 dm[R];
    for (uint r = 0u; r < R; r++)
      dm[r] = pair_scales(h[0][r], sub);
    uint xo = s * 64u + 16u * (p >> 1) + 4u * (p & 1u);
    for (uint c0 = 0u; c0 < NCOLS; c0 += CG) {
      vec4 xl[CG][4], xh[CG][4];
      float sl[CG], sh[CG];
      for (uint c = 0u; c < CG; c++) {
        for (uint i = 0u; i < 4u; i++) {
          xl[c][i] = x4[xcol[c0 + c] + xo + i];
          xh[c][i] = x4[xcol[c0 + c] + xo + 8u + i];
        }
        sl[c] = dot(xl[c][0] + xl[c][1] + xl[c][2] + xl[c][3], vec4(1.0));
        sh[c] = dot(xh[c][0] + xh[c][1] + xh[c][2] + xh[c][3], vec4(1.0));
      }
      for (uint r = 0u; r < R; r++) {
        float ql[CG], qh[CG];
        for (uint c = 0u; c < CG; c++) {
          ql[c] = 0.0;
          qh[c] = 0.0;
        }
        for (uint i = 0u; i < 4u; i++) {
          vec4 lo, hi;
          q4_floats(q[0][r][i], lo, hi);
          for (uint c = 0u; c < CG; c++) {
            ql[c] += dot(lo, xl[c][i]);
            qh[c] += dot(hi, xh[c][i]);
          }
        }
        for (uint c = 0u; c < CG; c++)
          acc[r * NCOLS + c0 + c] += dm[r].x * ql[c] - dm[r].y * sl[c] + dm[r].z * qh[c] -
                                     dm[r].w * sh[c];
      }
    }
    h[0] = h[1];
    q[0] = q[1];
  }
#endif
  for (uint r = 0u; r < R; r++)
    for (uint c = 0u; c < NCOLS; c++)
      red[warp * 8u + p][(4u * r + g) * NCOLS + c] = acc[r * NCOLS + c];
  barrier();
  for (uint i = tid; i < ROWS * NCOLS; i += THREADS) {
    uint r = i / NCOLS, c = i % NCOLS;
    if (r < rows && c < cols) {
      float s = 0.0;
      for (uint j = 0u; j < WARPS * 8u; j++)
        s += red[j][i];
      uint at = pc.d_offset + (row0 + r) * pc.d_stride0 + (col0 + c) * pc.d_col +
               i2 * pc.d_stride2 + i3 * pc.d_stride3;
      d[at] = pc.accumulate != 0u ? d[at] + s : s;
    }
  }
#endif
}
