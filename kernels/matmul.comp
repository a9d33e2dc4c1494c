#version 450
// Tiled matmul (ggml mul_mat): dst[n, m] = sum_k w[k, n] * x[k, m] per batch (i2, i3), w
// broadcast over batches (r2 = x.ne2 / w.ne2, r3 = x.ne3 / w.ne3); w f32, f16, Q8_0, Q4_K or
// Q6_K (W_F32, W_F16, W_Q8_0, W_Q4_K, W_Q6_K), x and dst f32.
// A workgroup owns a tile of BM rows of w (n) by BN columns of x (m) and walks K in steps of
// BK: each step stages the w slice (dequantized) and the x slice in shared memory, k
// innermost, in units of 8 consecutive k of one row or column (consecutive invocations take
// consecutive units: coalesced loads). The next step's units are loaded into registers while
// the current step is multiplied (raw words for quantized w, decoded when stored), so the
// global loads' latency hides behind the arithmetic. Then
//  - portable: invocation (tx, ty) accumulates the RM x RN outputs of rows tx + TN i and
//    columns ty + TM j (TN = BM / RM invocations along n, so stores of consecutive
//    invocations are consecutive in dst), reading shared memory as vec4 along k (row pitch
//    BK + 4 floats: the 8 invocations of each 128-bit phase hit distinct banks);
//  - COOPMAT (VK_NV_cooperative_matrix; tiles of f16 stored as 16-byte units, row pitch
//    BK + 8 halves so the 8 rows of each matrix-load phase hit distinct banks): subgroup s
//    of WARPS_N x WARPS_M owns TILES_N x TILES_M 16x16 f32 accumulators, fed by 16x16x16 f16
//    products; whole 16x16 results go straight to dst where d_vec says dst allows it, the
//    others through a per-subgroup 16x16 scratch in the w buffers.
// Loads: w_vec says rows of f32/f16 w are 16-byte aligned and K a multiple of 8 (units as
// two vec4 / one uvec4), else per-element loads at any strides; x_vec the same for x (dense
// along K, columns 16-byte aligned). Q8_0 and Q6_K rows start 2-byte aligned, Q4_K rows
// 4-byte aligned (read as words), K a multiple of the block. Out of range rows, columns and k load
// as zero; only dst elements inside N x M are written. d_vec: dst dense along N, columns
// and the binding 16-byte aligned, no accumulation.
// Offsets and strides are elements (quantized w: bytes). base_* carry the grid split.
// Split K (splits > 1): the grid's z runs over batches x splits (the split fastest); split s
// sums k in [s k_chunk, (s + 1) k_chunk) (k_chunk a multiple of BK) into dst + s d_split, a
// scratch the host then reduces: a workgroup's chain of dependent k steps is what bounds a
// grid that does not fill the device.
// Specialization constants: 0 workgroup size, 1 BM, 2 BN, 3 RM (COOPMAT: WARPS_M), 4 BK (a
// multiple of 32), 5 STAGES (1: one shared-memory buffer, the next step's loads in flight
// during the multiply; 2: two buffers and two register sets, each step's loads issued two
// steps ahead, one barrier a step), 6 PARTS (0; the lab times the kernel's parts apart
// with 1: no multiply, 2: no loads after the first step, each giving wrong results), 7 X16
// (COOPMAT: 1 when x comes already rounded to f16 at binding 3, dense along K with K a
// multiple of 8, strides in halves: a unit is one 16-byte load and no conversion, half the
// bytes per step of f32 x), 8 ORDER (0: workgroups x-fastest; w: in strips of w row tiles,
// all of a strip's column tiles together, sharing its w rows in L2: tile_order.glsl).
// W16_COPY: not the matmul but quantized w dequantized into dense f16 for the f16 tiles (the
// host's w16 path): one invocation per unit of 8 weights, the tiles' own decode, one
// 16-byte store into binding 1 at unit d_offset / 8 + (batch N + n) K / 8 + k / 8.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
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
layout(constant_id = 4) const uint BK = 32u;
layout(constant_id = 5) const uint STAGES = 1u; // shared-memory buffers (1 or 2)
layout(constant_id = 6) const uint PARTS = 0u;  // 0: the whole kernel (lab: 1, 2 above)
layout(constant_id = 7) const uint X16 = 0u;    // COOPMAT: x as f16 units at binding 3
layout(constant_id = 8) const uint ORDER = 0u;  // tile order: strips of ORDER row tiles
const uint WG = gl_WorkGroupSize.x;
const uint UNITS = BK / 8u; // units of 8 k per row of a slice
const uint W_UNITS = BM * UNITS, X_UNITS = BN * UNITS;
const uint W_PER = (W_UNITS + WG - 1u) / WG; // units per invocation
const uint X_PER = (X_UNITS + WG - 1u) / WG;

