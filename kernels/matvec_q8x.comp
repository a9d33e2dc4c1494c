#version 450
// Quantized weights (Q4_K, Q8_0 with -DQ8_0, or Q6_K with -DQ6_K) x f32 activations -> f32
// for one column of x (M = 1, the decode case) with x rounded to 8 bits per 32 values, the
// way ggml's q8_1 path does it (vkrt_options.quant_activations = VKRT_ACTIVATIONS_Q8): each
// workgroup first quantizes the whole x into shared memory (scale dx = max|x| / 127 per 32
// values, round to nearest; for Q4_K also the exact sum of x over each 32 values, for the
// mins), then its subgroups take rows (a grid-stride walk over every subgroup of the
// dispatch) with integer dot products of 4 int8 pairs (OpSDot, VK_KHR_shader_integer_dot_product):
//   Q8_0: sum_t d q_t x_t ~ d dx sum_t q_t qx_t
//   Q4_K: sum_t (d sc q_t - dmin m) x_t ~ d sc dx sum_t q_t qx_t - dmin m sum_t x_t
//   Q6_K: sum_t d sc (q_t - 32) x_t ~ d sc dx sum_t (q_t - 32) qx_t   (sc per 16 weights)
// Every subgroup walks whole rows on its own: its S invocations take a row's units in order
// (coalesced 16-byte quant reads), UNROLL units' loads issued before their arithmetic (an
// earlier layout on the H200, K 14336 x N 4096: 26.1 us with 1, 21.2 with 2, 21.0 with 4;
// K 4096 x N 14336: 24.9, 20.0, 18.8; one column of Q4_K now takes 2, below), and one
// subgroupAdd sums the row: no barrier between rows, so a subgroup's next loads do not wait
// for the slowest of the workgroup. Shared memory stays small (~21 KiB) so that the L1 cache
// beside it keeps the quant words the invocations share (KMAX 20480, 28 KiB: 40.8 us).
// COLS columns of x per workgroup (-DCOLS=2, 4, 8; Q4_K and Q8_0; columns
// COLS y .. COLS y + COLS - 1 of grid row y): every column's x rounded into shared memory,
// every row's quant words read once for all of them (the small batches, M 2..8; more in
// groups of COLS on grid y). The shared memory holds COLS x KMAX rounded values: KMAX 16384
// for one column, COLS_VALUES / COLS for more (below).
// K <= KMAX, x 16-byte aligned;
// Q4_K rows 16-byte aligned (Q8_0 rows: any; Q6_K rows: any even byte). Offsets and strides
// of w are bytes; those of x and dst elements.
// Q4_K and Q8_0 (FUSED) also take vkrt_op_matmul_fused's bits (accumulate & 4: x
// RMS-normalized with weight g first; & 2: SwiGLU row pairs, as matvec_q_stream.comp): x g
// is what gets rounded (the norm's scale is one factor for the whole of x, so it multiplies
// the row sums instead), the
// squares of x are summed while x is quantized, and each subgroup sums a gate row and its
// up row and writes silu(g) u.
#extension GL_EXT_spirv_intrinsics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : require
#ifdef QKV
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

