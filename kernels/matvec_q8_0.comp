#version 450
#extension GL_GOOGLE_include_directive : require
// Q8_0 weights x f32 activations -> f32 (ggml mul_mat, w ne = {K, N}, x ne = {K, M}):
//   dst[n, m] = sum_k w[k, n] * x[k, m]   for M <= MT columns per workgroup row (grid y walks
// groups of MT columns), every batch (i2, i3) on z, w broadcast over batches.
// A Q8_0 block is 34 bytes: f16 d, int8 q[32]. A row of K / 32 blocks is read as a stream of
// 2-byte granules (granule 17 b of a row is block b's d, granules 17 b + 1 .. 17 b + 16 its
// quants in pairs), so consecutive invocations load consecutive words (coalesced) whatever
// the row's alignment. Each granule of quants adds d * (q0 x[k] + q1 x[k + 1]); d comes from
// a second (cached) load of the block's first granule.
// VEC16 (all rows 16-byte aligned): each invocation takes 16 bytes = 8 granules of every one
// of ROWS rows at the same position, so one x load serves ROWS rows (x 16-byte aligned).
// LANEW (with VEC16's bindings; rows 4-byte aligned, even block count): each invocation
// takes one word = 2 granules of every row, so x loads coalesce across the subgroup too.
// KSPACE (any row alignment; x 16-byte aligned): each invocation takes a half-block (16
// weights) of every row, so its x is four aligned vec4 (coalesced, no index arithmetic) and
// its quants the five words around them.
// Offsets and strides of w are bytes; those of x and dst elements.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#ifndef ROWS
#define ROWS 2
#endif
#ifndef MT
#define MT 1
#endif
#define THREADS 128u
#define MAX_SUBGROUPS 64u

layout(local_size_x = 128) in;

