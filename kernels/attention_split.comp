#version 450
// Decode attention, the split pass of flash-decoding: workgroup (s, y, jj) attends query jj
// of the round (query q0 + jj) over cache tokens [s * split_len, (s + 1) * split_len) cut
// at that query's kv_len (read here, so recorded work replays for the next token), for the
// G query heads of head group y % head_groups of KV head y / head_groups. Each K and V row
// is loaded once for all G heads. It writes, per head, the split's max score m, the sum
// l = sum exp(score - m) and o = sum exp(score - m) v (unnormalized) to the scratch;
// attention_combine.comp merges the splits. A split past kv_len exits at once and the
// combine never reads it. With one split (direct != 0) there is nothing to merge: the pass
// writes o / l to dst itself (zeros for kv_len <= 0) and no combine runs.
//
// Rows are read in 8-element chunks (f16: one 16-byte load; q8_0: 8 quants and the block
// scale, applied once per chunk and head, not per element): invocation t takes chunk t % NC of tokens t / NC + i TT,
// so the NC invocations of a token read its row contiguously; a tile is U such passes, and
// the next tile's loads are issued before this one is used (the V rows of the first tile
// before the softmax), so about 2 U loads per invocation are in flight.
// Scores, SUBGROUP (the NC invocations of a token within one subgroup, NC a power of two):
// each invocation's G partial dot products are summed across its NC lanes by subgroup
// shuffles (a butterfly: every lane ends with the sums), no barrier in the loop; the softmax
// takes one subgroup per head (subgroupMax, subgroupAdd). Otherwise the partials go through
// shared memory (rows padded against bank conflicts), two barriers a tile, and the softmax
// through shared memory. The split's scores stay in shared memory (f32, max first).
// Weighted V: invocation t accumulates chunk t % NC of every TT-th token for all G heads,
// then the TT token groups are summed through shared memory, GB heads at a time.
// Specialization constants: 0 workgroup size, 1 G (query heads per workgroup), 2 D (head
// dim, a multiple of 8; q8_0: of 32), 3 U (passes per tile). attention.c sizes the shared
// memory as the shared-memory path needs it (RED + SCORES floats; SUBGROUP needs less).
#extension GL_EXT_control_flow_attributes : enable
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint G = 1u;
layout(constant_id = 2) const uint D = 128u;
layout(constant_id = 3) const uint U = 4u; // passes per tile
const uint WG = gl_WorkGroupSize.x;
const uint NC = D / 8u;        // chunks per row
const uint TT = WG / NC;       // tokens per pass of the workgroup (one chunk per invocation)
const uint TILE = TT * U;      // tokens per tile
// the reduction area: (shared path) the score partials of a tile and the softmax's two rows
// of WG; the weighted-V sums of at least one head
#ifdef SUBGROUP
const uint RED = 8u * WG;
#else
const uint RED_QK = U * G * (WG + TT);
const uint RED = RED_QK > 8u * WG ? RED_QK : 8u * WG;
const uint TPH = WG / G < 32u ? WG / G : 32u; // invocations per head in the softmax
#endif
const uint SCORES = 2048u;     // G * split_len at most (attention.c plans within it)
const uint CAP = SCORES / G;   // split_len at most
const uint GB = RED / (8u * WG);   // heads per round of the weighted-V reduction