layout(push_constant) uniform Push {
  uint K, N, M;
  uint w_stride[4];
  uint x_stride[4];
  uint d_stride[4];
  uint w_offset, x_offset, d_offset;
  uint ne2, r2, r3;
  uint accumulate;  // 1: dst += result (vkrt_op_matmul_add)
  uint w_vec, x_vec, d_vec;
  uint splits, k_chunk, d_split; // split K: 1, K, 0 when not split
  uint base_x, base_y, base_z;
} pc;

#ifdef W_F32
layout(std430, set = 0, binding = 0) readonly buffer W { float w[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#endif
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
#ifdef W16_COPY
layout(std430, set = 0, binding = 1) writeonly buffer D16 { uvec4 d16[]; };
#endif
layout(std430, set = 0, binding = 3) readonly buffer X4 { vec4 x4[]; };
#ifdef COOPMAT
layout(std430, set = 0, binding = 3) readonly buffer XH { uvec4 x16[]; }; // X16: f16 x
#endif
#if defined(W_F32)
layout(std430, set = 0, binding = 4) readonly buffer W4 { vec4 w4[]; };
#elif defined(W_F16)
layout(std430, set = 0, binding = 4) readonly buffer W4 { uvec4 w4[]; };
#endif

#ifdef W_Q4_K
#define Q4_K_SCALES
#include "quant_blocks.glsl"
#endif
#ifdef W_Q6_K
#define Q6_K_QUANTS
#include "quant_blocks.glsl"
#endif
#include "tile_order.glsl"

uvec4 pack8(vec4 lo, vec4 hi) {
  return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
}

#ifdef COOPMAT
#define PV (BK / 8u + 1u) // 16-byte units per row: BK + 8 halves
shared uvec4 ws[STAGES * BM * PV];
shared uvec4 xs[STAGES * BN * PV];
const uint SUBGROUPS = WG / 32u; // the host takes this path on 32-wide subgroups only
const uint WARPS_M = RM;
const uint WARPS_N = SUBGROUPS / WARPS_M;
const uint TILES_N = BM / 16u / WARPS_N;
const uint TILES_M = BN / 16u / WARPS_M;
// Results that cannot go straight to dst pass through the w buffers once the last step is
// multiplied: 256 floats (64 units) a subgroup, which the host checks fit them.
#else
#define PITCH4 (BK / 4u + 1u) // vec4 per row: BK + 4 floats
shared vec4 ws[STAGES * BM * PITCH4];
shared vec4 xs[STAGES * BN * PITCH4];
const uint TN = BM / RM;      // invocations along n
const uint TM = WG / TN;      // ... along m
const uint RN = BN / TM;      // columns per invocation
#endif

#if defined(W_F16) || defined(W_Q8_0)
float half_at(uint h) { // f16 at half index h of the binding
  vec2 p = unpackHalf2x16(w[h >> 1]);
  return (h & 1u) != 0u ? p.y : p.x;
}
#endif

// The words one unit of w is decoded from (8 weights k .. k + 7 of row n, k % 8 == 0),
// loaded ahead of use: f32 the values' bits (a: k .. k + 3, b: k + 4 .. k + 7); f16 the
// 8 halves packed in a; Q8_0 in a three quant words and the scale's word; Q4_K in a.xy two
// quant words and in b the super-block's header (d and dmin, 12 scale bytes); Q6_K in a.xyz
// and a.w b.xy the three words around the 8 bytes of ql and of qh (Q6_K_QUANTS), in b.z the
// word of the unit's scale and in b.w that of d.
struct Raw {
  uvec4 a, b;
};

Raw load_w_raw(uint wb, uint n, uint k) { // n < N, k < K
  Raw r;
  r.a = uvec4(0u);
  r.b = uvec4(0u);
#if defined(W_F32) || defined(W_F16)
  uint e = wb + n * pc.w_stride[1];
  if (pc.w_vec != 0u) {
#ifdef W_F32
    r.a = floatBitsToUint(w4[(e + k) >> 2]);
    r.b = floatBitsToUint(w4[((e + k) >> 2) + 1u]);
#else
    r.a = w4[(e + k) >> 3];
#endif
    return r;
  }
  float v[8];
  [[unroll]] for (uint i = 0u; i < 8u; i++) {
    uint kk = k + i, a = e + kk * pc.w_stride[0];
#ifdef W_F32
    v[i] = kk < pc.K ? w[a] : 0.0;
#else
    v[i] = kk < pc.K ? half_at(a) : 0.0;
#endif
  }
#ifdef W_F32
  r.a = floatBitsToUint(vec4(v[0], v[1], v[2], v[3]));
  r.b = floatBitsToUint(vec4(v[4], v[5], v[6], v[7]));
#else
  r.a = uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])),
              packHalf2x16(vec2(v[4], v[5])), packHalf2x16(vec2(v[6], v[7])));
