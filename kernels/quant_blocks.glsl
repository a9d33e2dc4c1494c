// Block decoding shared by the quantized matrix-vector kernels (matvec_q4_k.comp,
// matvec_q8x.comp, matvec_q_cols.comp and matvec_q6_k.comp; matvec_q8_0.comp writes the Q8_0
// decode out, see there) and the tiled matmul (matmul.comp). Included after the kernel's
// bindings, each part where the kernel defines its guard (Q8_0_HALF_BLOCK needs `uint w[]`;
// Q4_K_FLOATS and Q8_0_PIECES: matvec_q_cols.comp, matvec_q_stream.comp keeps its own
// copies; Q6_K_QUANTS: matvec_q6_k.comp, matmul.comp and matvec_q8x.comp's q6_words).

#ifdef Q8_0_HALF_BLOCK
// Half-block u (weights 16 u .. 16 u + 15) of a Q8_0 row starting at byte row_byte (any even
// alignment). Its 16 int8 quants start at byte 34 (u / 2) + 2 + 16 (u % 2): 4 words as they
// are when that is 4-byte aligned, else 5 words shifted by 16 bits (the fifth clamped to the
// fourth when unused, so nothing is read past the row). q8_0_half_raw loads those five words
// and the word of the block's d (a[5]); q8_0_half_decode turns them into the quants and d,
// so that a kernel may issue the next unit's loads before this unit's arithmetic.
void q8_0_half_raw(uint row_byte, uint u, out uint a[6]) {
  uint db = row_byte + 34u * (u >> 1);
  uint w0 = (db + 2u + 16u * (u & 1u)) >> 2;
  bool shifted = (db & 2u) == 0u; // the quants start 2 mod 4
  a[0] = w[w0];
  a[1] = w[w0 + 1u];
  a[2] = w[w0 + 2u];
  a[3] = w[w0 + 3u];
  a[4] = w[shifted ? w0 + 4u : w0 + 3u];
  a[5] = w[db >> 2];
}

uvec4 q8_0_half_decode(uint row_byte, uint u, uint a[6], out float d) {
  uint db = row_byte + 34u * (u >> 1);
  d = unpackHalf2x16((db & 2u) != 0u ? a[5] >> 16u : a[5]).x;
  return (db & 2u) == 0u ? uvec4((a[0] >> 16u) | (a[1] << 16u), (a[1] >> 16u) | (a[2] << 16u),
                                 (a[2] >> 16u) | (a[3] << 16u), (a[3] >> 16u) | (a[4] << 16u))
                         : uvec4(a[0], a[1], a[2], a[3]);
}

// the quants and d of half-block u, loaded and decoded at once
uvec4 q8_0_half_block(uint row_byte, uint u, out float d) {
  uint a[6];
  q8_0_half_raw(row_byte, u, a);
  return q8_0_half_decode(row_byte, u, a, d);
}
#endif

#ifdef Q4_K_SCALES
// The 6-bit scales and mins of the eight sub-blocks from the header words h = (d and dmin,
// scale bytes 0..3, 4..7, 8..11), packed one per byte (ggml get_scale_min_k4 on words):
// (scales 0..3, scales 4..7, mins 0..3, mins 4..7). Sub-blocks 0..3 are the low 6 bits of
// bytes 0..3 (scales) and 4..7 (mins); 4..7 take bytes 8..11's nibbles and the top two bits
// of bytes 0..7.
uvec4 scales_mins(uvec4 h) {
  return uvec4(h.y & 0x3f3f3f3fu, (h.w & 0x0f0f0f0fu) | ((h.y >> 2u) & 0x30303030u),
               h.z & 0x3f3f3f3fu, ((h.w >> 4u) & 0x0f0f0f0fu) | ((h.z >> 2u) & 0x30303030u));
}

// (d sc, dmin m) of sub-blocks sub and sub + 1 (sub even)
vec4 pair_scales(uvec4 h, uint sub) {
  uvec4 sm = scales_mins(h);
  bool high = sub >= 4u;
  uint sc = high ? sm.y : sm.x, mn = high ? sm.w : sm.z;
  uint sh = 8u * (sub & 3u);
  vec2 dd = unpackHalf2x16(h.x);
  return vec4(dd.x * float((sc >> sh) & 255u), dd.y * float((mn >> sh) & 255u),
              dd.x * float((sc >> (sh + 8u)) & 255u), dd.y * float((mn >> (sh + 8u)) & 255u));
}
#endif

