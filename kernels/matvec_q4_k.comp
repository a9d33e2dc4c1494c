#version 450
// Q4_K weights x f32 activations -> f32 (ggml mul_mat, w ne = {K, N}, x ne = {K, M}):
//   dst[n, m] = sum_k w[k, n] * x[k, m]   for M <= MT columns per workgroup row (grid y walks
// groups of MT columns), every batch (i2, i3) on z, w broadcast over batches.
// A Q4_K super-block is 144 bytes = 9 units of 16: unit 0 holds f16 d, f16 dmin and the 12
// bytes of packed 6-bit scales/mins, units 1..8 the 128 bytes of 4-bit quants. Quant unit p
// (0..7) of a super-block covers weights 64 (p / 2) + 16 (p % 2) + t (low nibble of byte t,
// sub-block 2 (p / 2)) and the same + 32 (high nibble, sub-block 2 (p / 2) + 1). Invocations
// walk the quant units of a row in order (coalesced 16-byte reads), every one of the ROWS
// rows at once so each x load serves ROWS rows:
//   sum_t (d sc q_t - dmin m) x_t = d sc sum_t q_t x_t - dmin m sum_t x_t.
// Rows start 4-byte aligned (VEC16: rows 16-byte aligned, quant units read as uvec4, and
// x 16-byte aligned, read as vec4). LANEW (with VEC16's bindings, rows 4-byte aligned): each
// invocation takes four quant words of every row spread over the super-block instead, so the
// x loads of eight invocations are contiguous too (see below). KSPACE (rows 8-byte aligned,
// x 16-byte aligned): each invocation takes 8 quant bytes (16 weights) of every row, so its
// x is four aligned vec4.
// Offsets and strides of w are bytes; those of x and dst elements.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require

#ifndef ROWS
#define ROWS 4
#endif
#ifndef MT
#define MT 1
#endif
#define THREADS 128u
#define MAX_SUBGROUPS 64u

layout(local_size_x = 128) in;

#include "matvec_push.glsl"