#ifndef COLS
#define COLS 1
#endif
// One column of Q4_K or Q8_0: 512 invocations a workgroup (x rounded by twice the
// invocations, twice the subgroups walking rows on the same 256 workgroups). H100, the build
// with 256 against 512, two rounds each: Q4_K gate+up 4096 x 28672 31.1 against 29.9 us,
// q-o 8.3 / 7.9, qkv 9.5 / 9.0, gate-up 14.9 / 14.3, down 17.2 either way, k-v 4096 x 1024
// 5.8 / 6.4 (more subgroups than its rows); Q8_0 gate-up 27.5 / 27.2, down 31.6 / 30.8, k-v
// 6.4 / 6.9; vkrt-service Llama-3-8B q4_K tg 324.0 / 328.4 tok/s (3 rounds, every round
// ahead), Llama-3.2-1B 946.8 / 949.7. Q6_K (output 177.1 / 178.9, k-v 6.5 / 7.5) stays at
// 256. Two and four columns take 512 too (H100, batch-q8x.txt, 256 -> 512: Q8_0 K 5120 x N
// 14336 M 2 55.6 -> 42.3 us, M 4 78.5 -> 54.9, K 4096 M 8 in two passes 120.4 -> 84.0;
// Q4_K M 2 46.7 -> 37.0, M 4 69.7 -> 57.9; a build that also touched the first rows' bytes
// before rounding x, which alone made one column slower), and so do eight (N 8192 M 8, two
// passes of 4 -> one of 8: Q8_0 K 2048 32.3 -> 27.5 us, K 3072 42.7 -> 37.1; Q4_K 38.8 ->
// 35.1, 43.8 -> 40.9; 74-107 registers, no spills).
#if !defined(Q6_K)
#define THREADS 512u
#else
#define THREADS 256u
#endif
#ifndef COLS_VALUES
// rounded values of all the columns together: 30 KiB with the scales and sums, inside the
// 32 KiB of maxComputeSharedMemorySize lavapipe has; -DCOLS_VALUES=32768u (40 KiB) holds 8
// columns of K 4096 and 4 of 8192 in one pass where the device allows it (48 KiB on NVIDIA)
#define COLS_VALUES 24576u
#endif
#if COLS == 1
#define KMAX 16384u
#else
#define KMAX (COLS_VALUES / uint(COLS))
#endif
#define QC (KMAX / 16u) // shared entries of one column's rounded x
#define DC (KMAX / 32u) // ... and of its scales (and sums)
#if !defined(Q8_0) && !defined(Q6_K)
#define Q4_K
#endif
#if defined(Q6_K) && COLS != 1
#error "Q6_K: one column"
#endif
#if !defined(Q6_K) && COLS == 1
#define FUSED // takes vkrt_op_matmul_fused's norm and swiglu (binding 3: the norm's weight)
#endif
#ifndef UNROLL
#ifdef Q6_K
// a Q6_K unit is 64 weights from 48 quant bytes: two in flight hold more bytes than Q4_K's
// four of 16, and at K 4096 every invocation has just two (not yet timed on the H200)
#define UNROLL 2u
#elif COLS == 1 && defined(Q4_K)
// NVIDIA gives the one-column kernels' 512 invocations 64 registers each (two workgroups an
// SM): two Q4_K units in flight fit there, four did not (Q8_0 keeps four: at two its lines
// were mixed, Llama-3-8B q8_0 tg 229.4 -> 227.7 tok/s). H100, q4k-products.txt
// --activations q8, 4 -> 2 units: Llama-3-8B q-o 7.92 -> 7.59 us, qkv 8.99 -> 8.74, gate-up
// 14.33 -> 13.64, down 17.15 -> 15.85, gate+up 29.94 -> 29.09; Llama-3.2-1B gate+up 14.51 ->
// 10.28, qkv 7.34 -> 6.08 (every shape faster)
#define UNROLL 2u
#else
#define UNROLL 4u
#endif
#endif

layout(local_size_x = THREADS) in;

// OpSDot (4450) on two words of 4 packed int8 (PackedVectorFormat4x8Bit = 0)
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dot4(uint a, uint b, spirv_literal int packed_4x8);

#include "matvec_push.glsl"

#ifdef Q8_0
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
#define KPB 32u // weights per block
#elif defined(Q6_K)
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; }; // rows at any even byte
#define KPB 256u
#else
layout(std430, set = 0, binding = 0) readonly buffer W { uvec4 w4[]; };
#define KPB 256u
#endif
layout(std430, set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };
#ifdef FUSED
// the RMS norm's weight (accumulate & 4; otherwise any buffer, not read)
layout(std430, set = 0, binding = 3) readonly buffer G { vec4 g4[]; };
#endif

shared uvec4 qx[COLS * QC]; // x as int8, 16 per entry; column c from c QC
shared float dx[COLS * DC];  // the scale of each 32
#ifdef Q4_K
shared float sx[COLS * DC];  // the exact sum of each 32
#endif
#ifdef FUSED
shared float red[THREADS]; // the norm's sum of squares, a subgroup's each
#endif