#ifdef Q4_K_FLOATS
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
#endif

#ifdef Q8_0_PIECES
// the four int8 quants of word v as floats: (byte ^ 0x80) in the low mantissa bits of 2^23
// (bytes 0, 2) or 2^15 (bytes 1, 3, eight bits up), less 2^e + 128: exact
vec4 q8_floats(uint v) {
  uint u = v >> 16u;
  return vec4(uintBitsToFloat((v & 0xffu) ^ 0x4b000080u) - 8388736.0,
              uintBitsToFloat((v & 0xff00u) ^ 0x47008000u) - 32896.0,
              uintBitsToFloat((u & 0xffu) ^ 0x4b000080u) - 8388736.0,
              uintBitsToFloat((u & 0xff00u) ^ 0x47008000u) - 32896.0);
}

// Piece u * 8 + (invocation % 8) of a Q8_0 row of whole 272-byte runs of 8 blocks (clamped
// to the last; valid says whether it exists): c its index, id the granule holding a d (>= 8:
// none), kq the k of its first quant granule (granule i != id weighs x[kq + 2 m] and
// x[kq + 2 m + 1], m = i - (i > id)), dbyte the row byte of the d of the block its first
// granule belongs to.
struct piece_t {
  uint c, id, kq, dbyte;
  bool valid;
};
piece_t piece(uint u, uint pieces) {
  piece_t pp;
  uint c = u * 8u + (gl_LocalInvocationID.x & 7u);
  pp.valid = c < pieces;
  c = min(c, pieces - 1u);
  uint per = c / 17u, j = c - per * 17u;     // run, piece in it
  uint g0 = 8u * j;                          // its first granule in the run
  uint b0 = g0 / 17u, pos0 = g0 - b0 * 17u;  // block and place of that granule
  pp.c = c;
  pp.id = pos0 == 0u ? 0u : 17u - pos0;
  pp.kq = per * 256u + 32u * b0 + (pos0 == 0u ? 0u : 2u * (pos0 - 1u));
  pp.dbyte = per * 272u + 34u * b0;
  return pp;
}
#endif

#ifdef Q6_K_QUANTS
// Q6_K super-blocks are 210 bytes, so every other one starts 2 mod 4: the 8 bytes at an even
// byte b of a block are the words at b >> 2 and on as they are (odd false), or shifted by
// 16 bits out of three (odd: b is 2 mod 4; a2 is not used otherwise, so a kernel may load
// the second word again there and read nothing past the block).
uvec2 q6_words(uint a0, uint a1, uint a2, bool odd) {
  return odd ? uvec2((a0 >> 16u) | (a1 << 16u), (a1 >> 16u) | (a2 << 16u)) : uvec2(a0, a1);
}

// The 6-bit quants (0..63, one a byte) of quarter j (0..3) of four consecutive weights
// l .. l + 3 of a half-block (weights 32 j + l ..): low (j < 2) or high nibbles of ql_word
// (ql bytes l .. of j even, l + 32 .. of j odd) under bits 2 j, 2 j + 1 of qh_word (qh bytes
// l ..), as ggml's dequantize_row_q6_K.
uint q6_quants(uint ql_word, uint qh_word, uint j) {
  return ((ql_word >> (4u * (j >> 1))) & 0x0f0f0f0fu) |
         (((qh_word >> (2u * j)) << 4u) & 0x30303030u);
}

// The four quants of q6_quants' word v less 32 as floats, exact: each byte in the low
// mantissa bits of 2^23 (bytes 0, 2) or 2^15 (bytes 1, 3, eight bits up), less 2^e + 32.
vec4 q6_floats(uint v) {
  uint u = v >> 16u;
  return vec4(uintBitsToFloat((v & 0xffu) | 0x4b000000u) - 8388640.0,
              uintBitsToFloat((v & 0xff00u) | 0x47000000u) - 32800.0,
              uintBitsToFloat((u & 0xffu) | 0x4b000000u) - 8388640.0,
              uintBitsToFloat((u & 0xff00u) | 0x47000000u) - 32800.0);
}
#endif
