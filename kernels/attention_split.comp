#version 450
// Decode attention, the split pass of flash-decoding: workgroup (y, s, jj) attends query jj
// of the round (query q0 + jj) over cache tokens [s * split_len, (s + 1) * split_len) cut
// at that query's kv_len (read here, so recorded work replays for the next token; split_len
// = max(ceil(kv_len / n_split), min_split): a short query spreads over the splits), for the
// G query heads of head group y % head_groups of KV head y / head_groups. Each K and V row
// is read once for all G heads. The KV heads of a split are neighbouring workgroups, so
// the cache rows of a token (every KV head's, side by side in the service's layout) are
// read together. It writes, per head, the split's max score m, the sum
// l = sum exp(score - m) and o = sum exp(score - m) v (unnormalized) to the scratch;
// attention_combine.comp merges the splits. A split past kv_len exits at once and the
// combine never reads it. With one split (direct 1) there is nothing to merge: the pass
// writes o / l to dst itself (zeros for kv_len <= 0) and no combine runs. With direct 2 the
// last live split of a workgroup row to finish merges them (an arrival counter per row at
// binding 6, reset by that split for the next run) and writes dst at binding 5, so no
// combine pass and no barrier before one: attention_combine.comp's sums, per element.
//
// The split runs in tiles of T = TT * U tokens, with no reduction per token:
// - loads: invocation t reads chunk t % NC (8 elements: f16 one 16-byte word; q8_0 8 quants
//   and the block scale) of tokens t / NC + u TT (u < U), so a row's NC invocations read it
//   contiguously. The next tile's K rows are in flight during the whole tile, its V rows
//   from the weighted sum on.
// - the tile's K rows go to shared memory (rows padded to an odd number of 16-byte words:
//   no bank conflicts when invocations read different rows at the same column);
// - scores: an invocation owns a token and one of P parts of the head dimension and sums
//   its dot products for all G heads (the scaled queries in shared memory, read by every
//   invocation of the part at once); the P partials of a score are added by the softmax;
// - online softmax per head and token slot (tokens t = slot + u TT): a running max and sum
//   in shared memory, the tile's probabilities written over the scores, the factor that
//   rescales the slot's earlier sums;
// - weighted V: invocation (chunk, slot) rescales its G heads' sums and adds p v for its
//   U tokens of the tile (probabilities read from shared memory, the same for the NC
//   invocations of a token), from V rows read coalesced straight into registers.
// At the end the TT slots of each head are merged (max, rescale, sum) through shared memory.
// Specialization constants: 0 workgroup size, 1 G (query heads per workgroup), 2 D (head
// dim, a multiple of 8; q8_0: of 32), 3 U (row passes per tile), 4 FULL (1: a tile a split,
// below). attention.c sizes the shared memory as declared here (vkrt_ops_attention_shared
// in validate.c).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0, local_size_x = 128) in; // 128: no division by zero in the defaults
layout(constant_id = 1) const uint G = 1u;
layout(constant_id = 2) const uint D = 128u;
layout(constant_id = 3) const uint U = 4u; // passes per tile
layout(constant_id = 4) const uint FULL = 0u; // 1: the plan cuts every query in tiles (below)
const uint WG = gl_WorkGroupSize.x;
const uint NC = D / 8u;            // chunks per row
const uint NCP = NC + 1u - NC % 2u; // a row in shared memory, in 16-byte words (odd)
const uint TT = WG / NC;           // token slots (rows per pass)
const uint T = TT * U;             // tokens per tile
const uint P = WG / T > 1u ? WG / T : 1u; // parts of a row in the score pass
const uint CP = (NC + P - 1u) / P; // chunks per part
const uint ITEMS = P * T;          // score items (token, part) per tile
const float LOW = -3.402823466e38; // the max before any score



shared uvec4 sk[T * NCP];     // the tile's K chunks (q8_0: quants, quants, scale bits)
shared vec4 sq[G * D / 4u];   // the scaled queries
shared float sp[G * ITEMS];   // score partials [part][head][token]; then [head][token]: p
shared float sm[G * TT];      // running max per head and slot
shared float sl[G * TT];      // running sum
shared float sa[G * TT];      // the tile's rescale of the slot's earlier sums
shared float shead[2u * G];   // per head: the split's max and sum
shared float red[8u * WG];    // the slot merge of one head

