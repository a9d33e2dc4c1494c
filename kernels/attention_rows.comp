#version 450
// Decode attention, the split pass of flash-decoding with a row per invocation: the same
// work, push constants, bindings and results as attention_split.comp (workgroup (y, s, jj)
// attends query q0 + jj over cache tokens [s * split_len, (s + 1) * split_len) cut at that
// query's kv_len (split_len = max(ceil(kv_len / n_split), min_split)), for the G query heads
// of head group y % head_groups of KV head y / head_groups; per head it writes the split's
// max m, sum l and unnormalized o, or o / l to dst when direct), laid out so that no step
// waits for the rest of the workgroup:
// - each subgroup of S invocations walks its own runs of S tokens (runs interleaved over
//   the W subgroups) with its own online softmax; barriers only at the start (queries into
//   shared memory) and at the end (the W subgroups merged);
// - scores: invocation i takes token i of the run and reads its whole K row (in batches of
//   16 chunks, f16, or 4 blocks, q8_0, each batch's loads issued before its arithmetic),
//   summing the dot products with all G queries (shared memory, read by every invocation
//   at once: a broadcast);
// - the run's max and sum per head are subgroup reductions; the probabilities go to the
//   subgroup's corner of shared memory;
// - weighted V: invocation i owns chunk i % NC (8 elements) of the row of every TPS-th
//   token of the run (TPS = S / NC tokens side by side; with NC > S, chunks i, i + S, ...),
//   so a run's V rows are read coalesced; an invocation's rows in batches of 16 chunks,
//   each batch's loads issued at once.
// The bytes in flight then grow with the subgroups resident rather than with a tile
// staged behind barriers. Specialization constants: 0 workgroup size (a multiple of S),
// 1 G, 2 D (head dim, a multiple of 8; q8_0 of 32), 3 S (the subgroup size: the device's,
// fixed). vkrt_ops_attention_rows_plan (validate.c) sizes the shared memory as declared here.
// Q8Q (q8_0 only; vkrt_options.quant_activations = VKRT_ACTIVATIONS_Q8): the scaled queries
// are also rounded to 8 bits per 32 values in shared memory (scale max|q| / 127, round to
// nearest, ties to even so that a reference can repeat it), and a block's score is
// d_k d_q sum q_k q_q by integer dot products of 4 int8 pairs: 8 instructions a block and
// head instead of 8 conversions of the K quants and 32 multiply-adds.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0, local_size_x = 128) in;
layout(constant_id = 1) const uint G = 1u;
layout(constant_id = 2) const uint D = 128u;
layout(constant_id = 3) const uint S = 32u;
const uint WG = gl_WorkGroupSize.x;
const uint W = WG / S;                   // subgroups
const uint NC = D / 8u;                  // chunks per row
const uint TPS = NC < S ? S / NC : 1u;   // tokens side by side in the V pass
const uint LC = (NC + S - 1u) / S;       // chunks per invocation in the V pass
const uint VT = (S + TPS - 1u) / TPS;    // tokens per invocation and run in the V pass
const uint VB = 16u / LC > 0u ? 16u / LC : 1u; // of them loaded at once (16 chunks)
const uint KB = NC < 16u ? NC : 16u;     // K chunks of a row loaded at once (f16)
const uint QB = D / 32u < 4u ? (D / 32u > 0u ? D / 32u : 1u) : 4u; // q8_0 blocks at once
const float LOW = -3.402823466e38;       // the max before any score



#include "attention_kv.glsl"
#ifdef Q8Q
#extension GL_EXT_spirv_intrinsics : require
// OpSDot (4450) on two words of 4 packed int8 (PackedVectorFormat4x8Bit = 0)
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dot4(uint a, uint b, spirv_literal int packed_4x8);
shared uint sqi[G * D / 4u];   // the scaled queries as int8, 4 a word
shared float sqd[G * D / 32u]; // the scale of each 32
#endif
#include "attention_split_len.glsl"

shared vec4 sq[G * D / 4u]; // the scaled queries; at the end the merged o
shared float sp[W * S * G]; // per subgroup: the run's probabilities [token][head]
shared float sm[W * G];     // per subgroup and head: max and sum, for the merge
shared float sl[W * G];

