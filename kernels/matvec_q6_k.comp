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
// STREAM (x 16-byte aligned, NCOLS columns per pass): the layout of matvec_q_stream.comp.
// A workgroup takes 4 R rows; its WARPS groups of 32 invocations split the row's super-blocks between
// them; within 32, lanes 8 g .. 8 g + 7 take rows g, g + 4, .. (R rows each) at the same
// super-block, each lane the same bytes as above, so the four groups load the same x (one
// request serves them, as vec4) and x is read once per 4 R rows, not per 2. With PREFETCH the
// words of the next super-block are loaded before this one's arithmetic.
// Offsets and strides of w are bytes; those of x and dst elements.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_GOOGLE_include_directive : require

#ifndef NCOLS
#define NCOLS 1
#endif
#ifdef STREAM
#ifndef R
#define R 2
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef PREFETCH
#define PREFETCH 0
#endif
#define ROWS (4u * uint(R))
#define THREADS (32u * uint(WARPS))
#if WARPS == 8
layout(local_size_x = 256) in;
#elif WARPS == 4
layout(local_size_x = 128) in;
#else
#error "WARPS: 4 or 8"
#endif
#else
#define ROWS 2u
#define THREADS 128u
layout(local_size_x = 128) in;
#endif
#define MAX_SUBGROUPS 64u

#include "matvec_push.glsl"

layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#ifdef STREAM
layout(std430, set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
#endif
layout(std430, set = 0, binding = 2) buffer D { float d[]; };

#define Q6_K_QUANTS
#include "quant_blocks.glsl"

// the 8 bytes of w at byte b (even)
uvec2 bytes8(uint b) {
  uint i = b >> 2;
  bool odd = (b & 2u) != 0u;
  return q6_words(w[i], w[i + 1u], w[odd ? i + 2u : i + 1u], odd);
}

// The d scale of the four quarters (quants of weights l .. l + 7 of each) and their quants
// less 32 as floats (quarter j: weights l .. l + 3 at 2 j, l + 4 .. l + 7 at 2 j + 1) from
// the 8 bytes of ql at 64 hf + l (qa) and + 32 (qb), of qh at 128 + 32 hf + l, of the
// scales at 192 + 8 hf and the f16 d (dd).
vec4 q6_decode(uvec2 qa, uvec2 qb, uvec2 qh, uvec2 sc, float dd, uint l, out vec4 f[8]) {
  int is = int(8u * (l >> 4)); // bit of scale l / 16 (and + 2, + 4, + 6) in its word
  for (uint j = 0u; j < 4u; j++) {
    uvec2 ql = (j & 1u) != 0u ? qb : qa;
    f[2u * j] = q6_floats(q6_quants(ql.x, qh.x, j));
    f[2u * j + 1u] = q6_floats(q6_quants(ql.y, qh.y, j));
  }
  return dd * vec4(bitfieldExtract(int(sc.x), is, 8), bitfieldExtract(int(sc.x), is + 16, 8),
                   bitfieldExtract(int(sc.y), is, 8), bitfieldExtract(int(sc.y), is + 16, 8));
}

// sum over the four quarters of d scale times the dot of the quants with x (xv as f)
float q6_dot(vec4 ds, vec4 f[8], vec4 xv[8]) {
  return dot(ds, vec4(dot(f[0], xv[0]) + dot(f[1], xv[1]), dot(f[2], xv[2]) + dot(f[3], xv[3]),
                      dot(f[4], xv[4]) + dot(f[5], xv[5]), dot(f[6], xv[6]) + dot(f[7], xv[7])));
}

#ifdef STREAM
shared float red[WARPS * 8u][ROWS * NCOLS];

// The 13 words a lane reads of one super-block of a row starting at byte bb: three for each
// of its 8-byte pieces (ql at 64 hf + l and + 32, qh at 128 + 32 hf + l, scales at
// 192 + 8 hf; every piece shares bb's phase mod 4) and the word of d.
void q6_raw(uint bb, uint hf, uint l, out uint a[13]) {
  bool odd = (bb & 2u) != 0u;
  uint at[4] = uint[4](bb + 64u * hf + l, bb + 64u * hf + 32u + l, bb + 128u + 32u * hf + l,
                       bb + 192u + 8u * hf);
  for (uint k = 0u; k < 4u; k++) {
    uint i = at[k] >> 2;
    a[3u * k] = w[i];
    a[3u * k + 1u] = w[i + 1u];
    a[3u * k + 2u] = w[odd ? i + 2u : i + 1u];
  }
  a[12] = w[(bb + 208u) >> 2];
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint warp = tid >> 5, g = (tid >> 3) & 3u, p = tid & 7u;
  uint hf = p >> 2, l = 8u * (p & 3u);
  uint row0 = (pc.base_x + gl_WorkGroupID.x) * ROWS;
  uint col0 = (pc.base_y + gl_WorkGroupID.y) * NCOLS;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3;
  uint rows = min(ROWS, pc.N - row0);
  uint cols = min(uint(NCOLS), pc.M - col0);
  // this lane's rows (past N: the last row, read but not stored)
  uint row_byte[R];
  for (uint r = 0u; r < R; r++)
    row_byte[r] = wb + (min(4u * r + g, rows - 1u) + row0) * pc.w_row;
  uint xcol[NCOLS]; // vec4 index of each column (past M: the last, not stored)
  for (uint c = 0u; c < NCOLS; c++)
    xcol[c] = (xb + (col0 + min(c, cols - 1u)) * pc.x_col) >> 2; // 16-byte aligned
  float acc[R * NCOLS];
  for (uint i = 0u; i < R * NCOLS; i++)
    acc[i] = 0.0;
  // the words of super-blocks s, s + WARPS, .. s + PREFETCH WARPS of each row (past the end:
  // the last one again, not used)
  uint raw[PREFETCH + 1][R][13];
  for (uint i = 0u; i < uint(PREFETCH); i++)
    for (uint r = 0u; r < R; r++)
      q6_raw(row_byte[r] + 210u * min(warp + i * WARPS, pc.blocks - 1u), hf, l, raw[i][r]);
  for (uint s = warp; s < pc.blocks; s += WARPS) {
    for (uint r = 0u; r < R; r++)
      q6_raw(row_byte[r] + 210u * min(s + PREFETCH * WARPS, pc.blocks - 1u), hf, l,
             raw[PREFETCH][r]);
    vec4 f[R][8], ds[R];
    for (uint r = 0u; r < R; r++) {
      bool odd = ((row_byte[r] + 210u * s) & 2u) != 0u;
      uint a[13] = raw[0][r];
      float dd = unpackHalf2x16(odd ? a[12] >> 16u : a[12]).x;
      ds[r] = q6_decode(q6_words(a[0], a[1], a[2], odd), q6_words(a[3], a[4], a[5], odd),
                        q6_words(a[6], a[7], a[8], odd), q6_words(a[9], a[10], a[11], odd),
                        dd, l, f[r]);
    }
    for (uint c = 0u; c < NCOLS; c++) {
      if (NCOLS > 1 && c >= cols)
        break;
      uint xi = xcol[c] + s * 64u + 32u * hf + (l >> 2);
      vec4 xv[8];
      for (uint j = 0u; j < 4u; j++) {
        xv[2u * j] = x4[xi + 8u * j];
        xv[2u * j + 1u] = x4[xi + 8u * j + 1u];
      }
      for (uint r = 0u; r < R; r++)
        acc[r * NCOLS + c] += q6_dot(ds[r], f[r], xv);
    }
    for (uint i = 0u; i < uint(PREFETCH); i++)
      raw[i] = raw[i + 1u];
  }

  for (uint r = 0u; r < R; r++)
    for (uint c = 0u; c < NCOLS; c++)
      red[warp * 8u + p][(4u * r + g) * NCOLS + c] = acc[r * NCOLS + c];
  barrier();
  for (uint i = tid; i < ROWS * NCOLS; i += THREADS) {
    uint r = i / NCOLS, c = i % NCOLS;
    if (r < rows && c < cols) {
      float sum = 0.0;
      for (uint k = 0u; k < WARPS * 8u; k++)
        sum += red[k][i];
      uint at = pc.d_offset + (row0 + r) * pc.d_stride0 + (col0 + c) * pc.d_col +
               i2 * pc.d_stride2 + i3 * pc.d_stride3;
      d[at] = pc.accumulate != 0u ? d[at] + sum : sum;
    }
  }
}
#else
shared float partial[ROWS * NCOLS][MAX_SUBGROUPS];

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
      uint db = bb + 208u;
      float dd = unpackHalf2x16(w[db >> 2] >> (8u * (db & 2u))).x;
      ds[r] = q6_decode(bytes8(bb + 64u * hf + l), bytes8(bb + 64u * hf + 32u + l),
                        bytes8(bb + 128u + 32u * hf + l), bytes8(bb + 192u + 8u * hf), dd, l,
                        f[r]);
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
        acc[r * NCOLS + c] += q6_dot(ds[r], f[r], xv);
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
#endif