#endif
#elif defined(W_Q8_0)
  // block k / 32 (34 bytes: f16 d, 32 int8), quants 8 (k % 32) / 8 .. + 7
  uint blk = wb + n * pc.w_stride[1] + 34u * (k >> 5);
  uint s = blk + 2u + (k & 31u); // first quant byte, even
  uint w0 = s >> 2;
  r.a = uvec4(w[w0], w[w0 + 1u], w[(s & 2u) != 0u ? w0 + 2u : w0 + 1u], w[blk >> 2]);
#elif defined(W_Q4_K)
  // super-block k / 256 (144 bytes: f16 d, f16 dmin, 12 scale bytes, 128 quant bytes);
  // sub-block j = (k % 256) / 32 is the low (j even) or high nibble of the 32 bytes at
  // 16 + 32 (j / 2), weight l of it in byte l
  uint sb = wb + n * pc.w_stride[1] + 144u * (k >> 8);
  uint e = k & 255u, j = e >> 5;
  uint wq = (sb + 16u + 32u * (j >> 1) + (e & 31u)) >> 2;
  r.a = uvec4(w[wq], w[wq + 1u], 0u, 0u);
  r.b = uvec4(w[sb >> 2], w[(sb >> 2) + 1u], w[(sb >> 2) + 2u], w[(sb >> 2) + 3u]);
#else // W_Q6_K
  // super-block k / 256 (210 bytes: ql[128], qh[64], int8 scales[16], f16 d): weight
  // 32 j + l of half h (l % 8 == 0 for a unit) is in ql byte 64 h + 32 (j % 2) + l, qh byte
  // 128 + 32 h + l, scale 192 + 8 h + l / 16 + 2 j; every offset in the block is even and
  // a multiple of 4 from its start, so the block's phase says how each 8 bytes lie
  uint sb = wb + n * pc.w_stride[1] + 210u * (k >> 8);
  uint e = k & 255u, h = e >> 7, j = (e >> 5) & 3u, l = e & 31u;
  bool odd = (sb & 2u) != 0u;
  uint wl = (sb + 64u * h + 32u * (j & 1u) + l) >> 2, wh = (sb + 128u + 32u * h + l) >> 2;
  r.a = uvec4(w[wl], w[wl + 1u], w[odd ? wl + 2u : wl + 1u], w[wh]);
  r.b = uvec4(w[wh + 1u], w[odd ? wh + 2u : wh + 1u],
              w[(sb + 192u + 8u * h + (l >> 4) + 2u * j) >> 2], w[(sb + 208u) >> 2]);
#endif
  return r;
}

