#version 450
// Tiled matmul (ggml mul_mat): dst[n, m] = sum_k w[k, n] * x[k, m] per batch (i2, i3), w
// broadcast over batches (r2 = x.ne2 / w.ne2, r3 = x.ne3 / w.ne3); w f32, f16, Q8_0 or Q4_K
// (W_F32, W_F16, W_Q8_0, W_Q4_K), x and dst f32.
// A workgroup owns a tile of BM rows of w (n) by BN columns of x (m) and walks K in steps of
// BK = 32: each step stages the w slice (dequantized: one Q8_0 block, one Q4_K sub-block per
// row) and the x slice in shared memory, k innermost, in units of 8 consecutive k of one row
// or column (consecutive invocations take consecutive units: coalesced loads), then
//  - portable: invocation (tx, ty) accumulates the RM x RN outputs of rows tx + TN i and
//    columns ty + TM j (TN = BM / RM invocations along n, so stores of consecutive
//    invocations are consecutive in dst), reading shared memory as vec4 along k (row pitch
//    BK + 4 floats: the 8 invocations of each 128-bit phase hit distinct banks);
//  - COOPMAT (VK_NV_cooperative_matrix; f16 tiles, pitch BK + 8 halves): subgroup s of
//    WARPS_N x WARPS_M owns TILES_N x TILES_M 16x16 f32 accumulators, fed by 16x16x16 f16
//    products; results go through a per-subgroup 16x16 scratch to dst.
// Loads: w_vec says rows of f32/f16 w are 16-byte aligned and K a multiple of 8 (units as
// two vec4 / one uvec4), else per-element loads at any strides; x_vec the same for x (dense
// along K, columns 16-byte aligned). Q8_0 rows start 2-byte aligned, Q4_K rows 4-byte
// aligned (read as words), K a multiple of the block. Out of range rows, columns and k load
// as zero; only dst elements inside N x M are written.
// Offsets and strides are elements (quantized w: bytes). base_* carry the grid split.
// Specialization constants: 0 workgroup size, 1 BM, 2 BN, 3 RM (COOPMAT: WARPS_M).
#extension GL_GOOGLE_include_directive : require
#ifdef COOPMAT
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#endif

layout(local_size_x_id = 0, local_size_x = 256) in;
layout(constant_id = 1) const uint BM = 64u;
layout(constant_id = 2) const uint BN = 64u;
layout(constant_id = 3) const uint RM = 4u;
const uint WG = gl_WorkGroupSize.x;
#define BK 32u
#define UNITS (BK / 8u) // units of 8 k per row of a slice

layout(push_constant) uniform Push {
  uint K, N, M;
  uint w_stride[4];
  uint x_stride[4];
  uint d_stride[4];
  uint w_offset, x_offset, d_offset;
  uint ne2, r2, r3;
  uint accumulate;  // 1: dst += result (vkrt_op_matmul_add)
  uint w_vec, x_vec;
  uint base_x, base_y, base_z;
} pc;

