// What the split passes of vkrt_op_attention share: their push constants and bindings
// (attention.c fills them), and the K/V cache rows. A chunk is 8
// elements of a row: f16 one 16-byte word (bindings k, v of uvec4, row addresses in 16-byte
// words); q8_0 8 quants of a 34-byte block (bindings of uint, row addresses in bytes). A
// chunk is loaded raw (k_load, v_load: the words as they are in memory) and decoded when
// used (decode: the 8 values in lo, hi, times `d`), so loads can be issued ahead.
layout(push_constant) uniform Push {
  uint q_off, q_s1, q_s2;   // f32 elements
  uint k_off, k_s1, k_s2;   // f16: 16-byte units; q8_0: bytes
  uint v_off, v_s1, v_s2;
  uint len_off, len_s0;     // I32 elements
  uint n_ctx, n_split;       // a query of kv_len L: splits of max(ceil(L / n_split), min_split)
  uint min_split;
  uint q0, n_head, head_groups, g_total;
  uint ml_base;             // floats: where the (m, l) pairs start in the scratch
  float scale;
  uint direct;              // one split: o / l into binding 4 = dst at d_off, d_s1, d_s2
  uint d_off, d_s1, d_s2;   // f32 elements
  uint k_vec;               // q8_0 K rows 4-byte aligned, every row of a workgroup in the same
                            // 16-byte phase: attention_rows.comp reads them in 16-byte words
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
#ifdef PART_READ
// the tiles' direct 2 reads the other splits' partials back: past the L1 (coherent)
layout(std430, set = 0, binding = 4) coherent buffer Part { float part[]; };
#else
layout(std430, set = 0, binding = 4) writeonly buffer Part { float part[]; };
#endif

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
// the 8 quants of a raw chunk in two words and its scale
void q8_words(uvec4 raw, uint row, uint c, out uint a, out uint b, out float d) {
  uint blk = row + 34u * (c >> 2u);
  d = unpackHalf2x16((blk & 2u) != 0u ? raw.w >> 16u : raw.w).x;
  a = raw.x;
  b = raw.y;
  if (((blk + 2u + 8u * (c & 3u)) & 2u) != 0u) {
    a = (a >> 16u) | (b << 16u);
    b = (b >> 16u) | (raw.z << 16u);
  }
}
void decode(uvec4 raw, uint row, uint c, out vec4 lo, out vec4 hi, out float d) {
  uint a, b;
  q8_words(raw, row, c, a, b, d);
  lo = unpack_i8(a);
  hi = unpack_i8(b);
}
#endif