#ifdef QKV
// QKV (vkrt_matmul_fusion.qkv, one column, FUSED): w's rows are the query heads, then the K
// heads, then the V heads, head_dim (a multiple of 32) each. A workgroup takes blocks of 32
// rows (its subgroups share a block's rows) instead of the grid-stride walk, and finishes
// each block itself: a query or K block is turned by RoPE at pos (normal mode: the pairs
// (2i, 2i + 1) of a block are its own), the queries written so, K and V as the product; the
// turned K and the V go to row pos of their cache, f16 or one q8_0 block of 32, converted as
// set_rows.comp converts them. So the product hands attention its inputs in one dispatch.
#if COLS != 1 || !defined(FUSED)
#error "QKV: the one-column fused kernels"
#endif
layout(std430, set = 0, binding = 4) readonly buffer P { int pos[]; };
layout(std430, set = 0, binding = 5) writeonly buffer KC { uint16_t kc[]; };
layout(std430, set = 0, binding = 6) writeonly buffer VC { uint16_t vc[]; };
layout(std430, set = 0, binding = 7) readonly buffer F { float f[]; };
shared float blk[32]; // the block's 32 row sums
shared float cv[32];  // the values of the block that go to a cache
#include "rope_angle.glsl"
#include "kv_convert.glsl"
#endif

uint pack4(vec4 v, float inv) {
  ivec4 q = clamp(ivec4(round(v * inv)), ivec4(-127), ivec4(127));
  return (uint(q.x) & 255u) | ((uint(q.y) & 255u) << 8u) | ((uint(q.z) & 255u) << 16u) |
         (uint(q.w) << 24u);
}

#ifdef Q8_0
#define Q8_0_HALF_BLOCK
#elif defined(Q6_K)
#define Q6_K_QUANTS
#else
#define Q4_K_SCALES
#endif
#include "quant_blocks.glsl"

// x -> shared: eight invocations of a subgroup round a 32-value block, a 16-byte word
// each, so each load of a subgroup reads whole lines (an invocation a block read 8 words 128
// bytes apart from its neighbours', each load of a subgroup touching 32 lines); the block's
// max and sum by xor shuffles within the eight, an entry's four words gathered by the first
// of its four. Words t0, t0 + stride, ... (n <= 8 of them, loaded before their arithmetic)
// of x's `words` (a multiple of 8: the eight of a block agree on every test); with_norm: x g
// is rounded and the squares of x are summed. Columns past M repeat the last (never stored).
// The kernel's registers cap its workgroups an SM (NVIDIA: 64 for two of 512 invocations):
// keeping each word's block entry in an array across the loads took the q4_K kernel to 81
// and every product 15-25 % slower (H100); `VKRT_BENCH_LOG=info vkrt-bench cases` prints
// the driver's count per pipeline.
void round_words(uint t0, uint stride, uint words, uint n, bool with_norm, uint xb, uint col0,
                 uint K, inout float squares) {
  uint lane = gl_SubgroupInvocationID;
  vec4 v[8], gv[8];
  [[unroll]] for (uint j = 0u; j < 8u; j++) {
    uint t = t0 + j * stride, blk = t >> 3u;
#if COLS == 1
    uint at = xb + t, g_at = t;
#else
    uint c = blk / (K / 32u), b = blk - c * (K / 32u), g_at = 8u * b + (t & 7u);
    uint at = xb + min(col0 + c, pc.M - 1u) * (pc.x_col / 4u) + g_at;
#endif
    if (j < n && t < words) {
      v[j] = x4[at];
#ifdef FUSED
      if (with_norm)
        gv[j] = g4[(pc.norm_offset >> 2) + g_at];
#endif
    }
  }
  [[unroll]] for (uint j = 0u; j < 8u; j++) {
    uint t = t0 + j * stride, blk = t >> 3u, part = t & 7u;
    if (j >= n || t >= words)
      continue;
#if COLS == 1
    uint e = blk;
#else
    uint c = blk / (K / 32u), e = c * DC + (blk - c * (K / 32u));
#endif
    vec4 x = v[j];
    if (with_norm) {
      squares += dot(x, x);
      x *= gv[j];
    }
    vec4 a = abs(x);
    float amax = max(max(a.x, a.y), max(a.z, a.w));
    amax = max(amax, subgroupShuffleXor(amax, 1u));
    amax = max(amax, subgroupShuffleXor(amax, 2u));
    amax = max(amax, subgroupShuffleXor(amax, 4u));
    uint word = pack4(x, amax > 0.0 ? 127.0 / amax : 0.0);
    uvec4 entry = uvec4(word, subgroupShuffle(word, lane | 1u), subgroupShuffle(word, lane | 2u),
                        subgroupShuffle(word, lane | 3u));
    if ((part & 3u) == 0u)
      qx[2u * e + (part >> 2u)] = entry;
    if (part == 0u)
      dx[e] = amax / 127.0;
#ifdef Q4_K
    float sum = dot(x, vec4(1.0));
    sum += subgroupShuffleXor(sum, 1u);
    sum += subgroupShuffleXor(sum, 2u);
    sum += subgroupShuffleXor(sum, 4u);
    if (part == 0u)
      sx[e] = sum;
#endif
  }
}