// The 8 weights of a unit from its words (all-zero words decode to zeros).
void decode_w(Raw r, uint wb, uint n, uint k, out vec4 lo, out vec4 hi) {
#if defined(W_F32)
  lo = uintBitsToFloat(r.a);
  hi = uintBitsToFloat(r.b);
#elif defined(W_F16)
  lo = vec4(unpackHalf2x16(r.a.x), unpackHalf2x16(r.a.y));
  hi = vec4(unpackHalf2x16(r.a.z), unpackHalf2x16(r.a.w));
#elif defined(W_Q8_0)
  uint blk = wb + n * pc.w_stride[1] + 34u * (k >> 5);
  bool shifted = ((blk + 2u + (k & 31u)) & 2u) != 0u;
  uint q0 = shifted ? (r.a.x >> 16u) | (r.a.y << 16u) : r.a.x;
  uint q1 = shifted ? (r.a.y >> 16u) | (r.a.z << 16u) : r.a.y;
  float dd = unpackHalf2x16((blk & 2u) != 0u ? r.a.w >> 16u : r.a.w).x;
  ivec4 b0 = ivec4(int(q0) << 24, int(q0) << 16, int(q0) << 8, int(q0)) >> 24;
  ivec4 b1 = ivec4(int(q1) << 24, int(q1) << 16, int(q1) << 8, int(q1)) >> 24;
  lo = dd * vec4(b0);
  hi = dd * vec4(b1);
#elif defined(W_Q4_K)
  uint j = (k & 255u) >> 5;
  vec4 ps = pair_scales(r.b, j & ~1u);
  vec2 sm = (j & 1u) != 0u ? ps.zw : ps.xy; // (d sc, dmin m)
  uint sh = 4u * (j & 1u);
  uvec4 n0 = (uvec4(r.a.x) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u;
  uvec4 n1 = (uvec4(r.a.y) >> (uvec4(0u, 8u, 16u, 24u) + sh)) & 15u;
  lo = sm.x * vec4(n0) - sm.y;
  hi = sm.x * vec4(n1) - sm.y;
#else // W_Q6_K
  uint sb = wb + n * pc.w_stride[1] + 210u * (k >> 8);
  uint e = k & 255u, h = e >> 7, j = (e >> 5) & 3u, l = e & 31u;
  bool odd = (sb & 2u) != 0u;
  uvec2 ql = q6_words(r.a.x, r.a.y, r.a.z, odd), qh = q6_words(r.a.w, r.b.x, r.b.y, odd);
  uint sbyte = sb + 192u + 8u * h + (l >> 4) + 2u * j, db = sb + 208u;
  float dd = unpackHalf2x16(r.b.w >> (8u * (db & 2u))).x;
  float ds = dd * float(bitfieldExtract(int(r.b.z), int(8u * (sbyte & 3u)), 8)); // as ggml: d sc q
  lo = ds * q6_floats(q6_quants(ql.x, qh.x, j));
  hi = ds * q6_floats(q6_quants(ql.y, qh.y, j));
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
  [[unroll]] for (uint i = 0u; i < 8u; i++) {
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

// The units of step k0 into register set `set` (zeros outside w and x); two sets with two
// buffers. `set` is a constant where it is called (the loop is unrolled by two), so the
// arrays stay in registers.
Raw wr[STAGES * W_PER];
vec4 xl[STAGES * X_PER], xh[STAGES * X_PER];
#ifdef COOPMAT
uvec4 xr[STAGES * X_PER]; // X16
#endif
void fetch(uint set, uint wb, uint xb, uint n0, uint m0, uint k0) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0u; i < W_PER; i++) {
    uint u = tid + i * WG, n = n0 + u / UNITS, k = k0 + 8u * (u % UNITS), s = set * W_PER + i;
    wr[s].a = wr[s].b = uvec4(0u);
    if (u < W_UNITS && n < pc.N && k < pc.K)
      wr[s] = load_w_raw(wb, n, k);
  }
  [[unroll]] for (uint i = 0u; i < X_PER; i++) {
    uint u = tid + i * WG, m = m0 + u / UNITS, k = k0 + 8u * (u % UNITS), s = set * X_PER + i;
#ifdef COOPMAT
    if (X16 != 0u) {
      xr[s] = uvec4(0u);
      if (u < X_UNITS && m < pc.M && k < pc.K)
        xr[s] = x16[(xb + m * pc.x_stride[1] + k) >> 3];
      continue;
    }
#endif
    xl[s] = xh[s] = vec4(0.0);
    if (u < X_UNITS && m < pc.M && k < pc.K)
      load_x_unit(xb, m, k, xl[s], xh[s]);
  }
}

// Register set `set` (step k0) into shared-memory buffer `buf`, w decoded (f16 through
// cooperative matrices as it came).
void store(uint set, uint buf, uint wb, uint n0, uint k0) {
  uint tid = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0u; i < W_PER; i++) {
    uint u = tid + i * WG, r = u / UNITS, q = u % UNITS, s = set * W_PER + i;
    if (u < W_UNITS) {
#if defined(COOPMAT) && defined(W_F16)
      ws[(buf * BM + r) * PV + q] = wr[s].a;
#else
      vec4 lo, hi;
      decode_w(wr[s], wb, n0 + r, k0 + 8u * q, lo, hi);
#ifdef COOPMAT
      ws[(buf * BM + r) * PV + q] = pack8(lo, hi);
#else
      ws[(buf * BM + r) * PITCH4 + 2u * q] = lo;
      ws[(buf * BM + r) * PITCH4 + 2u * q + 1u] = hi;
#endif
#endif
    }
  }
  [[unroll]] for (uint i = 0u; i < X_PER; i++) {
    uint u = tid + i * WG, c = u / UNITS, q = u % UNITS, s = set * X_PER + i;
    if (u < X_UNITS) {
#ifdef COOPMAT
      xs[(buf * BN + c) * PV + q] = X16 != 0u ? xr[s] : pack8(xl[s], xh[s]);
#else
      xs[(buf * BN + c) * PITCH4 + 2u * q] = xl[s];
      xs[(buf * BN + c) * PITCH4 + 2u * q + 1u] = xh[s];
#endif
    }
  }
}

