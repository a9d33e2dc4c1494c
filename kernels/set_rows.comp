#version 450
// KV-cache append (ggml SET_ROWS): row i of the f32 source goes to row rows[i] of d, one
// invocation per element (F32: the bits moved; F16: rounded to nearest even; Q8_0: by
// blocks of 32, ggml quantize_row_q8_0: d = max|x| / 127, id = d ? 1 / d : 0, q = roundf(x id)
// with halves away from zero, d stored as f16; both divisions correctly rounded as on the
// CPU, without relying on a fused fma, and x id rounded before it is rounded to an integer). A row index outside [0, n_rows) is skipped. Source
// offsets and strides are elements; destination ones elements (F32, F16) or bytes (Q8_0,
// blocks dense along dim 0).
// ROPE (vkrt_op_rope_set_rows): the source row of token i is its heads {head_dim, n_head}
// (head h at s_stride_h), each turned as rope.comp turns it at position pos[i] before it is
// converted: the KV-cache append of a roped K in one dispatch. Each element is computed
// from its pair by its own invocation.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint n, total;           // n: elements per row; total: invocations (elements or blocks)
  uint s_offset, s_stride0, s_stride1;
  uint d_offset, d_stride0, d_stride1;
  uint r_offset, r_stride, n_rows;
  // ROPE only (declared in every form, so that one host struct pushes them all)
  uint s_stride_h, head_dim, n_dims, neox;
  uint pos_offset, pos_stride;
  float theta_scale, freq_scale;
  uint factors, factors_offset, factors_stride; // factors 0: none (f is s's buffer)
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer S { uint s[]; };
layout(std430, set = 0, binding = 1) readonly buffer R { int rows[]; };
#ifdef F32
layout(std430, set = 0, binding = 2) writeonly buffer D { uint d[]; };
#else
layout(std430, set = 0, binding = 2) writeonly buffer D { uint16_t d[]; };
#endif
#ifdef ROPE
layout(std430, set = 0, binding = 3) readonly buffer P { int pos[]; };
layout(std430, set = 0, binding = 4) readonly buffer F { float f[]; };
#include "rope_angle.glsl"

// Element e (0 .. n - 1: head e / head_dim) of token i1's source row, roped.
float roped(uint i1, uint e) {
  uint h = e / pc.head_dim, j = e % pc.head_dim;
  uint base = pc.s_offset + i1 * pc.s_stride1 + h * pc.s_stride_h;
  if (j >= pc.n_dims)
    return uintBitsToFloat(s[base + j * pc.s_stride0]);
  uint half_dims = pc.n_dims / 2u;
  uint p = pc.neox != 0u ? j % half_dims : j / 2u;
  uint e0 = pc.neox != 0u ? p : 2u * p, e1 = pc.neox != 0u ? p + half_dims : 2u * p + 1u;
  vec2 cs = rope_cos_sin(pos[pc.pos_offset + i1 * pc.pos_stride], p, pc.theta_scale,
                         pc.freq_scale, pc.factors != 0u,
                         f[pc.factors_offset + min(pc.factors, 1u) * p * pc.factors_stride]);
  float x0 = uintBitsToFloat(s[base + e0 * pc.s_stride0]);
  float x1 = uintBitsToFloat(s[base + e1 * pc.s_stride0]);
  return j == e0 ? x0 * cs.x - x1 * cs.y : x0 * cs.y + x1 * cs.x;
}
#endif

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

#ifdef Q8_0
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
#endif

#ifdef ROPE
#define SRC_VALUE(i1, e) roped(i1, e)
#else
#define SRC_VALUE(i1, e) uintBitsToFloat(s[pc.s_offset + (i1) * pc.s_stride1 + (e) * pc.s_stride0])
#endif

#ifdef Q8_0
shared float sv[256]; // the workgroup's values: 8 whole blocks (n is a multiple of 32)

// One invocation per element: each computes its value into shared memory, then every one
// of a block finds the block's max (so d and 1 / d are the same everywhere in it), and the
// even ones write their pair of quants, the first the f16 d.
void main() {
  uint lid = gl_LocalInvocationID.x;
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u + lid;
  bool live = i < pc.total;
  uint ic = min(i, pc.total - 1u); // past the end: the last element again, not written
  uint i0 = ic % pc.n, i1 = ic / pc.n;
  int row = rows[pc.r_offset + i1 * pc.r_stride]; // in flight with the value's loads
  sv[lid] = SRC_VALUE(i1, i0);
  barrier();
  if (!live || row < 0 || uint(row) >= pc.n_rows)
    return;
  uint b0 = lid & ~31u, e = i0 & 31u;
  float amax = 0.0;
  for (uint j = 0u; j < 32u; j++)
    amax = max(amax, abs(sv[b0 + j]));
  float dq = div_rn(amax, 127.0);
  float id = dq != 0.0 ? div_rn(1.0, dq) : 0.0;
  uint h = (pc.d_offset + uint(row) * pc.d_stride1 + 34u * (i0 >> 5)) >> 1; // 2-byte aligned
  if (e == 0u)
    d[h] = uint16_t(f32_to_f16_bits(floatBitsToUint(dq)));
  if ((e & 1u) == 0u) {
    int q0 = round_away(sv[lid], id), q1 = round_away(sv[lid + 1u], id);
    d[h + 1u + (e >> 1)] = uint16_t((uint(q0) & 255u) | ((uint(q1) & 255u) << 8));
  }
}
#else
void main() {
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= pc.total)
    return;
  uint i0 = i % pc.n, i1 = i / pc.n;
  // the value is loaded before the row is known (one memory latency for both)
  int row = rows[pc.r_offset + i1 * pc.r_stride];
#ifdef ROPE
  uint bits = floatBitsToUint(roped(i1, i0));
#else
  uint bits = s[pc.s_offset + i1 * pc.s_stride1 + i0 * pc.s_stride0]; // f32: moved bit for bit
#endif
  if (row < 0 || uint(row) >= pc.n_rows)
    return;
#ifdef F32
  d[pc.d_offset + uint(row) * pc.d_stride1 + i0 * pc.d_stride0] = bits;
#else
  d[pc.d_offset + uint(row) * pc.d_stride1 + i0 * pc.d_stride0] = uint16_t(f32_to_f16_bits(bits));
#endif
}
#endif