#ifndef KV_F16
// q8_0 K rows as 16-byte words where pc.k_vec says they may be (D a multiple of 64): a row in
// parts of HB dimensions (HBB bytes, HW words, a whole number of each), each part's words
// from the first 16-byte boundary in it by 16-byte loads (the LEAD words before it and the
// ones after the last one by 4-byte loads), so a row costs about a quarter of the loads of
// its words one by one. The parts of a workgroup's rows share their 16-byte phase.
layout(std430, set = 0, binding = 5) readonly buffer K4 { uvec4 k4[]; }; // binding 2 again
const bool K16 = D % 64u == 0u;
const uint HB = D % 128u == 0u ? 128u : 64u;
const uint HBB = 34u * HB / 32u;
const uint HW = HBB / 4u;
// wd[0 .. HW) = the HW words at byte a (4-byte aligned, a + 4 LEAD on a 16-byte boundary)
#define K_WORDS(LEAD)                                                                         \
  {                                                                                          \
    [[unroll]] for (uint i = 0u; i < (LEAD); i++)                                            \
      wd[i] = k[(a >> 2u) + i];                                                              \
    [[unroll]] for (uint i = 0u; i < (HW - (LEAD)) / 4u; i++) {                              \
      uvec4 u = k4[((a >> 2u) + (LEAD)) / 4u + i];                                           \
      wd[(LEAD) + 4u * i] = u.x;                                                             \
      wd[(LEAD) + 4u * i + 1u] = u.y;                                                        \
      wd[(LEAD) + 4u * i + 2u] = u.z;                                                        \
      wd[(LEAD) + 4u * i + 3u] = u.w;                                                        \
    }                                                                                        \
    [[unroll]] for (uint i = (LEAD) + (HW - (LEAD)) / 4u * 4u; i < HW; i++)                  \
      wd[i] = k[(a >> 2u) + i];                                                              \
  }

// The 9 words holding block b (32 quants, 34 bytes from a 2-byte boundary) of a q8_0 row
// at byte `row`, from the one holding its first byte; q8_block decodes them.
void q8_block_load(uint row, uint b, out uint ws[9]) {
  uint w0 = (row + 34u * b) >> 2u;
  [[unroll]] for (uint i = 0u; i < 9u; i++)
    ws[i] = k[w0 + i];
}
// The quants of block b in 8 words and its scale d, from its words.
void q8_block(uint row, uint b, uint ws[9], out uint qw[8], out float d) {
  if (((row + 34u * b) & 2u) != 0u) { // scale in the high half of word 0, quants from word 1
    d = unpackHalf2x16(ws[0] >> 16u).x;
    [[unroll]] for (uint i = 0u; i < 8u; i++)
      qw[i] = ws[i + 1u];
  } else {
    d = unpackHalf2x16(ws[0]).x;
    [[unroll]] for (uint i = 0u; i < 8u; i++)
      qw[i] = (ws[i] >> 16u) | (ws[i + 1u] << 16u);
  }
}

// Query g's dot product with the 32 quants of block b (before the block's scale)
float q8_block_dot(uint g, uint b, uint qw[8]) {
#ifdef Q8Q
  int acc = 0;
  [[unroll]] for (uint j = 0u; j < 8u; j++)
    acc += dot4(qw[j], sqi[(g * D) / 4u + 8u * b + j], 0);
  return sqd[(g * D) / 32u + b] * float(acc);
#else
  float acc = 0.0;
  [[unroll]] for (uint j = 0u; j < 8u; j++)
    acc += dot(sq[(g * D) / 4u + 8u * b + j], unpack_i8(qw[j]));
  return acc;
#endif
}
#endif