#ifdef Q6_K
// The 16 bytes of w at even byte b: words b / 4 .. + 3 as they are, or (b 2 mod 4) five
// words shifted by 16 bits (the fifth clamped to the fourth when unused: nothing is read
// past the word holding the last byte).
uvec4 q6_bytes16(uint b) {
  uint i = b >> 2;
  bool odd = (b & 2u) != 0u;
  uint a2 = w[i + 2u];
  return uvec4(q6_words(w[i], w[i + 1u], a2, odd),
               q6_words(a2, w[i + 3u], w[odd ? i + 4u : i + 3u], odd));
}

// Quarter j's 16 quants of a unit, each as the int8 4 (q - 32): the nibble (low for j < 2,
// high else, of ql: the unit's low ql bytes for j even, high for j odd) in bits 2..5 and
// qh's bit pair 2 j, 2 j + 1 in bits 6, 7 make 4 q; q - 32 is q with its bit 5 flipped read
// as a signed 6-bit number, so with qh's high bits flipped beforehand (qh_flipped = qh ^
// 0xaa per byte) the byte is 4 (q - 32) as an int8. That folds the -32 into the quants for
// one XOR per qh word of a unit (subtracting (q | 0x80) - 0x20 ^ 0x80 per byte costs three
// operations per word; 32 dot4(0x01010101, xq) four more OpSDot per quarter), and the
// products stay exact: |4 (q - 32)| <= 128, 16 of them times |xq| <= 127 fit an int.
uvec4 q6_quarter(uvec4 ql_lo, uvec4 ql_hi, uvec4 qh_flipped, uint j) {
  uvec4 ql = (j & 1u) != 0u ? ql_hi : ql_lo;
  uvec4 nib = (j < 2u ? ql << 2u : ql >> 2u) & 0x3c3c3c3cu;
  return nib | ((qh_flipped << (6u - 2u * j)) & 0xc0c0c0c0u);
}
#endif

