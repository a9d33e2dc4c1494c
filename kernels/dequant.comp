#version 450
// vkrt_op_copy from a block-quantized tensor (Q8_0, Q4_K or Q6_K, ggml layouts) into f32 or
// f16: one invocation per destination element, any destination strides. The source is read
// in 32-bit words (rows start 2-byte aligned for Q8_0 and Q6_K, 4-byte aligned for Q4_K).
// Source offset and strides are bytes, destination ones elements.
// GET_ROWS (vkrt_op_get_rows): source row i1 of the copy is row ids[i1] of the table (F32,
// F16, Q8_0, Q4_K or Q6_K); an id outside [0, n_rows) gives a row of zeros. The destination is
// f32 written as bits, so f32 rows move bit for bit and f16 ones widen exactly (NaN
// payloads included).
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint ne[4];
  uint src_stride[4];   // bytes (src_stride[0] unused: blocks are dense along dim 0)
  uint dst_stride[4];   // elements
  uint src_offset;      // bytes
  uint dst_offset;      // elements
  uint total;
#ifdef GET_ROWS
  uint ids_offset, ids_stride, n_rows; // elements of ids; rows of the table
#endif
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer S { uint s[]; };
#ifdef GET_ROWS
layout(std430, set = 0, binding = 1) writeonly buffer D { uint d[]; };
layout(std430, set = 0, binding = 2) readonly buffer I { int ids[]; };
#else
layout(std430, set = 0, binding = 1) writeonly buffer D { DST_TYPE d[]; };
#endif

uint src_byte(uint a) { return (s[a >> 2] >> (8u * (a & 3u))) & 255u; }
uint src_u16(uint a) { return (s[a >> 2] >> (8u * (a & 2u))) & 0xffffu; } // a 2-byte aligned
float src_half(uint a) { // a is 2-byte aligned
  vec2 p = unpackHalf2x16(s[a >> 2]);
  return (a & 2u) != 0u ? p.y : p.x;
}

// IEEE half bits -> float bits, every case (subnormals normalized, NaN payloads kept).
uint half_bits_to_float_bits(uint h) {
  uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  if (e == 31u)
    return sign | 0x7f800000u | (m << 13);
  if (e != 0u)
    return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0u)
    return sign;
  uint msb = uint(findMSB(m)); // value m 2^-24 = 1.f 2^(msb - 24)
  return sign | ((msb + 103u) << 23) | ((m << (23u - msb)) & 0x7fffffu);
}

void main() {
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= pc.total)
    return;
  uint i0 = i % pc.ne[0];
  uint t = i / pc.ne[0];
  uint i1 = t % pc.ne[1];
  t /= pc.ne[1];
  uint i2 = t % pc.ne[2];
  uint i3 = t / pc.ne[2];
  uint dst = pc.dst_offset + i0 * pc.dst_stride[0] + i1 * pc.dst_stride[1] +
             i2 * pc.dst_stride[2] + i3 * pc.dst_stride[3];
#ifdef GET_ROWS
  int id = ids[pc.ids_offset + i1 * pc.ids_stride];
  if (id < 0 || uint(id) >= pc.n_rows) {
    d[dst] = 0u;
    return;
  }
  uint row = pc.src_offset + uint(id) * pc.src_stride[1];
#else
  uint row = pc.src_offset + i1 * pc.src_stride[1] + i2 * pc.src_stride[2] + i3 * pc.src_stride[3];
#endif
#if defined(F32)
  d[dst] = s[(row >> 2) + i0 * (pc.src_stride[0] >> 2)];
  return;
#elif defined(F16)
  d[dst] = half_bits_to_float_bits(src_u16(row + i0 * pc.src_stride[0]));
  return;
#elif defined(Q8_0)
  uint blk = row + (i0 / 32u) * 34u;
  float v = src_half(blk) * float(int(src_byte(blk + 2u + i0 % 32u) << 24) >> 24);
#elif defined(Q6_K)
  // ggml dequantize_row_q6_K: weight 32 j + l of half h is the low (j < 2) or high nibble of
  // ql[64 h + 32 (j % 2) + l] under bits 2 j, 2 j + 1 of qh[32 h + l], less 32, times
  // d * scales[8 h + l / 16 + 2 j]
  uint blk = row + (i0 / 256u) * 210u;
  uint e = i0 % 256u, h = e / 128u, j = (e / 32u) % 4u, l = e % 32u;
  uint qlb = src_byte(blk + 64u * h + 32u * (j % 2u) + l), qhb = src_byte(blk + 128u + 32u * h + l);
  int q = int(((qlb >> (4u * (j / 2u))) & 15u) | (((qhb >> (2u * j)) & 3u) << 4)) - 32;
  int sc = int(src_byte(blk + 192u + 8u * h + l / 16u + 2u * j) << 24) >> 24;
  float v = src_half(blk + 208u) * float(sc) * float(q);
#else // Q4_K
  uint blk = row + (i0 / 256u) * 144u;
  uint e = i0 % 256u, g = e / 64u, l = e % 32u;
  uint j = 2u * g + (e % 64u) / 32u; // sub-block
  uint sc, mn;
  if (j < 4u) {
    sc = src_byte(blk + 4u + j) & 63u;
    mn = src_byte(blk + 8u + j) & 63u;
  } else {
    uint hi = src_byte(blk + 8u + j);
    sc = (hi & 15u) | ((src_byte(blk + j) >> 6) << 4);
    mn = (hi >> 4) | ((src_byte(blk + 4u + j) >> 6) << 4);
  }
  uint qb = src_byte(blk + 16u + 32u * g + l);
  uint q = (e % 64u) < 32u ? (qb & 15u) : (qb >> 4);
  float v = src_half(blk) * float(sc) * float(q) - src_half(blk + 2u) * float(mn);
#endif
#if !defined(F32) && !defined(F16)
#ifdef GET_ROWS
  d[dst] = floatBitsToUint(v);
#else
  d[dst] = DST_TYPE(v);
#endif
#endif
}