void main() {
  uint y = pc.base_x + gl_WorkGroupID.x;
  uint s = pc.base_y + gl_WorkGroupID.y;
  uint jj = pc.base_z + gl_WorkGroupID.z;
  uint hk = y / pc.head_groups;
  uint h0 = hk * pc.g_total + (y % pc.head_groups) * G;
  uint j = pc.q0 + jj;
  uint len = uint(clamp(kv_len[pc.len_off + j * pc.len_s0], 0, int(pc.n_ctx)));
  uint split_len = attention_split_len(len, pc.n_split, pc.min_split);
  uint t0 = s * split_len;
  uint tid = gl_LocalInvocationID.x;
  if (t0 >= len) {
    // past this query's length: the combine ignores the split; alone, it is the answer: 0
    if (pc.direct != 0u)
      for (uint i = tid; i < G * D; i += WG)
        part[pc.d_off + (h0 + i / D) * pc.d_s1 + j * pc.d_s2 + i % D] = 0.0;
    return;
  }
  uint n = min(split_len, len - t0);
  uint w = tid / S, lane = tid % S;
  uint k_base = pc.k_off + hk * pc.k_s1, v_base = pc.v_off + hk * pc.v_s1;

  for (uint i = tid; i < G * D / 4u; i += WG) {
    uint g = i / (D / 4u), d = 4u * (i % (D / 4u));
    uint qi = pc.q_off + (h0 + g) * pc.q_s1 + j * pc.q_s2 + d;
    sq[i] = pc.scale * vec4(q[qi], q[qi + 1u], q[qi + 2u], q[qi + 3u]);
  }
  barrier();
#ifdef Q8Q
  for (uint i = tid; i < G * D / 32u; i += WG) { // block i: sq[8 i .. 8 i + 7]
    float amax = 0.0;
    [[unroll]] for (uint e = 0u; e < 8u; e++) {
      vec4 a = abs(sq[8u * i + e]);
      amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    float inv = amax > 0.0 ? 127.0 / amax : 0.0;
    sqd[i] = amax / 127.0;
    [[unroll]] for (uint e = 0u; e < 8u; e++) {
      ivec4 r = clamp(ivec4(roundEven(sq[8u * i + e] * inv)), ivec4(-127), ivec4(127));
      sqi[8u * i + e] = (uint(r.x) & 255u) | ((uint(r.y) & 255u) << 8u) |
                        ((uint(r.z) & 255u) << 16u) | (uint(r.w) << 24u);
    }
  }
  barrier();
#endif

  float m[G], l[G];
  vec4 oa[G * LC], ob[G * LC]; // the V pass's sums: head g, chunk slot ci at g * LC + ci
  [[unroll]] for (uint g = 0u; g < G; g++) {
    m[g] = LOW;
    l[g] = 0.0;
    [[unroll]] for (uint ci = 0u; ci < LC; ci++) {
      oa[g * LC + ci] = vec4(0.0);
      ob[g * LC + ci] = vec4(0.0);
    }
  }
  uint vc = lane % NC, vt = lane / NC; // the V pass: chunk (first of LC) and token slot
  uint spw = w * S * G;

  for (uint run = w * S; run < n; run += WG) { // uniform in the subgroup
    uint t = run + lane;
    bool valid = t < n;
    uint row = t0 + min(t, n - 1u); // past n: the last row (valid memory, score unused)
    float sc[G];
    [[unroll]] for (uint g = 0u; g < G; g++)
      sc[g] = 0.0;
#ifdef KV_F16
    uint kr = k_base + row * pc.k_s2;
    // the row in batches of KB chunks, each batch's loads issued before its arithmetic
    for (uint c0 = 0u; c0 < NC; c0 += KB) {
      uvec4 raw[KB];
      [[unroll]] for (uint i = 0u; i < KB; i++)
        raw[i] = c0 + i < NC ? k_load(kr, c0 + i) : uvec4(0u);
      [[unroll]] for (uint i = 0u; i < KB; i++) {
        uint c = c0 + i;
        if (c < NC) {
          vec4 lo, hi;
          float dk;
          decode(raw[i], kr, c, lo, hi, dk);
          [[unroll]] for (uint g = 0u; g < G; g++) {
            uint qi = (g * D) / 4u + 2u * c;
            sc[g] += dot(sq[qi], lo) + dot(sq[qi + 1u], hi);
          }
        }
      }
    }
#else
    uint kr = k_base + row * pc.k_s2;
    if (K16 && pc.k_vec != 0u) {
      [[unroll]] for (uint pt = 0u; pt < D / HB; pt++) {
        uint a = kr + HBB * pt, wd[34]; // HW of them
        switch ((a >> 2u) & 3u) { // uniform in the workgroup (pc.k_vec)
        case 0u: K_WORDS(0u); break;
        case 1u: K_WORDS(3u); break;
        case 2u: K_WORDS(2u); break;
        default: K_WORDS(1u); break;
        }
        [[unroll]] for (uint bb = 0u; bb < HB / 32u; bb++) {
          uint ws[9], qw[8];
          [[unroll]] for (uint i = 0u; i < 9u; i++)
            ws[i] = wd[((34u * bb) >> 2u) + i];
          uint b = pt * (HB / 32u) + bb;
          float dk;
          q8_block(kr, b, ws, qw, dk);
          [[unroll]] for (uint g = 0u; g < G; g++)
            sc[g] += dk * q8_block_dot(g, b, qw);
        }
      }
    } else
    // the row in batches of QB blocks, each batch's loads issued before its arithmetic
    for (uint b0 = 0u; b0 < D / 32u; b0 += QB) {
      uint ws[QB][9];
      [[unroll]] for (uint i = 0u; i < QB; i++)
        if (b0 + i < D / 32u)
          q8_block_load(kr, b0 + i, ws[i]);
      [[unroll]] for (uint i = 0u; i < QB; i++) {
        uint b = b0 + i;
        if (b < D / 32u) {
          uint qw[8];
          float dk;
          q8_block(kr, b, ws[i], qw, dk);
          [[unroll]] for (uint g = 0u; g < G; g++)
            sc[g] += dk * q8_block_dot(g, b, qw);
        }
      }
    }
#endif
    // the run's probabilities and the rescale of the earlier sums, per head
    [[unroll]] for (uint g = 0u; g < G; g++) {
      float x = valid ? sc[g] : LOW;
      float mn = max(m[g], subgroupMax(x));
      float p = valid ? exp(x - mn) : 0.0;
      float alpha = exp(m[g] - mn);
      l[g] = l[g] * alpha + subgroupAdd(p);
      m[g] = mn;
      [[unroll]] for (uint ci = 0u; ci < LC; ci++) {
        oa[g * LC + ci] *= alpha;
        ob[g * LC + ci] *= alpha;
      }
      sp[spw + lane * G + g] = p;
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    // weighted V: the invocation's tokens of the run in batches of VB, each batch's loads
    // issued at once (tokens past the run load the last row and are not used)
    uint count = min(S, n - run);
    if (vt < TPS)
      for (uint i0 = 0u; i0 < VT && vt + i0 * TPS < count; i0 += VB) {
        uvec4 raw[VB * LC];
        [[unroll]] for (uint i = 0u; i < VB; i++) {
          uint vr = v_base + (t0 + run + min(vt + (i0 + i) * TPS, count - 1u)) * pc.v_s2;
          [[unroll]] for (uint ci = 0u; ci < LC; ci++)
            raw[i * LC + ci] = vc + ci * S < NC ? v_load(vr, vc + ci * S) : uvec4(0u);
        }
        [[unroll]] for (uint i = 0u; i < VB; i++) {
          uint tt = vt + (i0 + i) * TPS;
          if (i0 + i < VT && tt < count) {
            uint vr = v_base + (t0 + run + tt) * pc.v_s2;
            [[unroll]] for (uint ci = 0u; ci < LC; ci++) {
              uint c = vc + ci * S;
              if (c < NC) {
                vec4 lo, hi;
                float dv;
                decode(raw[i * LC + ci], vr, c, lo, hi, dv);
                [[unroll]] for (uint g = 0u; g < G; g++) {
                  float p = dv * sp[spw + tt * G + g];
                  oa[g * LC + ci] += p * lo;
                  ob[g * LC + ci] += p * hi;
                }
              }
            }
          }
        }
      }
    subgroupBarrier(); // every invocation read the run's probabilities before the next
  }

  // merge the subgroups: per head the split's max M and L = sum_w e^(m_w - M) l_w; o
  // summed into sq (the queries are no longer read once every subgroup is here)
  if (lane == 0u)
    [[unroll]] for (uint g = 0u; g < G; g++) {
      sm[w * G + g] = m[g];
      sl[w * G + g] = l[g];
    }
  barrier();
  for (uint i = tid; i < G * D / 4u; i += WG)
    sq[i] = vec4(0.0);
  barrier();
  for (uint ww = 0u; ww < W; ww++) {
    if (w == ww)
      for (uint tt = 0u; tt < TPS; tt++) { // token slots holding the same chunk, in turn
        if (vt == tt)
          [[unroll]] for (uint g = 0u; g < G; g++) {
            float mx = LOW;
            for (uint i = 0u; i < W; i++)
              mx = max(mx, sm[i * G + g]);
            float f = exp(m[g] - mx);
            [[unroll]] for (uint ci = 0u; ci < LC; ci++) {
              uint c = vc + ci * S;
              if (c < NC) {
                uint at = (g * D) / 4u + 2u * c;
                sq[at] += f * oa[g * LC + ci];
                sq[at + 1u] += f * ob[g * LC + ci];
              }
            }
          }
        subgroupMemoryBarrierShared();
        subgroupBarrier();
      }
    barrier();
  }
  for (uint i = tid; i < G * D; i += WG) {
    uint g = i / D, d = i % D;
    float mx = LOW, lt = 0.0;
    for (uint ww = 0u; ww < W; ww++)
      mx = max(mx, sm[ww * G + g]);
    for (uint ww = 0u; ww < W; ww++)
      lt += exp(sm[ww * G + g] - mx) * sl[ww * G + g];
    float o = sq[i / 4u][i % 4u];
    if (pc.direct != 0u) {
      part[pc.d_off + (h0 + g) * pc.d_s1 + j * pc.d_s2 + d] = o / lt;
    } else {
      uint e = (jj * pc.n_head + h0 + g) * pc.n_split + s;
      part[e * D + d] = o;
      if (d == 0u) {
        part[pc.ml_base + 2u * e] = mx;
        part[pc.ml_base + 2u * e + 1u] = lt;
      }
    }
  }
}