#define PART_READ
#include "attention_kv.glsl"
#include "attention_split_len.glsl"
#include "attention_merge.glsl"

// direct 2: dst, and the arrival counters (zero between runs)
layout(std430, set = 0, binding = 5) writeonly buffer Dst { float dst[]; };
layout(std430, set = 0, binding = 6) coherent buffer Arrivals { uint arrivals[]; };
shared uint s_last;

// The output element d of query head h of query j (direct 1: binding 4 is dst)
void store_out(uint h, uint j, uint d, float value) {
  uint at = pc.d_off + h * pc.d_s1 + j * pc.d_s2 + d;
  if (pc.direct == 1u)
    part[at] = value;
  else
    dst[at] = value;
}

// direct 2, called by every invocation of a live split once its partials are written:
// the split that arrives last for its workgroup row merges the n_live splits of its G heads
// as attention_combine.comp does (M the largest split max, dst = sum e^(m_s - M) o_s / sum
// e^(m_s - M) l_s), reading the others' partials past the L1 (part is coherent).
void merge_if_last(uint y, uint jj, uint j, uint h0, uint n_live) {
  uint tid = gl_LocalInvocationID.x;
  memoryBarrierBuffer();
  barrier();
  if (tid == 0u) {
    uint row = jj * (pc.n_head / pc.g_total) * pc.head_groups + y;
    uint arrived = atomicAdd(arrivals[row], 1u) + 1u;
    s_last = arrived == n_live ? 1u : 0u;
    if (arrived == n_live)
      arrivals[row] = 0u; // every live split has arrived: zero for the next run
  }
  barrier();
  if (s_last == 0u)
    return;
  memoryBarrierBuffer();
  for (uint i = tid; i < G * D; i += WG) {
    uint g = i / D, d = i % D;
    uint e0 = (jj * pc.n_head + h0 + g) * pc.n_split;
    store_out(h0 + g, j, d, attention_merge(pc.ml_base + 2u * e0, e0, D, d, n_live));
  }
}

// The K chunk as kept in shared memory (k_keep) and read back (k_use): f16 as loaded;
// q8_0 its two quant words and the scale.
#ifdef KV_F16
uvec4 k_keep(uvec4 u, uint row, uint c) { return u; }
void k_use(uvec4 u, out vec4 lo, out vec4 hi, out float d) {
  lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
  d = 1.0;
}
#else
uvec4 k_keep(uvec4 raw, uint row, uint c) {
  uint a, b;
  float d;
  q8_words(raw, row, c, a, b, d);
  return uvec4(a, b, floatBitsToUint(d), 0u);
}
void k_use(uvec4 u, out vec4 lo, out vec4 hi, out float d) {
  lo = unpack_i8(u.x);
  hi = unpack_i8(u.y);
  d = uintBitsToFloat(u.z);
}
#endif

// The cache row of token t of the split starting at t0 (n tokens long) that the loads read:
// rows past the split are clamped to its last (valid memory, never used); with FULL, loaded
// before n is known, to the cache's last.
uint split_row(uint t0, uint t, uint n) {
  return FULL != 0u ? min(t0 + t, pc.n_ctx - 1u) : t0 + min(t, n - 1u);
}