// This invocation's part of w row `row` (of the batch whose w starts at byte wb) times each
// column's rounded x, added to acc: units lane, lane + S, ... of the row, UNROLL loaded
// before their arithmetic.
void row_part(uint wb, uint row, uint lane, uint S, inout float acc[COLS]) {
#ifdef Q8_0
  uint units = pc.blocks * 2u; // half-blocks: 16 weights each
  uint rb = wb + row * pc.w_row;
  for (uint u0 = lane; u0 < units; u0 += S * UNROLL) {
    uvec4 q[UNROLL];
    float dq[UNROLL];
    uint us[UNROLL];
    for (uint j = 0u; j < UNROLL; j++) {
      us[j] = min(u0 + j * S, units - 1u);
      q[j] = q8_0_half_block(rb, us[j], dq[j]);
    }
    for (uint j = 0u; j < UNROLL; j++) {
      bool live = u0 + j * S < units;
      for (uint c = 0u; c < COLS; c++) {
        uvec4 xq = qx[c * QC + us[j]];
        int s = dot4(q[j].x, xq.x, 0) + dot4(q[j].y, xq.y, 0) + dot4(q[j].z, xq.z, 0) +
                dot4(q[j].w, xq.w, 0);
        acc[c] += live ? dq[j] * dx[c * DC + (us[j] >> 1)] * float(s) : 0.0; // a select
      }
    }
  }
#elif defined(Q6_K)
  // Unit u of a super-block sb = u / 4 (210 bytes: ql[128], qh[64], int8 scales[16], f16 d
  // at 208; ggml dequantize_row_q6_K): half h = (u / 2) % 2, a = u % 2, weights
  // 128 h + 32 j + 16 a + 0..15 of its four quarters j: ql bytes 64 h + 16 a .. (j = 0, 2)
  // and 64 h + 32 + 16 a .. (j = 1, 3), qh bytes 128 + 32 h + 16 a .., scale
  // 8 h + a + 2 j. The four invocations of a super-block read its ql and qh in 16-byte
  // pieces side by side, then the next four the next super-block's.
  uint units = pc.blocks * 4u; // 64 weights each: half h, l = 16 a .. 16 a + 15 of its quarters
  uint rb = wb + row * pc.w_row; // any even byte
  for (uint u0 = lane; u0 < units; u0 += S * UNROLL) {
    uvec4 lo[UNROLL], hi[UNROLL], qh[UNROLL];
    uvec2 sc[UNROLL];
    float dd[UNROLL];
    uint us[UNROLL];
    for (uint j = 0u; j < UNROLL; j++) {
      uint u = us[j] = min(u0 + j * S, units - 1u);
      uint bb = rb + 210u * (u >> 2), h = (u >> 1) & 1u, a = u & 1u;
      lo[j] = q6_bytes16(bb + 64u * h + 16u * a);
      hi[j] = q6_bytes16(bb + 64u * h + 32u + 16u * a);
      qh[j] = q6_bytes16(bb + 128u + 32u * h + 16u * a);
      uint sw = (bb + 192u + 8u * h) >> 2; // the word of half h's 8 scales
      bool odd = (bb & 2u) != 0u;
      sc[j] = q6_words(w[sw], w[sw + 1u], w[odd ? sw + 2u : sw + 1u], odd);
      uint db = bb + 208u;
      dd[j] = unpackHalf2x16(w[db >> 2] >> (8u * (db & 2u))).x;
    }
    for (uint j = 0u; j < UNROLL; j++) {
      uint h = (us[j] >> 1) & 1u, a = us[j] & 1u;
      uint k32 = (us[j] >> 2) * 8u + 4u * h; // sub-block of quarter 0; quarter t: k32 + t
      uint k16 = 2u * k32 + a;               // x entry of quarter 0; quarter t: k16 + 2 t
      uvec4 qhf = qh[j] ^ 0xaaaaaaaau;
      ivec4 s;
      for (uint t = 0u; t < 4u; t++) {
        uvec4 q = q6_quarter(lo[j], hi[j], qhf, t), xq = qx[k16 + 2u * t];
        s[t] = dot4(q.x, xq.x, 0) + dot4(q.y, xq.y, 0) + dot4(q.z, xq.z, 0) + dot4(q.w, xq.w, 0);
      }
      int is = int(8u * a); // scale a (+ 2, 4, 6) of the half: bytes a, a + 2 of each word
      vec4 scale = vec4(bitfieldExtract(int(sc[j].x), is, 8), bitfieldExtract(int(sc[j].x), is + 16, 8),
                        bitfieldExtract(int(sc[j].y), is, 8), bitfieldExtract(int(sc[j].y), is + 16, 8));
      vec4 dxs = vec4(dx[k32], dx[k32 + 1u], dx[k32 + 2u], dx[k32 + 3u]);
      // 0.25: the quants are 4 (q - 32)
      float r = 0.25 * dd[j] * dot(scale * dxs, vec4(s));
      acc[0] += u0 + j * S < units ? r : 0.0; // a select: clamped units repeat the last
    }
  }
#else
  uint units = pc.blocks * 8u; // 16 quant bytes: 32 weights each
  uint rb = (wb + row * pc.w_row) / 16u; // uvec4 index, rows 16-byte aligned
  for (uint u0 = lane; u0 < units; u0 += S * UNROLL) {
    uvec4 h[UNROLL], q[UNROLL];
    uint us[UNROLL];
    for (uint j = 0u; j < UNROLL; j++) {
      uint u = us[j] = min(u0 + j * S, units - 1u);
      h[j] = w4[rb + (u >> 3) * 9u];
      q[j] = w4[rb + (u >> 3) * 9u + 1u + (u & 7u)];
    }
    for (uint j = 0u; j < UNROLL; j++) {
      uint sb = us[j] >> 3, p = us[j] & 7u;
      // low nibbles: weights 64 (p / 2) + 16 (p % 2) + 0..15 = x entry k16 of sub-block
      // k32 = k16 / 2; high nibbles: k16 + 2 of sub-block k32 + 1
      uint k16 = sb * 16u + 4u * (p >> 1) + (p & 1u), k32 = k16 >> 1;
      uvec4 lo = q[j] & 0x0f0f0f0fu, hi = (q[j] >> 4u) & 0x0f0f0f0fu;
      vec4 dm = pair_scales(h[j], 2u * (p >> 1));
      bool live = u0 + j * S < units;
      for (uint c = 0u; c < COLS; c++) {
        uvec4 xl = qx[c * QC + k16], xh = qx[c * QC + k16 + 2u];
        int il = dot4(lo.x, xl.x, 0) + dot4(lo.y, xl.y, 0) + dot4(lo.z, xl.z, 0) + dot4(lo.w, xl.w, 0);
        int ih = dot4(hi.x, xh.x, 0) + dot4(hi.y, xh.y, 0) + dot4(hi.z, xh.z, 0) + dot4(hi.w, xh.w, 0);
        uint e = c * DC + k32;
        // the mins of both sub-blocks once, by the invocation of the low 16 (p even)
        float mins = (p & 1u) == 0u ? dm.y * sx[e] + dm.w * sx[e + 1u] : 0.0;
        float s = dm.x * dx[e] * float(il) + dm.z * dx[e + 1u] * float(ih) - mins;
        acc[c] += live ? s : 0.0; // a select: clamped units repeat the last
      }
    }
  }
#endif
}

