#version 450
#extension GL_GOOGLE_include_directive : require
// Q4_K (default) or Q8_0 (-DQ8_0) weights x f32 activations -> f32 for one column of x (the
// decode case, M = 1; ggml mul_mat, w ne = {K, N}, x ne = {K, 1}):
//   dst[n] = sum_k w[k, n] x[k]   every batch (i2, i3) on z, w broadcast over batches.
// Rows 16-byte aligned (Q8_0: whole groups of 8 blocks per row), x 16-byte aligned.
//
// Laid out so that every load of a subgroup is wide and touches few cache lines:
// - a workgroup takes ROWS = 4 R rows; its WARPS groups of 32 invocations split the row's
//   units (Q4_K super-blocks / Q8_0 runs of 128 bytes) between them, so small N still fills
//   the GPU;
// - within 32 invocations, lanes 8 g .. 8 g + 7 take rows g, g + 4, .. (R rows each) at the
//   same place of the row, so the four groups load the same x (one request serves them) and
//   each group's 16-byte weight loads are 128 contiguous bytes of its row;
// - each invocation converts its quants with exponent bits, (bits | 2^e) - 2^e (exact), on
//   the float and integer-logic pipes, not with int -> float conversions;
// - with PREFETCH (Q4_K), the loads of the next super-blocks are issued before this one's
//   arithmetic, so they are in flight while it runs.
// Q4_K: lane 8 g + p takes quant unit p (16 bytes: sub-block pair p / 2, bytes 16 (p % 2) ..
// + 15) of super-block s of each of its rows, its x the 16 + 16 floats those nibbles weigh.
// Q8_0: lane 8 g + c takes the 16-byte piece 8 u + c of each of its rows (u: the run); a
// piece holds 8 two-byte granules, at most one of them a block's d; the quants before it
// belong to the previous block (its d read again, from the cache), those after it to the
// block of that d. Offsets and strides of w are bytes; those of x and dst elements.
// SCALES (Q4_K, PREFETCH 1): the super-block headers are read once per row and super-block, not
// by each of the 8 lanes on it: ROWS x WARPS invocations each load one header a step ahead,
// decode its 8 (d sc, dmin m) pairs into shared memory (two buffers, one barrier per step),
// and every lane reads its pair from there; all warps walk the same number of steps (past
// the row's end: the last super-block again, its sum dropped by a select). H200, one run
// beside R 4 + PREFETCH 1: q-o 8.69 us (8.34), gate-up 19.97 (20.29), down 21.24 (21.17):
// the decode once per row instead of 8 times and 7 fewer uvec4 per lane, no faster (lab only).
// The H200 (Llama-3-8B shapes, CHANGELOG.md 2026-12-04): Q4_K with R 4 and PREFETCH 1 is the
// default from 16 rows per SM (gate-up 20.4 us against the earlier 23.8); without PREFETCH
// no faster than the earlier kernels; the Q8_0 path 1.7-1.9 x kspace (lab only).
#ifndef R
#define R 2
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef PREFETCH
#define PREFETCH 0 // super-blocks (Q4_K) whose loads run ahead of the arithmetic
#endif
#ifndef U
#define U 1 // Q8_0 runs whose loads are issued together
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

#include "matvec_push.glsl"