#ifdef COOPMAT
fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[TILES_N * TILES_M];
// The step in buffer `buf` into the subgroup's accumulators (wn, wm: its place in the tile).
void multiply(uint buf, uint wn, uint wm) {
  [[unroll]] for (uint kk = 0u; kk < BK / 16u; kk++) {
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a[TILES_N];
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> b[TILES_M];
    [[unroll]] for (uint i = 0u; i < TILES_N; i++)
      coopMatLoadNV(a[i], ws, (buf * BM + (wn * TILES_N + i) * 16u) * PV + 2u * kk, PV, false);
    [[unroll]] for (uint j = 0u; j < TILES_M; j++) // column-major K x 16: column c at c * PV
      coopMatLoadNV(b[j], xs, (buf * BN + (wm * TILES_M + j) * 16u) * PV + 2u * kk, PV, true);
    [[unroll]] for (uint i = 0u; i < TILES_N; i++)
      [[unroll]] for (uint j = 0u; j < TILES_M; j++)
        acc[i * TILES_M + j] = coopMatMulAddNV(a[i], b[j], acc[i * TILES_M + j]);
  }
}
#else
float acc[RM * RN];
// The step in buffer `buf` into the invocation's RM x RN outputs (rows tx + TN i, columns
// ty + TM j).
void multiply(uint buf, uint tx, uint ty) {
  [[unroll]] for (uint k4 = 0u; k4 < BK / 4u; k4++) {
    vec4 a[RM], b[RN];
    [[unroll]] for (uint i = 0u; i < RM; i++)
      a[i] = ws[(buf * BM + tx + TN * i) * PITCH4 + k4];
    [[unroll]] for (uint j = 0u; j < RN; j++)
      b[j] = xs[(buf * BN + ty + TM * j) * PITCH4 + k4];
    [[unroll]] for (uint i = 0u; i < RM; i++)
      [[unroll]] for (uint j = 0u; j < RN; j++)
        acc[i * RN + j] = fma(a[i].w, b[j].w, fma(a[i].z, b[j].z,
                          fma(a[i].y, b[j].y, fma(a[i].x, b[j].x, acc[i * RN + j]))));
  }
}
#endif

#ifdef COOPMAT
#define MULTIPLY(buf) multiply(buf, wn, wm)
#else
#define MULTIPLY(buf) multiply(buf, tx, ty)
#endif

