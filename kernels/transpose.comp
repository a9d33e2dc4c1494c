#version 450
// Tiled transpose of dims 0 and 1: dst[i1, i0, i2, i3] = src[i0, i1, i2, i3].
// A 32x32 tile goes through shared memory, so both the read (along src dim 0) and the
// write (along dst dim 0 = src dim 1) are coalesced; the +1 column of padding keeps the
// column-wise shared reads free of bank conflicts. TILE x ROWS invocations (defaults
// 32 x 8: 4 rows each); the host reads TILE back as the local size x.
// TYPE is an integer word (uint, uint16_t) and the tile holds uint: elements move as bit
// patterns (an f16 tile of floats rewrote NaN payloads, 0x7c01 -> 0x7e00).
// Workgroup (x, y, z) = (tile along src dim 0, tile along src dim 1, i2 + i3*ne2), offset
// by base_* when the grid is split to stay within maxComputeWorkGroupCount.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require

#ifndef TILE
#define TILE 32
#endif
#ifndef ROWS
#define ROWS 8
#endif

layout(local_size_x = TILE, local_size_y = ROWS) in;

layout(push_constant) uniform Push {
  uint ne0, ne1, ne2;  // src dims 0..2 (dst dims are ne1, ne0, ne2)
  uint src_stride[4];
  uint dst_stride[4];
  uint src_offset;
  uint dst_offset;
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) restrict readonly buffer Src { TYPE src[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer Dst { TYPE dst[]; };

shared uint tile[TILE][TILE + 1];

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
  uint i0 = tx * uint(TILE) + lx;
  for (uint j = 0u; j < uint(TILE); j += uint(ROWS)) {
    uint i1 = ty * uint(TILE) + ly + j;
    if (i0 < pc.ne0 && i1 < pc.ne1)
      tile[ly + j][lx] = uint(src[src_base + i0 * pc.src_stride[0] + i1 * pc.src_stride[1]]);
  }
  barrier();

  uint dst_base = pc.dst_offset + i2 * pc.dst_stride[2] + i3 * pc.dst_stride[3];
  uint o0 = ty * uint(TILE) + lx;  // dst dim 0 = src dim 1
  for (uint j = 0u; j < uint(TILE); j += uint(ROWS)) {
    uint o1 = tx * uint(TILE) + ly + j;  // dst dim 1 = src dim 0
    if (o0 < pc.ne1 && o1 < pc.ne0)
      dst[dst_base + o0 * pc.dst_stride[0] + o1 * pc.dst_stride[1]] = TYPE(tile[lx][ly + j]);
  }
}