void main() {
  uint y = pc.base_x + gl_WorkGroupID.x;
  uint s = pc.base_y + gl_WorkGroupID.y;
  uint jj = pc.base_z + gl_WorkGroupID.z;
  uint hk = y / pc.head_groups;
  uint h0 = hk * pc.g_total + (y % pc.head_groups) * G;
  uint j = pc.q0 + jj;
  uint tid = gl_LocalInvocationID.x;
  // loads and weighted V: chunk c of slot `slot` (invocations past TT * NC only help with
  // the shared-memory passes)
  uint c = tid % NC, slot = tid / NC;
  bool loader = slot < TT;
  slot = min(slot, TT - 1u);
  uint k_base = pc.k_off + hk * pc.k_s1, v_base = pc.v_off + hk * pc.v_s1;
  // FULL (the plan's full_split: min_split x n_split covers the capacity): every query is
  // cut into splits of min_split tokens (one tile) whatever its kv_len, so the tile's rows
  // are known before kv_len is read and their loads and the queries' go out with it, one
  // memory latency for all. Otherwise the rows wait for kv_len. A specialization constant,
  // so a pipeline holds only its own path (the other's registers measured 4 % slower at
  // head 256).
  const bool full_split = FULL != 0u;
  uint t0 = s * pc.min_split, n = 0u; // the split's first token and length (full: n unused)
  uvec4 rk[U], rv[U];
  if (full_split)
    [[unroll]] for (uint u = 0u; u < U; u++) {
      rk[u] = k_load(k_base + split_row(t0, u * TT + slot, n) * pc.k_s2, c);
      rv[u] = v_load(v_base + split_row(t0, u * TT + slot, n) * pc.v_s2, c);
    }
  int len_raw = kv_len[pc.len_off + j * pc.len_s0];
  for (uint i = tid; i < G * D / 4u; i += WG) {
    uint g = i / (D / 4u), d = 4u * (i % (D / 4u));
    uint qi = pc.q_off + (h0 + g) * pc.q_s1 + j * pc.q_s2 + d;
    sq[i] = pc.scale * vec4(q[qi], q[qi + 1u], q[qi + 2u], q[qi + 3u]);
  }
  uint len = uint(clamp(len_raw, 0, int(pc.n_ctx)));
  uint split_len = attention_split_len(len, pc.n_split, pc.min_split);
  t0 = s * split_len;
  if (t0 >= len) {
    // past this query's length: the combine ignores the split; alone, it is the answer: 0
    if (pc.direct == 1u || (pc.direct == 2u && s == 0u)) // direct 2: len 0, nothing live
      for (uint i = tid; i < G * D; i += WG)
        store_out(h0 + i / D, j, i % D, 0.0);
    return;
  }
  n = min(split_len, len - t0);
  for (uint i = tid; i < G * TT; i += WG) {
    sm[i] = LOW;
    sl[i] = 0.0;
  }
  if (!full_split)
    [[unroll]] for (uint u = 0u; u < U; u++) {
      rk[u] = k_load(k_base + split_row(t0, u * TT + slot, n) * pc.k_s2, c);
      rv[u] = v_load(v_base + split_row(t0, u * TT + slot, n) * pc.v_s2, c);
    }
  vec4 oa[G], ob[G];
  [[unroll]] for (uint g = 0u; g < G; g++) {
    oa[g] = vec4(0.0);
    ob[g] = vec4(0.0);
  }

  for (uint tile = 0u; tile < n; tile += T) {
    bool more = tile + T < n;
    if (loader)
      [[unroll]] for (uint u = 0u; u < U; u++)
        sk[(u * TT + slot) * NCP + c] =
            k_keep(rk[u], k_base + split_row(t0, tile + u * TT + slot, n) * pc.k_s2, c);
    if (more) // the next tile's K rows, in flight through this tile
      [[unroll]] for (uint u = 0u; u < U; u++)
        rk[u] = k_load(k_base + split_row(t0, tile + T + u * TT + slot, n) * pc.k_s2, c);
    barrier();

    // scores: token t, part p of the row, every head
    for (uint it = tid; it < ITEMS; it += WG) {
      uint t = it % T, p = it / T;
      float acc[G];
      [[unroll]] for (uint g = 0u; g < G; g++)
        acc[g] = 0.0;
      [[unroll]] for (uint i = 0u; i < CP; i++) {
        uint ch = p * CP + i;
        if (ch < NC) {
          vec4 lo, hi;
          float dk;
          k_use(sk[t * NCP + ch], lo, hi, dk);
          [[unroll]] for (uint g = 0u; g < G; g++) {
            uint qi = (g * D) / 4u + 2u * ch;
            acc[g] += dk * (dot(sq[qi], lo) + dot(sq[qi + 1u], hi));
          }
        }
      }
      [[unroll]] for (uint g = 0u; g < G; g++)
        sp[(p * G + g) * T + t] = acc[g];
    }
    barrier();

    // online softmax per head and slot: the scores (partials summed) to probabilities
    for (uint it = tid; it < G * TT; it += WG) {
      uint g = it / TT, sl0 = it % TT;
      float mo = sm[it], mt = mo;
      [[unroll]] for (uint u = 0u; u < U; u++) {
        uint t = u * TT + sl0;
        if (tile + t < n) {
          float sc = 0.0;
          for (uint p = 0u; p < P; p++)
            sc += sp[(p * G + g) * T + t];
          sp[g * T + t] = sc;
          mt = max(mt, sc);
        }
      }
      float ls = 0.0;
      [[unroll]] for (uint u = 0u; u < U; u++) {
        uint t = u * TT + sl0;
        if (tile + t < n) {
          float pr = exp(sp[g * T + t] - mt);
          sp[g * T + t] = pr;
          ls += pr;
        }
      }
      float alpha = exp(mo - mt);
      sm[it] = mt;
      sl[it] = sl[it] * alpha + ls;
      sa[it] = alpha;
    }
    barrier();

    // weighted V over the slot's tokens of the tile
    if (loader) {
      [[unroll]] for (uint g = 0u; g < G; g++) {
        float alpha = sa[g * TT + slot];
        oa[g] *= alpha;
        ob[g] *= alpha;
      }
      [[unroll]] for (uint u = 0u; u < U; u++) {
        uint t = u * TT + slot;
        if (tile + t < n) {
          vec4 lo, hi;
          float dv;
          decode(rv[u], v_base + (t0 + tile + t) * pc.v_s2, c, lo, hi, dv);
          [[unroll]] for (uint g = 0u; g < G; g++) {
            float p = dv * sp[g * T + t];
            oa[g] += p * lo;
            ob[g] += p * hi;
          }
        }
      }
    }
    if (more) // the next tile's V rows, in flight through its scores
      [[unroll]] for (uint u = 0u; u < U; u++)
        rv[u] = v_load(v_base + split_row(t0, tile + T + u * TT + slot, n) * pc.v_s2, c);
  }

  // merge the slots: per head the split's max M and sum L = sum_slot e^(m_slot - M) l_slot
  for (uint g = tid; g < G; g += WG) {
    float mx = LOW;
    for (uint i = 0u; i < TT; i++)
      mx = max(mx, sm[g * TT + i]);
    float l = 0.0;
    for (uint i = 0u; i < TT; i++)
      l += exp(sm[g * TT + i] - mx) * sl[g * TT + i];
    shead[2u * g] = mx;
    shead[2u * g + 1u] = l;
    if (pc.direct != 1u) {
      uint e = (jj * pc.n_head + h0 + g) * pc.n_split + s;
      part[pc.ml_base + 2u * e] = mx;
      part[pc.ml_base + 2u * e + 1u] = l;
    }
  }
  barrier();
  [[unroll]] for (uint g = 0u; g < G; g++) {
    if (loader) {
      float w = exp(sm[g * TT + slot] - shead[2u * g]);
      uint ri = (slot * NC + c) * 8u;
      vec4 a = w * oa[g], b = w * ob[g];
      red[ri] = a.x, red[ri + 1u] = a.y, red[ri + 2u] = a.z, red[ri + 3u] = a.w;
      red[ri + 4u] = b.x, red[ri + 5u] = b.y, red[ri + 6u] = b.z, red[ri + 7u] = b.w;
    }
    barrier();
    for (uint d = tid; d < D; d += WG) {
      float sum = 0.0;
      for (uint i = 0u; i < TT; i++)
        sum += red[i * D + d];
      if (pc.direct == 1u)
        store_out(h0 + g, j, d, sum / shead[2u * g + 1u]);
      else
        part[((jj * pc.n_head + h0 + g) * pc.n_split + s) * D + d] = sum;
    }
    barrier();
  }
  if (pc.direct == 2u)
    merge_if_last(y, jj, j, h0, (len + split_len - 1u) / split_len);
}