layout(push_constant) uniform Push {
  uint q_off, q_s1, q_s2;   // f32 elements
  uint k_off, k_s1, k_s2;   // f16: 16-byte units; q8_0: bytes
  uint v_off, v_s1, v_s2;
  uint len_off, len_s0;     // I32 elements
  uint n_ctx, split_len, n_split;
  uint q0, n_head, head_groups, g_total;
  uint ml_base;             // floats: where the (m, l) pairs start in the scratch
  float scale;
  uint direct;              // one split: o / l into binding 4 = dst at d_off, d_s1, d_s2
  uint d_off, d_s1, d_s2;   // f32 elements
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer Q { float q[]; };
layout(std430, set = 0, binding = 1) readonly buffer Len { int kv_len[]; };
#ifdef KV_F16
layout(std430, set = 0, binding = 2) readonly buffer K { uvec4 k[]; };
layout(std430, set = 0, binding = 3) readonly buffer V { uvec4 v[]; };
#else
layout(std430, set = 0, binding = 2) readonly buffer K { uint k[]; };
layout(std430, set = 0, binding = 3) readonly buffer V { uint v[]; };
#endif
layout(std430, set = 0, binding = 4) writeonly buffer P { float part[]; };

shared float red[RED];
shared float sc[SCORES];
shared float lsum[G]; // each head's l (direct: o / l)

// A chunk is loaded raw (k_load, v_load: the words as they are in memory) and decoded
// when used (decode: the 8 values in lo, hi, times `d`), so loads can be issued a tile ahead.
#ifdef KV_F16
uvec4 k_load(uint row, uint c) { return k[row + c]; }
uvec4 v_load(uint row, uint c) { return v[row + c]; }
void decode(uvec4 u, uint row, uint c, out vec4 lo, out vec4 hi, out float d) {
  lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
  d = 1.0;
}
#else
vec4 unpack_i8(uint w) {
  return vec4(ivec4(int(w << 24u) >> 24, int(w << 16u) >> 24, int(w << 8u) >> 24, int(w) >> 24));
}
// Chunk c of a q8_0 row at byte `row` (2-byte aligned): block c / 4 (its f16 scale at the
// block's start), quants 8 (c % 4) on, which start 2 mod 4 bytes in every other block: then
// three words, shifted. Raw: (word 0, word 1, word 2 or 0, the scale's word).
#define Q8_LOAD(NAME, BUF)                                                               \
  uvec4 NAME(uint row, uint c) {                                                         \
    uint blk = row + 34u * (c >> 2u);                                                    \
    uint qb = blk + 2u + 8u * (c & 3u);                                                  \
    uint w0 = qb >> 2u;                                                                  \
    return uvec4(BUF[w0], BUF[w0 + 1u], (qb & 2u) != 0u ? BUF[w0 + 2u] : 0u, BUF[blk >> 2u]); \
  }
Q8_LOAD(k_load, k)
Q8_LOAD(v_load, v)
void decode(uvec4 raw, uint row, uint c, out vec4 lo, out vec4 hi, out float d) {
  uint blk = row + 34u * (c >> 2u);
  d = unpackHalf2x16((blk & 2u) != 0u ? raw.w >> 16u : raw.w).x;
  uint a = raw.x, b = raw.y;
  if (((blk + 2u + 8u * (c & 3u)) & 2u) != 0u) {
    a = (a >> 16u) | (b << 16u);
    b = (b >> 16u) | (raw.z << 16u);
  }
  lo = unpack_i8(a);
  hi = unpack_i8(b);
}
#endif

void main() {
  uint s = pc.base_x + gl_WorkGroupID.x;
  uint y = pc.base_y + gl_WorkGroupID.y;
  uint jj = pc.base_z + gl_WorkGroupID.z;
  uint hk = y / pc.head_groups;
  uint h0 = hk * pc.g_total + (y % pc.head_groups) * G;
  uint j = pc.q0 + jj;
  uint len = uint(clamp(kv_len[pc.len_off + j * pc.len_s0], 0, int(pc.n_ctx)));
  uint t0 = s * pc.split_len;
#ifdef SUBGROUP
  // invocations numbered subgroup by subgroup, so a token's NC lanes share one
  uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
  uint tid = gl_LocalInvocationID.x;
#endif
  if (t0 >= len) {
    // past this query's length: the combine ignores the split; alone, it is the answer: 0
    if (pc.direct != 0u)
      for (uint i = tid; i < G * D; i += WG)
        part[pc.d_off + (h0 + i / D) * pc.d_s1 + j * pc.d_s2 + i % D] = 0.0;
    return;
  }
  uint n = min(pc.split_len, len - t0);
  uint c = tid % NC, slot = tid / NC;
  uint k_base = pc.k_off + hk * pc.k_s1, v_base = pc.v_off + hk * pc.v_s1;

  // this invocation's chunk of each head's query, scaled
  vec4 qa[G], qb[G];
  [[unroll]] for (uint g = 0u; g < G; g++) {
    uint qi = pc.q_off + (h0 + g) * pc.q_s1 + j * pc.q_s2 + 8u * c;
    qa[g] = pc.scale * vec4(q[qi], q[qi + 1u], q[qi + 2u], q[qi + 3u]);
    qb[g] = pc.scale * vec4(q[qi + 4u], q[qi + 5u], q[qi + 6u], q[qi + 7u]);
  }

  // scores of the split into sc[g * CAP + token]; rows past n are clamped to the last (valid
  // memory, never stored)
  uvec4 raw[U];
  [[unroll]] for (uint u = 0u; u < U; u++)
    raw[u] = k_load(k_base + (t0 + min(u * TT + slot, n - 1u)) * pc.k_s2, c);
  for (uint tile = 0u; tile < n; tile += TILE) {
    uvec4 cur[U];
    uint row[U];
    [[unroll]] for (uint u = 0u; u < U; u++) {
      cur[u] = raw[u];
      row[u] = k_base + (t0 + min(tile + u * TT + slot, n - 1u)) * pc.k_s2;
    }
    if (tile + TILE < n) // the next tile's loads, in flight while this one is reduced
      [[unroll]] for (uint u = 0u; u < U; u++)
        raw[u] = k_load(k_base + (t0 + min(tile + TILE + u * TT + slot, n - 1u)) * pc.k_s2, c);
    else // the first V tile's, in flight through the softmax
      [[unroll]] for (uint u = 0u; u < U; u++)
        raw[u] = v_load(v_base + (t0 + min(u * TT + slot, n - 1u)) * pc.v_s2, c);
    [[unroll]] for (uint u = 0u; u < U; u++) {
      vec4 lo, hi;
      float dk;
      decode(cur[u], row[u], c, lo, hi, dk);
#ifdef SUBGROUP
      uint t = tile + u * TT + slot;
      [[unroll]] for (uint g = 0u; g < G; g++) {
        float p = dk * (dot(qa[g], lo) + dot(qb[g], hi));
        [[unroll]] for (uint o = 1u; o < NC; o *= 2u)
          p += subgroupShuffleXor(p, o);
        if (t < n && c == g % NC)
          sc[g * CAP + t] = p;
      }
#else
      [[unroll]] for (uint g = 0u; g < G; g++)
        red[((u * TT + slot) * G + g) * (NC + 1u) + c] = dk * (dot(qa[g], lo) + dot(qb[g], hi));
#endif
    }
#ifndef SUBGROUP
    barrier();
    for (uint r = tid; r < TILE * G; r += WG) {
      float sum = 0.0;
      for (uint i = 0u; i < NC; i++)
        sum += red[r * (NC + 1u) + i];
      uint t = tile + r / G;
      if (t < n)
        sc[(r % G) * CAP + t] = sum;
    }
    barrier();
#endif
  }

  // softmax over the split per head: max, exp, sum
#ifdef SUBGROUP
  barrier(); // every score is in sc
  for (uint g = gl_SubgroupID; g < G; g += gl_NumSubgroups) {
    float mx = -3.402823466e38;
    for (uint t = gl_SubgroupInvocationID; t < n; t += gl_SubgroupSize)
      mx = max(mx, sc[g * CAP + t]);
    float m = subgroupMax(mx);
    float ls = 0.0;
    for (uint t = gl_SubgroupInvocationID; t < n; t += gl_SubgroupSize) {
      float p = exp(sc[g * CAP + t] - m);
      sc[g * CAP + t] = p;
      ls += p;
    }
    float l = subgroupAdd(ls);
    if (subgroupElect()) {
      lsum[g] = l;
      if (pc.direct == 0u) {
        uint e = (jj * pc.n_head + h0 + g) * pc.n_split + s;
        part[pc.ml_base + 2u * e] = m;
        part[pc.ml_base + 2u * e + 1u] = l;
      }
    }
  }
  barrier(); // every p is in sc
#else
  // TPH invocations per head, partial maxima and sums through shared memory
  uint sg = tid / TPH, si = tid % TPH;
  bool soft = sg < G;
  float mx = -3.402823466e38;
  if (soft)
    for (uint t = si; t < n; t += TPH)
      mx = max(mx, sc[sg * CAP + t]);
  red[tid] = mx;
  barrier();
  float m = -3.402823466e38;
  if (soft)
    for (uint i = 0u; i < TPH; i++)
      m = max(m, red[sg * TPH + i]);
  float ls = 0.0;
  if (soft)
    for (uint t = si; t < n; t += TPH) {
      float p = exp(sc[sg * CAP + t] - m);
      sc[sg * CAP + t] = p;
      ls += p;
    }
  red[WG + tid] = ls;
  barrier();
  if (soft && si == 0u) {
    float l = 0.0;
    for (uint i = 0u; i < TPH; i++)
      l += red[WG + sg * TPH + i];
    lsum[sg] = l;
    if (pc.direct == 0u) {
      uint e = (jj * pc.n_head + h0 + sg) * pc.n_split + s;
      part[pc.ml_base + 2u * e] = m;
      part[pc.ml_base + 2u * e + 1u] = l;
    }
  }
#endif

  // weighted V: chunk c of tokens slot, slot + TT, ... for every head (raw holds the first
  // tile's rows)
  vec4 oa[G], ob[G];
  [[unroll]] for (uint g = 0u; g < G; g++) {
    oa[g] = vec4(0.0);
    ob[g] = vec4(0.0);
  }
  for (uint tile = 0u; tile < n; tile += TILE) {
    uvec4 cur[U];
    [[unroll]] for (uint u = 0u; u < U; u++)
      cur[u] = raw[u];
    if (tile + TILE < n)
      [[unroll]] for (uint u = 0u; u < U; u++)
        raw[u] = v_load(v_base + (t0 + min(tile + TILE + u * TT + slot, n - 1u)) * pc.v_s2, c);
    [[unroll]] for (uint u = 0u; u < U; u++) {
      uint t = tile + u * TT + slot;
      if (t < n) {
        vec4 lo, hi;
        float dv;
        decode(cur[u], v_base + (t0 + t) * pc.v_s2, c, lo, hi, dv);
        [[unroll]] for (uint g = 0u; g < G; g++) {
          float p = dv * sc[g * CAP + t];
          oa[g] += p * lo;
          ob[g] += p * hi;
        }
      }
    }
  }
  barrier(); // red's softmax reads are done
  for (uint g0 = 0u; g0 < G; g0 += GB) {
    [[unroll]] for (uint gi = 0u; gi < GB; gi++)
      if (g0 + gi < G) {
        uint ri = ((gi * TT + slot) * NC + c) * 8u;
        vec4 a = oa[g0 + gi], b = ob[g0 + gi];
        red[ri] = a.x, red[ri + 1u] = a.y, red[ri + 2u] = a.z, red[ri + 3u] = a.w;
        red[ri + 4u] = b.x, red[ri + 5u] = b.y, red[ri + 6u] = b.z, red[ri + 7u] = b.w;
      }
    barrier();
    for (uint r = tid; r < GB * D; r += WG) {
      uint gi = r / D, d = r % D;
      if (g0 + gi < G) {
        float sum = 0.0;
        for (uint i = 0u; i < TT; i++)
          sum += red[(gi * TT + i) * D + d];
        if (pc.direct != 0u)
          part[pc.d_off + (h0 + g0 + gi) * pc.d_s1 + j * pc.d_s2 + d] = sum / lsum[g0 + gi];
        else
          part[((jj * pc.n_head + h0 + g0 + gi) * pc.n_split + s) * D + d] = sum;
      }
    }
    barrier();
  }
}