#ifdef W16_COPY
void main() {
  uint units = pc.K / 8u; // K a multiple of the block
  uint u = (pc.base_x + gl_WorkGroupID.x) * WG + gl_LocalInvocationID.x;
  uint n = u / units, q = u - n * units;
  if (n >= pc.N)
    return;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint wb = pc.w_offset + (z % pc.ne2) * pc.w_stride[2] + (z / pc.ne2) * pc.w_stride[3];
  vec4 lo, hi;
  decode_w(load_w_raw(wb, n, 8u * q), wb, n, 8u * q, lo, hi);
  d16[pc.d_offset / 8u + (z * pc.N + n) * units + q] = pack8(lo, hi);
}
#else
void main() {
  uint tid = gl_LocalInvocationID.x;
  uvec2 tile = tile_order_strips(ORDER);
  uint n0 = (pc.base_x + tile.x) * BM;
  uint m0 = (pc.base_y + tile.y) * BN;
  uint zs = pc.base_z + gl_WorkGroupID.z;
  uint split = zs % pc.splits, z = zs / pc.splits;
  uint kb = split * pc.k_chunk, ke = min(pc.K, kb + pc.k_chunk);
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride[2] + (i3 / pc.r3) * pc.w_stride[3];
  uint xb = pc.x_offset + i2 * pc.x_stride[2] + i3 * pc.x_stride[3];
  uint db = pc.d_offset + i2 * pc.d_stride[2] + i3 * pc.d_stride[3] + split * pc.d_split;

#ifdef COOPMAT
  uint sg = gl_SubgroupID;
  uint wn = sg % WARPS_N, wm = sg / WARPS_N;
  [[unroll]] for (uint i = 0u; i < TILES_N * TILES_M; i++)
    acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
#else
  uint tx = tid % TN, ty = tid / TN;
  [[unroll]] for (uint i = 0u; i < RM * RN; i++)
    acc[i] = 0.0;
#endif

  // One buffer: the next step's loads in flight during the multiply, then barrier, store,
  // barrier. Two: a step's loads are issued two steps ahead, into the register set the
  // step before freed, and stored into the other buffer after the multiply, one barrier a
  // step (the loop unrolled by two keeps the sets' indices constant).
  fetch(0u, wb, xb, n0, m0, kb);
  store(0u, 0u, wb, n0, kb);
  bool loads = (PARTS & 2u) == 0u;
  if (STAGES == 2u && kb + BK < ke)
    fetch(1u, wb, xb, n0, m0, kb + BK);
  barrier();
  for (uint k2 = kb; k2 < ke; k2 += 2u * BK) {
    [[unroll]] for (uint h = 0u; h < 2u; h++) {
      uint k0 = k2 + h * BK;
      if (k0 >= ke)
        break;
      bool next = k0 + BK < ke && loads;
      if (STAGES == 1u) {
        if (next)
          fetch(0u, wb, xb, n0, m0, k0 + BK);
        if ((PARTS & 1u) == 0u)
          MULTIPLY(0u);
        barrier();
        if (next) {
          store(0u, 0u, wb, n0, k0 + BK);
          barrier();
        }
        continue;
      }
      if (next && k0 + 2u * BK < ke)
        fetch(h, wb, xb, n0, m0, k0 + 2u * BK); // set h was stored into buffer h last step
      if ((PARTS & 1u) == 0u)
        MULTIPLY(h);
      if (next)
        store(h ^ 1u, h ^ 1u, wb, n0, k0 + BK);
      barrier();
    }
  }

#ifdef COOPMAT
  // whole 16x16 results straight to dst (column-major: n fastest) where it allows; the
  // others column-major into the subgroup's scratch, then element by element
  uint lane = gl_SubgroupInvocationID;
  [[unroll]] for (uint i = 0u; i < TILES_N; i++)
    [[unroll]] for (uint j = 0u; j < TILES_M; j++) {
      uint nb = n0 + (wn * TILES_N + i) * 16u, mb = m0 + (wm * TILES_M + j) * 16u;
      if (pc.d_vec != 0u && nb + 16u <= pc.N && mb + 16u <= pc.M) {
        coopMatStoreNV(acc[i * TILES_M + j], d, db + nb + mb * pc.d_stride[1], pc.d_stride[1], true);
        continue;
      }
      coopMatStoreNV(acc[i * TILES_M + j], ws, sg * 64u, 4u, true);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < 256u; e += 32u)
        store_d(db, nb + (e & 15u), mb + (e >> 4), uintBitsToFloat(ws[sg * 64u + (e >> 2)][e & 3u]));
      subgroupBarrier();
    }
#else
  [[unroll]] for (uint i = 0u; i < RM; i++)
    [[unroll]] for (uint j = 0u; j < RN; j++)
      store_d(db, n0 + tx + TN * i, m0 + ty + TM * j, acc[i * RN + j]);
#endif
}
#endif