#include "matvec_push.glsl"

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#if defined(KSPACE)
layout(std430, set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#elif defined(VEC16)
layout(std430, set = 0, binding = 1) readonly buffer X { vec2 x2[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
#endif
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
#ifdef VEC16
layout(std430, set = 0, binding = 3) readonly buffer W4 { uvec4 w4[]; };
#endif

shared float partial[ROWS * MT][MAX_SUBGROUPS];

// f16 at granule g (2-byte units from the binding start)
float granule_half(uint g) {
  vec2 p = unpackHalf2x16(w[g >> 1]);
  return (g & 1u) != 0u ? p.y : p.x;
}

// the two int8 quants in half h of word v
vec2 quant_pair(uint v, uint h) {
  int s = int(v);
  return vec2(float(bitfieldExtract(s, int(16u * h), 8)), float(bitfieldExtract(s, int(16u * h + 8u), 8)));
}

// the four int8 quants of word v
vec4 quads(uint v) {
  int s = int(v);
  return vec4(bitfieldExtract(s, 0, 8), bitfieldExtract(s, 8, 8), bitfieldExtract(s, 16, 8),
              bitfieldExtract(s, 24, 8));
}

#ifdef PREFETCH
// kspace unit u of the row at byte row_byte, as loaded: the five words around its 16 quants
// (the fifth clamped to the fourth when unused) and the word holding its block's d
void ks_raw(uint u, uint row_byte, out uint a[6]) {
  uint db = row_byte + 34u * (u >> 1);
  uint w0 = (db + 2u + 16u * (u & 1u)) >> 2;
  bool shifted = (db & 2u) == 0u;
  a[0] = w[w0];
  a[1] = w[w0 + 1u];
  a[2] = w[w0 + 2u];
  a[3] = w[w0 + 3u];
  a[4] = w[shifted ? w0 + 4u : w0 + 3u];
  a[5] = w[db >> 2];
}
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint row0 = (pc.base_x + gl_WorkGroupID.x) * ROWS;
  uint col0 = (pc.base_y + gl_WorkGroupID.y) * MT;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3;
  uint rows = min(uint(ROWS), pc.N - row0);
  uint cols = min(uint(MT), pc.M - col0);
  uint ng = pc.blocks * 17u; // granules per row

  float acc[ROWS * MT];
  for (uint i = 0u; i < ROWS * MT; i++)
    acc[i] = 0.0;

#if defined(KSPACE)
  // unit u = half-block u / 2 (weights 16 u .. 16 u + 15) of every row. Its quants start at
  // byte 34 (u / 2) + 2 + 16 (u % 2) of the row: 4 words as they are when that is 4-byte
  // aligned, else 5 words shifted by 16 bits (the fifth clamped to the fourth when unused, so
  // nothing is read past the row). The H200 ran this 30.9 us against lanew's 33.3 (K 14336 x
  // N 4096), the same at K 4096 x N 14336; converting the bytes by exponent bits instead of
  // int -> float, 4 rows per workgroup, or two units in flight were all slower.
  uint row_byte[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_byte[r] = wb + (min(r, rows - 1u) + row0) * pc.w_row;
  uint nu = pc.blocks * 2u;
#ifdef PREFETCH
  // the raw words of the next PREFETCH units (u + THREADS, ..) are loaded before this unit's
  // arithmetic (past the end: the last unit again, not used)
  uint raw[PREFETCH + 1][ROWS][6];
  for (uint i = 0u; i < PREFETCH; i++)
    for (uint r = 0u; r < ROWS; r++)
      ks_raw(min(tid + i * THREADS, nu - 1u), row_byte[r], raw[i][r]);
#endif
  for (uint u = tid; u < nu; u += THREADS) {
    uint b = u >> 1;
    uvec4 q[ROWS];
    float dq[ROWS];
#ifdef PREFETCH
    for (uint r = 0u; r < ROWS; r++)
      ks_raw(min(u + PREFETCH * THREADS, nu - 1u), row_byte[r], raw[PREFETCH][r]);
#endif
    // quant_blocks.glsl's q8_0_half_block written out: the H200 ran this kernel 36.1 us
    // calling it, 31.9 us with the decode here (2026-12-03, same shape, same driver)
    for (uint r = 0u; r < ROWS; r++) {
      uint db = row_byte[r] + 34u * b;
      bool shifted = (db & 2u) == 0u; // the quants start 2 mod 4
#ifdef PREFETCH
      uint a0 = raw[0][r][0], a1 = raw[0][r][1], a2 = raw[0][r][2], a3 = raw[0][r][3];
      uint a4 = raw[0][r][4], dw = raw[0][r][5];
#else
      uint w0 = (db + 2u + 16u * (u & 1u)) >> 2;
      uint a0 = w[w0], a1 = w[w0 + 1u], a2 = w[w0 + 2u], a3 = w[w0 + 3u];
      uint a4 = w[shifted ? w0 + 4u : w0 + 3u];
      uint dw = w[db >> 2];
#endif
      q[r] = shifted ? uvec4((a0 >> 16u) | (a1 << 16u), (a1 >> 16u) | (a2 << 16u),
                             (a2 >> 16u) | (a3 << 16u), (a3 >> 16u) | (a4 << 16u))
                     : uvec4(a0, a1, a2, a3);
      dq[r] = unpackHalf2x16((db & 2u) != 0u ? dw >> 16u : dw).x;
    }
#ifdef PREFETCH
    for (uint i = 0u; i < PREFETCH; i++)
      raw[i] = raw[i + 1u];
#endif
    for (uint c = 0u; c < MT; c++) {
      if (MT > 1u && c >= cols)
        break;
      uint xi = (xb + (col0 + c) * pc.x_col) / 4u + 4u * u; // x 16-byte aligned
      vec4 x0 = x4[xi], x1 = x4[xi + 1u], x2 = x4[xi + 2u], x3 = x4[xi + 3u];
      for (uint r = 0u; r < ROWS; r++)
        acc[r * MT + c] += dq[r] * (dot(quads(q[r].x), x0) + dot(quads(q[r].y), x1) +
                                    dot(quads(q[r].z), x2) + dot(quads(q[r].w), x3));
    }
  }
#elif defined(LANEW)
  // every row starts 4-byte aligned with an even block count (all rows in phase): local
  // word wi holds granules 2 wi, 2 wi + 1, so a subgroup reads 128 contiguous bytes of each
  // row and 64 contiguous floats of x (coalesced), one x load serving ROWS rows. Every load is
  // unconditional (a d granule's x index is clamped to a valid one) and its contribution
  // dropped by a select, never a multiply (x may hold infinities); the H200 ran this 37.1 ->
  // 33.2 us against the branching form, and slower with 2, 4 or 8 words in flight per row.
  uint nw = ng / 2u; // words per row
  uint row_word[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_word[r] = (wb + (min(r, rows - 1u) + row0) * pc.w_row) / 4u;
  for (uint wi = tid; wi < nw; wi += THREADS) {
    uint b = (wi * 2u) / 17u;
    uint p = wi * 2u - b * 17u;    // granule position of the low half (0..16)
    bool lo = p != 0u;             // the low half is block b's d at p == 0
    bool hi = p != 16u;            // the high half is the next block's d at p == 16
    uint khi = min(b * 32u + 2u * p, pc.blocks * 32u - 2u);
    uint klo = lo ? b * 32u + 2u * p - 2u : khi;
    uint q[ROWS];
    float dq[ROWS];
    for (uint r = 0u; r < ROWS; r++) {
      q[r] = w[row_word[r] + wi];
      dq[r] = granule_half(row_word[r] * 2u + b * 17u);
    }
    for (uint c = 0u; c < MT; c++) {
      if (MT > 1u && c >= cols) // MT = 8 serves M 2..8: only the columns there are
        break;
      uint xc = (xb + (col0 + c) * pc.x_col) / 2u; // x 8-byte aligned
      vec2 xl = x2[xc + klo / 2u], xh = x2[xc + khi / 2u];
      for (uint r = 0u; r < ROWS; r++) {
        float sl = lo ? dot(quant_pair(q[r], 0u), xl) : 0.0;
        float sh = hi ? dot(quant_pair(q[r], 1u), xh) : 0.0;
        acc[r * MT + c] += dq[r] * (sl + sh);
      }
    }
  }
#elif defined(VEC16)
  // every row starts 16-byte aligned: local 16-byte unit u holds granules 8u .. 8u + 7
  for (uint u = tid; u * 8u < ng; u += THREADS) {
    uint g = u * 8u;
    uint b0 = g / 17u;
    uint pos0 = g - b0 * 17u;
    uvec4 q[ROWS];
    float dq[ROWS][2];
    for (uint r = 0u; r < ROWS; r++) {
      if (r < rows) {
        uint rs = wb + (row0 + r) * pc.w_row; // bytes, 16-aligned
        q[r] = w4[rs / 16u + u];
        uint g0 = rs / 2u;
        dq[r][0] = granule_half(g0 + b0 * 17u);
        dq[r][1] = b0 + 1u < pc.blocks ? granule_half(g0 + b0 * 17u + 17u) : 0.0;
      } else {
        q[r] = uvec4(0u);
        dq[r][0] = 0.0;
        dq[r][1] = 0.0;
      }
    }
    for (uint j = 0u; j < 8u; j++) {
      uint pos = pos0 + j;
      uint nb = pos >= 17u ? 1u : 0u;
      pos -= nb * 17u;
      if (pos == 0u || g + j >= ng)
        continue;
      uint k = (b0 + nb) * 32u + 2u * (pos - 1u);
      for (uint c = 0u; c < MT; c++) {
        if (c < cols) {
          vec2 xv = x2[(xb + (col0 + c) * pc.x_col + k) / 2u]; // x 8-byte aligned
          for (uint r = 0u; r < ROWS; r++)
            acc[r * MT + c] += dq[r][nb] * dot(quant_pair(q[r][j >> 1], j & 1u), xv);
        }
      }
    }
  }
#else
  for (uint r = 0u; r < ROWS; r++) {
    if (r >= rows)
      break;
    uint g0 = (wb + (row0 + r) * pc.w_row) / 2u; // first granule of the row
    uint wend = (g0 + ng + 1u) / 2u;
    for (uint wi = g0 / 2u + tid; wi < wend; wi += THREADS) {
      uint v = w[wi];
      for (uint h = 0u; h < 2u; h++) {
        uint g = wi * 2u + h;
        if (g < g0 || g >= g0 + ng)
          continue;
        uint lg = g - g0;
        uint b = lg / 17u;
        uint pos = lg - b * 17u;
        if (pos == 0u)
          continue;
        float dd = granule_half(g0 + b * 17u);
        vec2 qv = quant_pair(v, h);
        uint k = b * 32u + 2u * (pos - 1u);
        for (uint c = 0u; c < MT; c++) {
          if (c < cols) {
            uint xi = xb + (col0 + c) * pc.x_col + k;
            acc[r * MT + c] += dd * dot(qv, vec2(x[xi], x[xi + 1u]));
          }
        }
      }
    }
  }
#endif

  for (uint i = 0u; i < ROWS * MT; i++) {
    float s = subgroupAdd(acc[i]);
    if (subgroupElect())
      partial[i][gl_SubgroupID] = s;
  }
  barrier();
  for (uint i = tid; i < ROWS * MT; i += THREADS) {
    uint r = i / MT, c = i % MT;
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