#if defined(KSPACE)
layout(std430, set = 0, binding = 0) readonly buffer W { uvec2 w2[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#endif
#if defined(VEC16) || defined(KSPACE)
layout(std430, set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
#endif
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
#if defined(VEC16) && !defined(KSPACE)
layout(std430, set = 0, binding = 3) readonly buffer W4 { uvec4 w4[]; };
#endif

shared float partial[ROWS * MT][MAX_SUBGROUPS];

vec4 bytes_of(uint v) { return vec4(v & 255u, (v >> 8u) & 255u, (v >> 16u) & 255u, v >> 24u); }

#define Q4_K_SCALES
#include "quant_blocks.glsl"

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

  float acc[ROWS * MT];
  for (uint i = 0u; i < ROWS * MT; i++)
    acc[i] = 0.0;

#if defined(KSPACE)
  // unit u: super-block u / 16, quant bytes 32 j + 8 c .. + 7 (u % 16 = 4 j + c) of every
  // row: weights 64 j + 8 c + 0..7 (low nibbles, sub-block 2 j) and the same + 32 (high
  // nibbles, 2 j + 1); sixteen invocations per super-block. The H200 ran it 29.4 us against
  // vec16's 26.7 (K 14336 x N 4096): a variant, not the default.
  uint row_w2[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_w2[r] = (wb + (min(r, rows - 1u) + row0) * pc.w_row) / 8u;
  for (uint u = tid; u < pc.blocks * 16u; u += THREADS) {
    uint sb = u >> 4, j = (u >> 2) & 3u, c4 = u & 3u;
    uvec2 q[ROWS];
    vec4 dm[ROWS];
    for (uint r = 0u; r < ROWS; r++) {
      uint base = row_w2[r] + sb * 18u;
      q[r] = w2[base + 2u + 4u * j + c4];
      dm[r] = pair_scales(uvec4(w2[base], w2[base + 1u]), 2u * j);
    }
    for (uint c = 0u; c < MT; c++) {
      if (MT > 1u && c >= cols)
        break;
      uint xi = (xb + (col0 + c) * pc.x_col) / 4u + sb * 64u + 16u * j + 2u * c4; // 16-byte aligned
      vec4 xl0 = x4[xi], xl1 = x4[xi + 1u], xh0 = x4[xi + 8u], xh1 = x4[xi + 9u];
      float sl = dot(xl0 + xl1, vec4(1.0)), sh = dot(xh0 + xh1, vec4(1.0));
      for (uint r = 0u; r < ROWS; r++) {
        uvec2 lo = q[r] & 0x0f0f0f0fu, hi = (q[r] >> 4u) & 0x0f0f0f0fu;
        float ql = dot(bytes_of(lo.x), xl0) + dot(bytes_of(lo.y), xl1);
        float qh = dot(bytes_of(hi.x), xh0) + dot(bytes_of(hi.y), xh1);
        acc[r * MT + c] += dm[r].x * ql - dm[r].y * sl + dm[r].z * qh - dm[r].w * sh;
      }
    }
  }
#elif defined(LANEW)
  // Eight invocations per super-block and row, each taking quant words p, 8 + p, 16 + p and
  // 24 + p (bytes 32 j + 4 p of sub-block pair j = 0..3) of its super-block: the low nibbles
  // of word j are weights 64 j + 4 p + (0..3), the high nibbles the same + 32. So the x loads
  // of the eight (one vec4 each per step) cover 128 contiguous bytes, and their weight loads
  // 32 contiguous bytes. Each invocation decodes all eight scales and mins from the header
  // (packed, four per word op); ROWS rows share each x load.
  uint row_word[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_word[r] = (wb + (min(r, rows - 1u) + row0) * pc.w_row) / 4u;
  for (uint task = tid; task < pc.blocks * 8u; task += THREADS) {
    uint sb = task >> 3, p = task & 7u;
    uvec4 q[ROWS];
    vec4 dsc[ROWS * 2u], dmn[ROWS * 2u]; // d sc, dmin m of sub-blocks 0..3 and 4..7
    for (uint r = 0u; r < ROWS; r++) {
      uint base = row_word[r] + sb * 36u;
      uvec4 h = uvec4(w[base], w[base + 1u], w[base + 2u], w[base + 3u]);
      q[r] = uvec4(w[base + 4u + p], w[base + 12u + p], w[base + 20u + p], w[base + 28u + p]);
      vec2 dd = unpackHalf2x16(h.x);
      uvec4 sm = scales_mins(h);
      dsc[2u * r] = dd.x * bytes_of(sm.x);
      dsc[2u * r + 1u] = dd.x * bytes_of(sm.y);
      dmn[2u * r] = dd.y * bytes_of(sm.z);
      dmn[2u * r + 1u] = dd.y * bytes_of(sm.w);
    }
    for (uint c = 0u; c < MT; c++) {
      if (MT > 1u && c >= cols)
        break;
      uint xi = (xb + (col0 + c) * pc.x_col + sb * 256u + 4u * p) / 4u; // x 16-byte aligned
      vec4 xl[4], xh[4];
      vec4 sl, sh; // sums of x per sub-block: low (2 j) and high (2 j + 1) of pair j
      for (uint j = 0u; j < 4u; j++) {
        xl[j] = x4[xi + 16u * j];
        xh[j] = x4[xi + 16u * j + 8u];
        sl[j] = dot(xl[j], vec4(1.0));
        sh[j] = dot(xh[j], vec4(1.0));
      }
      for (uint r = 0u; r < ROWS; r++) {
        vec4 ql, qh;
        for (uint j = 0u; j < 4u; j++) {
          uint lo4 = q[r][j] & 0x0f0f0f0fu, hi4 = (q[r][j] >> 4u) & 0x0f0f0f0fu;
          ql[j] = dot(bytes_of(lo4), xl[j]);
          qh[j] = dot(bytes_of(hi4), xh[j]);
        }
        // pair j: sub-blocks 2 j (low nibbles) and 2 j + 1 (high)
        vec4 a = dsc[2u * r], b = dsc[2u * r + 1u], m0 = dmn[2u * r], m1 = dmn[2u * r + 1u];
        acc[r * MT + c] += dot(vec4(a.x, a.z, b.x, b.z), ql) + dot(vec4(a.y, a.w, b.y, b.w), qh) -
                           dot(vec4(m0.x, m0.z, m1.x, m1.z), sl) - dot(vec4(m0.y, m0.w, m1.y, m1.w), sh);
      }
    }
  }
#else
  // rows past N clamped to the last one (valid memory, results not stored): loads never branch
  uint row_word[ROWS];
  for (uint r = 0u; r < ROWS; r++)
    row_word[r] = (wb + (min(r, rows - 1u) + row0) * pc.w_row) / 4u;
  for (uint unit = tid; unit < pc.blocks * 8u; unit += THREADS) {
    uint sb = unit >> 3, p = unit & 7u;
    uint sub = 2u * (p >> 1);
    uint k = sb * 256u + 64u * (p >> 1) + 16u * (p & 1u);
    // per row: the 16 quant bytes and (d sc, dmin m) for both sub-blocks
    uvec4 q[ROWS];
    vec4 dm[ROWS];
    for (uint r = 0u; r < ROWS; r++) {
      uint base = row_word[r] + sb * 36u; // words
      uvec4 h = uvec4(w[base], w[base + 1u], w[base + 2u], w[base + 3u]);
#ifdef VEC16
      q[r] = w4[base / 4u + 1u + p];
#else
      uint qb = base + 4u + 4u * p;
      q[r] = uvec4(w[qb], w[qb + 1u], w[qb + 2u], w[qb + 3u]);
#endif
      dm[r] = pair_scales(h, sub);
    }
    for (uint c = 0u; c < MT; c++) {
      if (MT > 1u && c >= cols)
        break;
      uint xi = xb + (col0 + c) * pc.x_col + k;
      vec4 xl[4], xh[4];
      for (uint i = 0u; i < 4u; i++) {
#ifdef VEC16
        xl[i] = x4[xi / 4u + i];  // x 16-byte aligned
        xh[i] = x4[xi / 4u + 8u + i];
#else
        xl[i] = vec4(x[xi + 4u * i], x[xi + 4u * i + 1u], x[xi + 4u * i + 2u], x[xi + 4u * i + 3u]);
        xh[i] = vec4(x[xi + 32u + 4u * i], x[xi + 33u + 4u * i], x[xi + 34u + 4u * i],
                     x[xi + 35u + 4u * i]);
#endif
      }
      float sl = 0.0, sh = 0.0;
      for (uint i = 0u; i < 4u; i++) {
        sl += dot(xl[i], vec4(1.0));
        sh += dot(xh[i], vec4(1.0));
      }
      for (uint r = 0u; r < ROWS; r++) {
        float ql = 0.0, qh = 0.0;
        for (uint i = 0u; i < 4u; i++) {
          // nibbles masked four at a time, then one byte per weight into its float
          uint lo4 = q[r][i] & 0x0f0f0f0fu, hi4 = (q[r][i] >> 4u) & 0x0f0f0f0fu;
          ql += dot(bytes_of(lo4), xl[i]);
          qh += dot(bytes_of(hi4), xh[i]);
        }
        acc[r * MT + c] += dm[r].x * ql - dm[r].y * sl + dm[r].z * qh - dm[r].w * sh;
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