#ifdef QKV
// One 16-bit word of the K (is_k) or the V cache
void cache_store(bool is_k, uint word, uint value) {
  if (is_k)
    kc[word] = uint16_t(value);
  else
    vc[word] = uint16_t(value);
}

// Block b's 32 rows summed by the workgroup's subgroups into blk, then its epilogue (above):
// invocation t < 32 takes row 32 b + t. Blocks go to workgroups in turn, so every
// invocation reaches the same barriers.
void qkv_blocks(uint wb, uint lane, uint S, float scale) {
  uint t = gl_LocalInvocationID.x;
  int p = pos[pc.pos_offset];
  bool store = p >= 0 && uint(p) < pc.cache_rows;
  for (uint b = pc.base_x + gl_WorkGroupID.x; b < pc.N / 32u; b += gl_NumWorkGroups.x) {
    for (uint r = gl_SubgroupID; r < 32u; r += gl_NumSubgroups) {
      float acc[COLS];
      acc[0] = 0.0;
      row_part(wb, 32u * b + r, lane, S, acc);
      float s = subgroupAdd(acc[0]) * scale;
      if (subgroupElect())
        blk[r] = s;
    }
    barrier();
    uint e0 = 32u * b; // the block's first row: q, K or V rows throughout
    bool is_q = e0 < pc.q_rows, is_k = !is_q && e0 < pc.q_rows + pc.kv_rows;
    uint r0 = is_q ? 0u : is_k ? pc.q_rows : pc.q_rows + pc.kv_rows; // the part's first row
    if (t < 32u) {
      float v = blk[t], c = v;
      uint j = (e0 + t - r0) % pc.head_dim; // the row within its head
      if ((is_q || is_k) && j < pc.n_dims) { // rope.comp's pair (2i, 2i + 1), normal mode
        uint pair = j >> 1;
        vec2 cs = rope_cos_sin(p, pair, pc.theta_scale, pc.freq_scale, pc.factors != 0u,
                               f[pc.factors_offset + pair * pc.factors]);
        vec2 turned = rope_turn(blk[t & ~1u], blk[t | 1u], cs);
        c = (t & 1u) == 0u ? turned.x : turned.y;
      }
      d[pc.d_offset + (e0 + t) * pc.d_stride0] = is_q ? c : v;
      cv[t] = c;
    }
    if (!is_q) { // uniform: the block is K or V rows for the whole workgroup
      barrier();
      bool q8 = (pc.cache_types & (is_k ? 1u : 2u)) != 0u;
      uint i0 = e0 - r0; // the block's first value in the cache row
      uint at = (is_k ? pc.k_offset + uint(p) * pc.k_row : pc.v_offset + uint(p) * pc.v_row) +
                (q8 ? 34u * (i0 >> 5) : 2u * i0); // bytes, 2-byte aligned
      uint h = at >> 1; // the block's first 16-bit word
      if (store && q8 && t < 17u) { // the scale, then 16 pairs of quants
        float amax = 0.0;
        for (uint i = 0u; i < 32u; i++)
          amax = max(amax, abs(cv[i]));
        float dq = q8_0_scale(amax);
        cache_store(is_k, h + t, t == 0u ? f32_to_f16_bits(floatBitsToUint(dq))
                                         : q8_0_pair(cv[2u * t - 2u], cv[2u * t - 1u],
                                                     q8_0_inverse(dq)));
      } else if (store && !q8 && t < 32u) { // f16: a value each
        cache_store(is_k, h + t, f32_to_f16_bits(floatBitsToUint(cv[t])));
      }
    }
    barrier(); // blk and cv are the next block's
  }
}
#endif

