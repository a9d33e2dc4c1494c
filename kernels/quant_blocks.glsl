// Block decoding shared by the quantized matrix-vector kernels (matvec_q4_k.comp and
// matvec_q8x.comp; matvec_q8_0.comp writes the Q8_0 decode out, see there). Included after the kernel's bindings; Q8_0_HALF_BLOCK
// needs `uint w[]`.

#ifdef Q8_0_HALF_BLOCK
// The 16 int8 quants of half-block u (weights 16 u .. 16 u + 15) of a Q8_0 row starting at
// byte row_byte (any even alignment), and its block's d. They start at byte 34 (u / 2) + 2 +
// 16 (u % 2): 4 words as they are when that is 4-byte aligned, else 5 words shifted by 16
// bits (the fifth clamped to the fourth when unused, so nothing is read past the row).
uvec4 q8_0_half_block(uint row_byte, uint u, out float d) {
  uint db = row_byte + 34u * (u >> 1);
  uint w0 = (db + 2u + 16u * (u & 1u)) >> 2;
  bool shifted = (db & 2u) == 0u; // the quants start 2 mod 4
  uint a0 = w[w0], a1 = w[w0 + 1u], a2 = w[w0 + 2u], a3 = w[w0 + 3u];
  uint a4 = w[shifted ? w0 + 4u : w0 + 3u];
  uint dw = w[db >> 2];
  d = unpackHalf2x16((db & 2u) != 0u ? dw >> 16u : dw).x;
  return shifted ? uvec4((a0 >> 16u) | (a1 << 16u), (a1 >> 16u) | (a2 << 16u),
                         (a2 >> 16u) | (a3 << 16u), (a3 >> 16u) | (a4 << 16u))
                 : uvec4(a0, a1, a2, a3);
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