#ifdef W_F32
layout(std430, set = 0, binding = 0) readonly buffer W { float w[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
layout(std430, set = 0, binding = 3) readonly buffer X4 { vec4 x4[]; };
#if defined(W_F32)
layout(std430, set = 0, binding = 4) readonly buffer W4 { vec4 w4[]; };
#elif defined(W_F16)
layout(std430, set = 0, binding = 4) readonly buffer W4 { uvec4 w4[]; };
#endif

#ifdef W_Q4_K
#define Q4_K_SCALES
#include "quant_blocks.glsl"
#endif

#ifdef COOPMAT
#define PITCH (BK + 8u) // halves; a multiple of 8 (16-byte rows for the matrix loads)
shared float16_t ws[BM * PITCH];
shared float16_t xs[BN * PITCH];
const uint SUBGROUPS = WG / 32u; // the host takes this path on 32-wide subgroups only
const uint WARPS_M = RM;
const uint WARPS_N = SUBGROUPS / WARPS_M;
const uint TILES_N = BM / 16u / WARPS_N;
const uint TILES_M = BN / 16u / WARPS_M;
shared float scratch[SUBGROUPS * 256u];
void store_unit(bool is_w, uint row, uint q, vec4 lo, vec4 hi) {
  uint o = row * PITCH + 8u * q;
  for (uint i = 0u; i < 4u; i++) {
    if (is_w) {
      ws[o + i] = float16_t(lo[i]);
      ws[o + 4u + i] = float16_t(hi[i]);
    } else {
      xs[o + i] = float16_t(lo[i]);
      xs[o + 4u + i] = float16_t(hi[i]);
    }
  }
}
#else
#define PITCH4 (BK / 4u + 1u) // vec4 per row: BK + 4 floats
shared vec4 ws[BM * PITCH4];
shared vec4 xs[BN * PITCH4];
const uint TN = BM / RM;      // invocations along n
const uint TM = WG / TN;      // ... along m
const uint RN = BN / TM;      // columns per invocation
void store_unit(bool is_w, uint row, uint q, vec4 lo, vec4 hi) {
  uint o = row * PITCH4 + 2u * q;
  if (is_w) {
    ws[o] = lo;
    ws[o + 1u] = hi;
  } else {
    xs[o] = lo;
    xs[o + 1u] = hi;
  }
}
#endif

#if defined(W_F16) || defined(W_Q8_0)
float half_at(uint h) { // f16 at half index h of the binding
  vec2 p = unpackHalf2x16(w[h >> 1]);
  return (h & 1u) != 0u ? p.y : p.x;
}
#endif

// 8 weights k .. k + 7 of row n (n < N, k < K, k % 8 == 0) starting at element/byte wb
void load_w_unit(uint wb, uint n, uint k, out vec4 lo, out vec4 hi) {
#if defined(W_F32) || defined(W_F16)
  uint e = wb + n * pc.w_stride[1];
  if (pc.w_vec != 0u) {
#ifdef W_F32
    lo = w4[(e + k) >> 2];
    hi = w4[((e + k) >> 2) + 1u];
#else
    uvec4 v = w4[(e + k) >> 3];
    lo = vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y));
    hi = vec4(unpackHalf2x16(v.z), unpackHalf2x16(v.w));
#endif
    return;
  }
  float v[8];
  for (uint i = 0u; i < 8u; i++) {
    uint kk = k + i, a = e + kk * pc.w_stride[0];
#ifdef W_F32
    v[i] = kk < pc.K ? w[a] : 0.0;
#else
    v[i] = kk < pc.K ? half_at(a) : 0.0;
#endif
  }
  lo = vec4(v[0], v[1], v[2], v[3]);
  hi = vec4(v[4], v[5], v[6], v[7]);
#elif defined(W_Q8_0)
  // block k / 32 (34 bytes: f16 d, 32 int8), quants 8 (k % 32) / 8 .. + 7
  uint blk = wb + n * pc.w_stride[1] + 34u * (k >> 5);
  uint s = blk + 2u + (k & 31u); // first quant byte, even
  uint w0 = s >> 2;
  bool shifted = (s & 2u) != 0u;
  uint a0 = w[w0], a1 = w[w0 + 1u], a2 = w[shifted ? w0 + 2u : w0 + 1u];
  uint q0 = shifted ? (a0 >> 16u) | (a1 << 16u) : a0;
  uint q1 = shifted ? (a1 >> 16u) | (a2 << 16u) : a1;
  float dd = half_at(blk >> 1);
  ivec4 b0 = ivec4(int(q0) << 24, int(q0) << 16, int(q0) << 8, int(q0)) >> 24;
  ivec4 b1 = ivec4(int(q1) << 24, int(q1) << 16, int(q1) << 8, int(q1)) >> 24;
  lo = dd * vec4(b0);
  hi = dd * vec4(b1);
#else // W_Q4_K
  // super-block k / 256 (144 bytes: f16 d, f16 dmin, 12 scale bytes, 128 quant bytes);
  // sub-block j = (k % 256) / 32 is the low (j even) or high nibble of the 32 bytes at
  // 16 + 32 (j / 2), weight l of it in byte l
  uint sb = wb + n * pc.w_stride[1] + 144u * (k >> 8);
  uint e = k & 255u, j = e >> 5;
  uint wq = (sb + 16u + 32u * (j >> 1) + (e & 31u)) >> 2;
  uint v0 = w[wq], v1 = w[wq + 1u];
  uint sh = 4u * (j & 1u);
  uvec4 hdr = uvec4(w[sb >> 2], w[(sb >> 2) + 1u], w[(sb >> 2) + 2u], w[(sb >> 2) + 3u]);
  vec4 ps = pair_scales(hdr, j & ~1u);
  vec2 sm = (j & 1u) != 0u ? ps.zw : ps.xy; // (d sc, dmin m)
  uvec4 n0 = (uvec4(v0) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u;
  uvec4 n1 = (uvec4(v1) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u;
  lo = sm.x * vec4(n0) - sm.y;
  hi = sm.x * vec4(n1) - sm.y;
#endif
}

void load_x_unit(uint xb, uint m, uint k, out vec4 lo, out vec4 hi) {
  uint e = xb + m * pc.x_stride[1];
  if (pc.x_vec != 0u) {
    lo = x4[(e + k) >> 2];
    hi = x4[((e + k) >> 2) + 1u];
    return;
  }
  float v[8];
  for (uint i = 0u; i < 8u; i++) {
    uint kk = k + i;
    v[i] = kk < pc.K ? x[e + kk * pc.x_stride[0]] : 0.0;
  }
  lo = vec4(v[0], v[1], v[2], v[3]);
  hi = vec4(v[4], v[5], v[6], v[7]);
}

void store_d(uint db, uint n, uint m, float v) {
  if (n < pc.N && m < pc.M) {
    uint di = db + n * pc.d_stride[0] + m * pc.d_stride[1];
    d[di] = pc.accumulate != 0u ? d[di] + v : v;
  }
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint n0 = (pc.base_x + gl_WorkGroupID.x) * BM;
  uint m0 = (pc.base_y + gl_WorkGroupID.y) * BN;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride[2] + (i3 / pc.r3) * pc.w_stride[3];
  uint xb = pc.x_offset + i2 * pc.x_stride[2] + i3 * pc.x_stride[3];
  uint db = pc.d_offset + i2 * pc.d_stride[2] + i3 * pc.d_stride[3];

#ifdef COOPMAT
  uint sg = gl_SubgroupID;
  uint wn = sg % WARPS_N, wm = sg / WARPS_N;
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TILES_N * TILES_M];
  for (uint i = 0u; i < TILES_N * TILES_M; i++)
    acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#else
  uint tx = tid % TN, ty = tid / TN;
  float acc[RM * RN];
  for (uint i = 0u; i < RM * RN; i++)
    acc[i] = 0.0;
#endif

  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
    for (uint u = tid; u < BM * UNITS; u += WG) {
      uint r = u / UNITS, q = u % UNITS;
      uint n = n0 + r, k = k0 + 8u * q;
      vec4 lo = vec4(0.0), hi = vec4(0.0);
      if (n < pc.N && k < pc.K)
        load_w_unit(wb, n, k, lo, hi);
      store_unit(true, r, q, lo, hi);
    }
    for (uint u = tid; u < BN * UNITS; u += WG) {
      uint c = u / UNITS, q = u % UNITS;
      uint m = m0 + c, k = k0 + 8u * q;
      vec4 lo = vec4(0.0), hi = vec4(0.0);
      if (m < pc.M && k < pc.K)
        load_x_unit(xb, m, k, lo, hi);
      store_unit(false, c, q, lo, hi);
    }
    barrier();
#ifdef COOPMAT
    for (uint kk = 0u; kk < BK; kk += 16u) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[TILES_N];
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> b[TILES_M];
      for (uint i = 0u; i < TILES_N; i++)
        coopMatLoadNV(a[i], ws, ((wn * TILES_N + i) * 16u) * PITCH + kk, PITCH, false);
      for (uint j = 0u; j < TILES_M; j++) // column-major K x 16: column c at c * PITCH
        coopMatLoadNV(b[j], xs, ((wm * TILES_M + j) * 16u) * PITCH + kk, PITCH, true);
      for (uint i = 0u; i < TILES_N; i++)
        for (uint j = 0u; j < TILES_M; j++)
          acc[i * TILES_M + j] = coopMatMulAddNV(a[i], b[j], acc[i * TILES_M + j]);
    }
#else
    for (uint k4 = 0u; k4 < BK / 4u; k4++) {
      vec4 a[RM], b[RN];
      for (uint i = 0u; i < RM; i++)
        a[i] = ws[(tx + TN * i) * PITCH4 + k4];
      for (uint j = 0u; j < RN; j++)
        b[j] = xs[(ty + TM * j) * PITCH4 + k4];
      for (uint i = 0u; i < RM; i++)
        for (uint j = 0u; j < RN; j++)
          acc[i * RN + j] += dot(a[i], b[j]);
    }
#endif
    barrier();
  }

#ifdef COOPMAT
  // each 16x16 accumulator column-major (n fastest) into the subgroup's scratch, then out
  uint lane = gl_SubgroupInvocationID;
  for (uint i = 0u; i < TILES_N; i++)
    for (uint j = 0u; j < TILES_M; j++) {
      coopMatStoreNV(acc[i * TILES_M + j], scratch, sg * 256u, 16u, true);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      uint nb = n0 + (wn * TILES_N + i) * 16u, mb = m0 + (wm * TILES_M + j) * 16u;
      for (uint e = lane; e < 256u; e += 32u)
        store_d(db, nb + (e & 15u), mb + (e >> 4), scratch[sg * 256u + e]);
      subgroupBarrier();
    }
#else
  for (uint i = 0u; i < RM; i++)
    for (uint j = 0u; j < RN; j++)
      store_d(db, n0 + tx + TN * i, m0 + ty + TM * j, acc[i * RN + j]);
#endif
}
