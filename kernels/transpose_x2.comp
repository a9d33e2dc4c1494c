#version 450
// Tiled transpose of 16-bit elements (f16) moved as bit patterns two per 32-bit word:
// dst[i1, i0, i2, i3] = src[i0, i1, i2, i3]. A 64x64 tile goes through shared memory
// (one column of padding); reads take word pairs along src dim 0, writes word pairs along
// dst dim 0, so both sides move 4 bytes per invocation and stay coalesced. The host takes
// this kernel when both dims 0 are dense and every offset/stride is even (word aligned);
// a pair cut by the tensor's edge goes through the 16-bit aliases (bindings 2 and 3).
// Offsets/strides in elements; base_* carry the grid split.
#extension GL_EXT_shader_16bit_storage : require

#define TILE 64u
#define ROWS 8u

layout(local_size_x = 32, local_size_y = 8) in;

layout(push_constant) uniform Push {
  uint ne0, ne1, ne2;
  uint src_stride[4];
  uint dst_stride[4];
  uint src_offset;
  uint dst_offset;
  uint base_x, base_y, base_z;
} pc;

layout(std430, set = 0, binding = 0) restrict readonly buffer SrcW { uint src_w[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer DstW { uint dst_w[]; };
layout(std430, set = 0, binding = 2) restrict readonly buffer SrcH { uint16_t src_h[]; };
layout(std430, set = 0, binding = 3) restrict writeonly buffer DstH { uint16_t dst_h[]; };

shared uint tile[TILE][TILE + 1u];

void main() {
  uint tx = pc.base_x + gl_WorkGroupID.x;
  uint ty = pc.base_y + gl_WorkGroupID.y;
  uint z = pc.base_z + gl_WorkGroupID.z;
  uint i2 = z % pc.ne2;
  uint i3 = z / pc.ne2;
  uint lx = gl_LocalInvocationID.x;
  uint ly = gl_LocalInvocationID.y;

  uint src_base = pc.src_offset + i2 * pc.src_stride[2] + i3 * pc.src_stride[3];
  uint i0 = tx * TILE + 2u * lx;
  for (uint j = 0u; j < TILE; j += ROWS) {
    uint i1 = ty * TILE + ly + j;
    if (i0 < pc.ne0 && i1 < pc.ne1) {
      uint h = src_base + i0 + i1 * pc.src_stride[1];
      uint w = i0 + 1u < pc.ne0 ? src_w[h >> 1] : uint(src_h[h]);
      tile[ly + j][2u * lx] = w & 0xffffu;
      tile[ly + j][2u * lx + 1u] = w >> 16;
    }
  }
  barrier();

  uint dst_base = pc.dst_offset + i2 * pc.dst_stride[2] + i3 * pc.dst_stride[3];
  uint o0 = ty * TILE + 2u * lx;  // dst dim 0 = src dim 1
  for (uint j = 0u; j < TILE; j += ROWS) {
    uint o1 = tx * TILE + ly + j;  // dst dim 1 = src dim 0
    if (o0 < pc.ne1 && o1 < pc.ne0) {
      uint h = dst_base + o0 + o1 * pc.dst_stride[1];
      uint lo = tile[2u * lx][ly + j];
      if (o0 + 1u < pc.ne1)
        dst_w[h >> 1] = lo | (tile[2u * lx + 1u][ly + j] << 16);
      else
        dst_h[h] = uint16_t(lo);
    }
  }
}
