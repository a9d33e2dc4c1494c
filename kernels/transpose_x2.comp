#version 450
// Tiled transpose moving elements two at a time: dst[i1, i0, i2, i3] = src[i0, i1, i2, i3].
// The matrix is read as 2x2 blocks: an invocation loads the element pairs (i0, i0+1) of
// rows i1 and i1+1, swaps the 2x2 block in registers, and parks the two pairs of dst rows
// i0 and i0+1 in shared memory; the write phase stores pairs along dst dim 0. Every global
// access is a pair (8 bytes for 32-bit, 4 for 16-bit elements) and coalesced; the shared
// arrays are padded by one column so neither phase has bank conflicts. Tile: 32x32 blocks
// = 64x64 elements, 32x8 invocations. Elements move as bit patterns (exact).
// The host takes this kernel when both dims 0 are dense and every offset and stride is
// even; a pair cut by the tensor's edge goes through the scalar aliases (bindings 2, 3).
// Offsets/strides in elements; base_* carry the grid split.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : enable

layout(local_size_x = 32, local_size_y = 8) in;

layout(push_constant) uniform Push {
  uint ne0, ne1, ne2;
  uint src_stride[4];
  uint dst_stride[4];
  uint src_offset;
  uint dst_offset;
  uint base_x, base_y, base_z;
} pc;

#ifdef BITS32
#define PAIR uvec2
#define SCALAR uint
#define ZERO uvec2(0u)
#define LO(p) (p).x
#define HI(p) (p).y
#define MAKE(lo, hi) uvec2(lo, hi)
#else
#define PAIR uint
#define SCALAR uint16_t
#define ZERO 0u
#define LO(p) ((p) & 0xffffu)
#define HI(p) ((p) >> 16)
#define MAKE(lo, hi) ((lo) | ((hi) << 16))
#endif

layout(std430, set = 0, binding = 0) restrict readonly buffer SrcP { PAIR src_p[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer DstP { PAIR dst_p[]; };
layout(std430, set = 0, binding = 2) restrict readonly buffer SrcS { SCALAR src_s[]; };
layout(std430, set = 0, binding = 3) restrict writeonly buffer DstS { SCALAR dst_s[]; };

shared PAIR t0[32][33];  // dst row i0 (even), pair (i1, i1 + 1)
shared PAIR t1[32][33];  // dst row i0 + 1

PAIR load_pair(uint e, bool full) {
  if (full)
    return src_p[e >> 1];
  return MAKE(uint(src_s[e]), 0u);
}

#include "tile_order.glsl"

void main() {
  uvec2 t = tile_order();
  uint tx = pc.base_x + t.x;
  uint ty = pc.base_y + t.y;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint lx = gl_LocalInvocationID.x;
  uint ly = gl_LocalInvocationID.y;

  uint src_base = pc.src_offset + i2 * pc.src_stride[2] + i3 * pc.src_stride[3];
  uint i0 = 2u * (tx * 32u + lx);
  bool full0 = i0 + 1u < pc.ne0;
  for (uint j = 0u; j < 32u; j += 8u) {
    uint i1 = 2u * (ty * 32u + ly + j);
    PAIR a = ZERO, b = ZERO;  // rows i1 and i1 + 1, elements (i0, i0 + 1)
    if (i0 < pc.ne0 && i1 < pc.ne1) {
      uint e = src_base + i0 + i1 * pc.src_stride[1];
      a = load_pair(e, full0);
      if (i1 + 1u < pc.ne1)
        b = load_pair(e + pc.src_stride[1], full0);
    }
    t0[ly + j][lx] = MAKE(LO(a), LO(b));
    t1[ly + j][lx] = MAKE(HI(a), HI(b));
  }
  barrier();

  uint dst_base = pc.dst_offset + i2 * pc.dst_stride[2] + i3 * pc.dst_stride[3];
  uint o0 = 2u * (ty * 32u + lx);  // dst dim 0 = src dim 1
  bool full = o0 + 1u < pc.ne1;
  for (uint j = 0u; j < 32u; j += 8u) {
    uint o1 = 2u * (tx * 32u + ly + j);  // dst dim 1 = src dim 0
    if (o0 >= pc.ne1)
      continue;
    for (uint q = 0u; q < 2u; q++) {
      if (o1 + q >= pc.ne0)
        break;
      PAIR w = q == 0u ? t0[lx][ly + j] : t1[lx][ly + j];
      uint e = dst_base + o0 + (o1 + q) * pc.dst_stride[1];
      if (full)
        dst_p[e >> 1] = w;
      else
        dst_s[e] = SCALAR(LO(w));
    }
  }
}