layout(std430, set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#ifdef Q8_0
layout(std430, set = 0, binding = 1) readonly buffer X { vec2 x2[]; };
#else
layout(std430, set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#endif
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
#ifdef Q8_0
layout(std430, set = 0, binding = 3) readonly buffer W { uint w[]; };
#else
// the RMS norm's weight (accumulate & 4; otherwise any buffer, not read)
layout(std430, set = 0, binding = 3) readonly buffer G { vec4 g4[]; };
#endif

shared float red[WARPS * 8u][ROWS];
shared float squares[THREADS]; // the RMS norm's sum of x^2, by invocation
#ifndef Q8_0
#define STAGE_MAX_K 4096u
shared vec4 xg[STAGE_MAX_K / 4u]; // the RMS norm's x g, where K <= STAGE_MAX_K
#endif
#ifdef SCALES
// (d sc, dmin m) of sub-blocks 2 j and 2 j + 1 at [step & 1][row][warp][j]
shared vec4 scl[2][ROWS][WARPS][4];
#endif

#ifdef Q8_0
// the four int8 quants of word v as floats: (byte ^ 0x80) in the low mantissa bits of 2^23
// (bytes 0, 2) or 2^15 (bytes 1, 3, eight bits up), less 2^e + 128: exact
vec4 q8_floats(uint v) {
  uint u = v >> 16u;
  return vec4(uintBitsToFloat((v & 0xffu) ^ 0x4b000080u) - 8388736.0,
              uintBitsToFloat((v & 0xff00u) ^ 0x47008000u) - 32896.0,
              uintBitsToFloat((u & 0xffu) ^ 0x4b000080u) - 8388736.0,
              uintBitsToFloat((u & 0xff00u) ^ 0x47008000u) - 32896.0);
}
#else
// the low and high nibbles of the four bytes of word v as floats: each nibble in the low
// mantissa bits of 2^23, 2^19, 2^15 or 2^11 (by its place in the half word), less that
void q4_floats(uint v, out vec4 lo, out vec4 hi) {
  uint u = v >> 16u;
  lo = vec4(uintBitsToFloat((v & 0xfu) | 0x4b000000u) - 8388608.0,
            uintBitsToFloat((v & 0xf00u) | 0x47000000u) - 32768.0,
            uintBitsToFloat((u & 0xfu) | 0x4b000000u) - 8388608.0,
            uintBitsToFloat((u & 0xf00u) | 0x47000000u) - 32768.0);
  hi = vec4(uintBitsToFloat((v & 0xf0u) | 0x49000000u) - 524288.0,
            uintBitsToFloat((v & 0xf000u) | 0x45000000u) - 2048.0,
            uintBitsToFloat((u & 0xf0u) | 0x49000000u) - 524288.0,
            uintBitsToFloat((u & 0xf000u) | 0x45000000u) - 2048.0);
}
#define Q4_K_SCALES
#include "quant_blocks.glsl"
#endif

#ifdef Q8_0
// Piece u * 8 + p of a row (clamped to the last; valid says whether it exists): c its index,
// id the granule holding a d (8: none), kq the k of its first quant granule (granule 0, or 1
// after a leading d; granule i != id weighs x[kq + 2 m] and x[kq + 2 m + 1], m = i - (i >
// id)), dbyte the row byte of the d of the block its first granule belongs to.
struct piece_t {
  uint c, id, kq, dbyte;
  bool valid;
};
piece_t piece(uint u, uint pieces) {
  piece_t pp;
  uint c = u * 8u + (gl_LocalInvocationID.x & 7u);
  pp.valid = c < pieces;
  c = min(c, pieces - 1u);
  uint per = c / 17u, j = c - per * 17u;     // 272-byte run of 8 blocks, piece in it
  uint g0 = 8u * j;                          // its first granule in the run
  uint b0 = g0 / 17u, pos0 = g0 - b0 * 17u;  // block and place of that granule
  pp.c = c;
  pp.id = pos0 == 0u ? 0u : 17u - pos0;
  pp.kq = per * 256u + 32u * b0 + (pos0 == 0u ? 0u : 2u * (pos0 - 1u));
  pp.dbyte = per * 272u + 34u * b0;
  return pp;
}
#endif

// Bit 1 of accumulate (vkrt_op_matmul_fused with swiglu, Q4_K): w holds N / 2 gate rows then N / 2 up
// rows; row 2 i of the N this kernel walks is gate row i, row 2 i + 1 up row i, so a
// workgroup's rows come in pairs and it writes dst[i] = silu(gate_i x) (up_i x) itself, the
// swiglu op's own formula on the same sums (the result is the unfused pair's, bit for bit):
// glu(), matvec_push.glsl.
// Bit 2 (vkrt_op_matmul_fused with a norm, Q4_K): x RMS-normalized with weight g first,
//   dst[n] = sum_k w[k, n] x[k] g[k] / sqrt(sum_k x[k]^2 / K + eps)
// the product taken with x g, the scale applied to the row sums (every workgroup sums the
// squares in the same order). x g is staged in shared memory once per workgroup (K up to
// STAGE_MAX_K; beyond, each load of x is multiplied by g in the loop): multiplying in the
// loop cost the Llama-3-8B products more than the dependent step the fusion saves: norm(),
// matvec_push.glsl.
uint w_row_of(uint n) { return glu() ? (n >> 1) + (n & 1u) * (pc.N >> 1) : n; }

#ifndef Q8_0
// The norm's first pass (dynamically uniform: norm() is a push constant): every invocation
// sums the squares of its share of x into squares[] and, where K <= STAGE_MAX_K, stores x g
// into xg; true when the loop reads x g from xg.
bool stage_norm(uint xb, uint tid) {
  if (!norm())
    return false;
  uint n4 = pc.blocks * 64u;
  bool staged = n4 <= STAGE_MAX_K / 4u;
  float t = 0.0;
  for (uint i = tid; i < n4; i += THREADS) {
    vec4 v = x4[(xb >> 2) + i];
    t += dot(v, v);
    if (staged)
      xg[i] = v * g4[(pc.norm_offset >> 2) + i];
  }
  squares[tid] = t;
  barrier();
  return staged;
}
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint warp = tid >> 5, l = tid & 31u, g = l >> 3, p = l & 7u;
  uint row0 = (pc.base_x + gl_WorkGroupID.x) * ROWS;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3;
  uint rows = min(ROWS, pc.N - row0);

  // this lane's rows (past N: the last row, read but not stored), in 16-byte units
  uint row_u4[R];
  for (uint r = 0u; r < R; r++)
    row_u4[r] = (wb + w_row_of(min(4u * r + g, rows - 1u) + row0) * pc.w_row) >> 4;
  float acc[R];
  for (uint r = 0u; r < R; r++)
    acc[r] = 0.0;

#ifdef Q8_0
  uint pieces = pc.blocks * 17u / 8u; // 16-byte pieces per row
  for (uint u0 = warp; u0 * 8u < pieces; u0 += WARPS * U) {
    // loads of U runs first (each: R rows' pieces and d words, 8 pairs of x), then the math
    uvec4 q[U][R];
    float da[U][R];
    vec2 xp[U][8];
    for (uint t = 0u; t < U; t++) {
      piece_t pp = piece(u0 + t * WARPS, pieces);
      for (uint r = 0u; r < R; r++) {
        q[t][r] = w4[row_u4[r] + pp.c];
        uint rb = row_u4[r] * 16u + pp.dbyte;
        da[t][r] = unpackHalf2x16(w[rb >> 2] >> (8u * (rb & 2u))).x;
      }
      uint xi = (xb + pp.kq) >> 1, last = pp.id < 8u ? 6u : 7u;
      for (uint i = 0u; i < 8u; i++)
        xp[t][i] = x2[xi + min(i, last)];
    }
    for (uint t = 0u; t < U; t++) {
      if (U > 1u && (u0 + t * WARPS) * 8u >= pieces)
        break;
      piece_t pp = piece(u0 + t * WARPS, pieces);
      // xa: x of the granules before the d (block b0, its d in an earlier piece), xz: after
      vec2 xa[8], xz[8];
      for (uint i = 0u; i < 8u; i++) {
        vec2 v = xp[t][i > pp.id ? i - 1u : i];
        xa[i] = pp.valid && i < pp.id ? v : vec2(0.0);
        xz[i] = pp.valid && i > pp.id ? v : vec2(0.0);
      }
      for (uint r = 0u; r < R; r++) {
        uint dw = q[t][r][min(pp.id, 7u) >> 1];
        float dz = unpackHalf2x16(dw >> (16u * (pp.id & 1u))).x;
        float sa = 0.0, sz = 0.0;
        for (uint e = 0u; e < 4u; e++) {
          vec4 f = q8_floats(q[t][r][e]);
          sa += dot(f, vec4(xa[2u * e], xa[2u * e + 1u]));
          sz += dot(f, vec4(xz[2u * e], xz[2u * e + 1u]));
        }
        acc[r] += da[t][r] * sa + (pp.id < 8u ? dz * sz : 0.0);
      }
    }
  }
#else
#ifdef SCALES // PREFETCH 1
  // header loaders: invocation t < ROWS * WARPS (whole warps) takes row t / WARPS at
  // super-blocks t % WARPS + WARPS i (clamped to the last)
  bool loader = tid < ROWS * WARPS;
  uint lrow = min(tid / WARPS, ROWS - 1u), lslot = tid % WARPS;
  uint lbase = (wb + w_row_of(min(lrow, rows - 1u) + row0) * pc.w_row) >> 4;
  uvec4 hn = uvec4(0u);
  if (loader) {
    hn = w4[lbase + min(lslot, pc.blocks - 1u) * 9u];
    for (uint j = 0u; j < 4u; j++)
      scl[0][lrow][lslot][j] = pair_scales(hn, 2u * j);
    hn = w4[lbase + min(lslot + WARPS, pc.blocks - 1u) * 9u];
  }
  uvec4 q[2][R];
  for (uint r = 0u; r < R; r++)
    q[0][r] = w4[row_u4[r] + min(warp, pc.blocks - 1u) * 9u + 1u + p];
  bool staged = stage_norm(xb, tid);
  barrier();
  for (uint i = 0u; i < (pc.blocks + WARPS - 1u) / WARPS; i++) {
    bool valid = warp + i * WARPS < pc.blocks;
    uint s = min(warp + i * WARPS, pc.blocks - 1u);
    for (uint r = 0u; r < R; r++)
      q[1][r] = w4[row_u4[r] + min(s + WARPS, pc.blocks - 1u) * 9u + 1u + p];
#else
  uint sub = 2u * (p >> 1);
  // R rows' header and quant unit of super-blocks s, s + WARPS, .. s + PREFETCH WARPS: the
  // loads of the next PREFETCH (0, 1 or 2) super-blocks are in flight while the arithmetic
  // of this one runs (past the end: the last one again, not used)
  uvec4 h[PREFETCH + 1][R], q[PREFETCH + 1][R];
  for (uint i = 0u; i < PREFETCH; i++)
    for (uint r = 0u; r < R; r++) {
      uint base = row_u4[r] + min(warp + i * WARPS, pc.blocks - 1u) * 9u;
      h[i][r] = w4[base];
      q[i][r] = w4[base + 1u + p];
    }
  bool staged = stage_norm(xb, tid); // with the first loads in flight
  for (uint s = warp; s < pc.blocks; s += WARPS) {
    for (uint r = 0u; r < R; r++) {
      uint base = row_u4[r] + min(s + PREFETCH * WARPS, pc.blocks - 1u) * 9u;
      h[PREFETCH][r] = w4[base];
      q[PREFETCH][r] = w4[base + 1u + p];
    }
#endif
    uint xs = s * 64u + 16u * (p >> 1) + 4u * (p & 1u), xi = (xb >> 2) + xs; // x 16-byte aligned
    vec4 xl[4], xh[4];
    if (staged) {
      for (uint i = 0u; i < 4u; i++) {
        xl[i] = xg[xs + i];
        xh[i] = xg[xs + 8u + i];
      }
    } else {
      for (uint i = 0u; i < 4u; i++) {
        xl[i] = x4[xi + i];
        xh[i] = x4[xi + 8u + i];
      }
      if (norm()) { // K past STAGE_MAX_K
        uint gi = (pc.norm_offset >> 2) + xs;
        for (uint i = 0u; i < 4u; i++) {
          xl[i] *= g4[gi + i];
          xh[i] *= g4[gi + 8u + i];
        }
      }
    }
    float sl = dot(xl[0] + xl[1] + xl[2] + xl[3], vec4(1.0));
    float sh = dot(xh[0] + xh[1] + xh[2] + xh[3], vec4(1.0));
    for (uint r = 0u; r < R; r++) {
#ifdef SCALES
      vec4 dm = scl[i & 1u][4u * r + g][warp][p >> 1];
#else
      vec4 dm = pair_scales(h[0][r], sub);
#endif
      float ql = 0.0, qh = 0.0;
      for (uint i = 0u; i < 4u; i++) {
        vec4 lo, hi;
        q4_floats(q[0][r][i], lo, hi);
        ql += dot(lo, xl[i]);
        qh += dot(hi, xh[i]);
      }
#ifdef SCALES
      float t = dm.x * ql - dm.y * sl + dm.z * qh - dm.w * sh;
      acc[r] += valid ? t : 0.0; // a select
#else
      acc[r] += dm.x * ql - dm.y * sl + dm.z * qh - dm.w * sh;
#endif
    }
#ifdef SCALES
    // the next step's scales (its buffer was last read before the previous barrier), then
    // the header of the step after
    if (loader) {
      for (uint j = 0u; j < 4u; j++)
        scl[(i + 1u) & 1u][lrow][lslot][j] = pair_scales(hn, 2u * j);
      hn = w4[lbase + min(lslot + (i + 2u) * WARPS, pc.blocks - 1u) * 9u];
    }
    q[0] = q[1];
    barrier();
#else
    for (uint i = 0u; i < PREFETCH; i++) {
      h[i] = h[i + 1u];
      q[i] = q[i + 1u];
    }
#endif
  }
#endif

  for (uint r = 0u; r < R; r++)
    red[warp * 8u + p][4u * r + g] = acc[r];
  barrier();
  float scale = 1.0;
  if (norm()) {
    float t = 0.0;
    for (uint i = 0u; i < THREADS; i++)
      t += squares[i];
    scale = inversesqrt(t / float(pc.blocks * 256u) + pc.eps);
  }
  if (glu()) {
    if (2u * tid < rows) {
      float sg = 0.0, su = 0.0;
      for (uint i = 0u; i < WARPS * 8u; i++) {
        sg += red[i][2u * tid];
        su += red[i][2u * tid + 1u];
      }
      uint at = pc.d_offset + (row0 / 2u + tid) * pc.d_stride0 + i2 * pc.d_stride2 + i3 * pc.d_stride3;
      sg *= scale;
      su *= scale;
      d[at] = sg / (1.0 + exp(-sg)) * su;
    }
    return;
  }
  if (tid < rows) {
    float s = 0.0;
    for (uint i = 0u; i < WARPS * 8u; i++)
      s += red[i][tid];
    uint at = pc.d_offset + (row0 + tid) * pc.d_stride0 + i2 * pc.d_stride2 + i3 * pc.d_stride3;
    s *= scale;
    d[at] = (pc.accumulate & 1u) != 0u ? d[at] + s : s;
  }
}