void main() {
  uint tid = gl_LocalInvocationID.x;
#ifdef QKV
  uint wb = pc.w_offset, xb = pc.x_offset / 4u; // one column, one batch
#else
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint wb = pc.w_offset + (i2 / pc.r2) * pc.w_stride2 + (i3 / pc.r3) * pc.w_stride3;
  uint xb = (pc.x_offset + i2 * pc.x_stride2 + i3 * pc.x_stride3) / 4u; // vec4, 16-byte aligned
#endif
  uint K = pc.blocks * KPB;
  uint col0 = (pc.base_y + gl_WorkGroupID.y) * uint(COLS); // this workgroup's first column

  // x -> shared (round_words): with the norm, four words an invocation in flight (and
  // their weights), else eight (a column of K 16384 in one round)
  float squares = 0.0;
  uint S = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  uint words = uint(COLS) * (K / 4u), wstride = gl_NumSubgroups * S;
#ifdef FUSED
  if (norm())
    for (uint t0 = gl_SubgroupID * S + lane; t0 < words; t0 += 4u * wstride)
      round_words(t0, wstride, words, 4u, true, xb, col0, K, squares);
  else
#endif
    for (uint t0 = gl_SubgroupID * S + lane; t0 < words; t0 += 8u * wstride)
      round_words(t0, wstride, words, 8u, false, xb, col0, K, squares);
  // the norm's scale: the squares summed by each subgroup, then the subgroups' sums in order
  // (the same in every workgroup), one barrier where a tree over the invocations took nine
  float scale = 1.0;
#ifdef FUSED
  if (norm()) {
    float q = subgroupAdd(squares);
    if (subgroupElect())
      red[gl_SubgroupID] = q;
    barrier();
    float t = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
      t += red[i];
    scale = inversesqrt(t / float(K) + pc.eps);
  }
#endif
  barrier();

  // Each subgroup walks whole rows on its own (no barrier after x is in shared memory): its
  // S invocations take a row's units lane, lane + S, ... (coalesced 16-byte quant reads),
  // UNROLL of them loaded before their arithmetic, and one subgroupAdd sums the row. Under
  // glu() an item is a gate/up pair (gate row i, up row i + N / 2), both summed by the same
  // subgroup, which writes silu(g) u.
#ifdef QKV
  qkv_blocks(wb, lane, S, scale);
#else
  uint items = glu() ? pc.N >> 1 : pc.N;
  uint first = (pc.base_x + gl_WorkGroupID.x) * gl_NumSubgroups + gl_SubgroupID;
  uint stride = gl_NumWorkGroups.x * gl_NumSubgroups;
  for (uint item = first; item < items; item += stride) {
    float acc[COLS];
    for (uint c = 0u; c < COLS; c++)
      acc[c] = 0.0;
    row_part(wb, item, lane, S, acc);
    uint at = pc.d_offset + item * pc.d_stride0 + i2 * pc.d_stride2 + i3 * pc.d_stride3;
#ifdef FUSED
    if (glu()) {
      float s = subgroupAdd(acc[0]) * scale, up[COLS];
      up[0] = 0.0;
      row_part(wb, item + items, lane, S, up);
      float su = subgroupAdd(up[0]) * scale;
      if (subgroupElect())
        d[at] = s / (1.0 + exp(-s)) * su;
      continue;
    }
#endif
    for (uint c = 0u; c < COLS; c++) {
      float s = subgroupAdd(acc[c]) * scale;
      uint a = at + (col0 + c) * pc.d_col; // col0 is 0 for one column
      if (col0 + c < pc.M && subgroupElect())
        d[a] = (pc.accumulate & 1u) != 0u ? d[a] + s : s;
    }
  }
#endif
}
