// A KV-cache row's conversions (set_rows.comp, and the q/k/v product's cache rows in
// matvec_q8x.comp QKV): f32 to f16 bits rounded to nearest even, and the pieces of ggml's
// quantize_row_q8_0 computed as the CPU computes them.

// float bits -> IEEE half bits, rounded to nearest even (overflow to inf, NaN kept quiet)
uint f32_to_f16_bits(uint x) {
  uint sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u)
    return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) // 65520 and up round to inf
    return sign | 0x7c00u;
  uint h, rem, mid;
  if (a >= 0x38800000u) { // normal half: rebias the exponent by 127 - 15
    uint r = a - 0x38000000u;
    h = r >> 13, rem = r & 0x1fffu, mid = 0x1000u;
  } else { // subnormal half: units of 2^-24
    if (a < 0x33000000u) // below 2^-25 (exactly 2^-25 ties to even zero too)
      return sign;
    uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
    h = m >> shift, rem = m & ((1u << shift) - 1u), mid = 1u << (shift - 1u);
  }
  if (rem > mid || (rem == mid && (h & 1u) != 0u))
    h++;
  return sign | h;
}

// a - q b for q within a few ulps of a / b, from Dekker's exact product (q b = p + e, the
// halves split at 2^12): a - p is exact (p is within a factor 2 of a), e is exact, and the
// difference is rounded once, too little to confuse two neighbours' remainders. precise:
// no fused multiply-add may change the splitting.
float remainder_of(float a, float b, float q) {
  precise float p = q * b;
  precise float cq = 4097.0 * q, qh = cq - (cq - q), ql = q - qh;
  precise float cb = 4097.0 * b, bh = cb - (cb - b), bl = b - bh;
  precise float e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
  precise float r = (a - p) - e;
  return r;
}

// a / b correctly rounded (a >= 0, b > 0) as the CPU divides: a GPU division may be off by
// ulps, so the quotient steps to a neighbour while that one's remainder is smaller.
float div_rn(float a, float b) {
  float q = a / b;
  for (int k = 0; k < 4; k++) {
    float r = remainder_of(a, b, q);
    uint u = floatBitsToUint(q);
    if (r == 0.0 || (r < 0.0 && u == 0u))
      break;
    float n = uintBitsToFloat(r > 0.0 ? u + 1u : u - 1u);
    if (!(abs(remainder_of(a, b, n)) < abs(r)))
      break;
    q = n;
  }
  return q;
}

// C roundf of the product x id (rounded to f32 first, as the CPU does): halves away from
// zero. precise: a fused multiply-add must not compute x id - t from the unrounded product
// (a product that rounds up to k + 0.5 would round down), as NVIDIA's compiler did.
int round_away(float x, float id) {
  precise float v = x * id;
  precise float t = trunc(v);
  precise float f = abs(v - t);
  if (f >= 0.5)
    t += sign(v);
  return int(t);
}

// A q8_0 block of 32 values whose largest magnitude is amax: its scale d (stored as f16),
// the 1 / d the quants are rounded by, and two neighbouring quants as one 16-bit word.
float q8_0_scale(float amax) { return div_rn(amax, 127.0); }
float q8_0_inverse(float dq) { return dq != 0.0 ? div_rn(1.0, dq) : 0.0; }
uint q8_0_pair(float v0, float v1, float id) {
  return (uint(round_away(v0, id)) & 255u) | ((uint(round_away(v1, id)) & 255u) << 8);
}
