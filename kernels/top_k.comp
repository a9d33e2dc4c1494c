#version 450
// Top-k per row (vkrt_op_top_k): the k largest elements of each row of x, largest first, the
// lower index first among equal ones; NaN reads as -inf. A key orders an element: (the
// value's bits mapped so that unsigned order is float order, ~index), the larger key first.
// Each workgroup sorts up to SORT keys in shared memory (bitonic, descending) and keeps the
// first k:
//   mode 0: a slice of `per` elements of a row of x -> a list of k keys
//   mode 1: `per` lists of k keys of a row -> one list
// until one list is left for a row; `last` writes it to values and ids instead of keys.
// Missing elements (past the row, past the lists) are the key (0, 0), below every element's:
// the op needs k <= n, so they never reach the result.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 256) in;
const uint WG = gl_WorkGroupSize.x;
const uint SORT = 2048u;

layout(push_constant) uniform Push {
  uint n;              // mode 0: elements of a row; mode 1: lists of a row
  uint k;              // keys a list holds
  uint per;            // mode 0: elements a workgroup; mode 1: lists a workgroup
  uint mode, last;
  uint x_offset, x_stride0, x_stride1;
  uint in_base, in_row;   // mode 1: a row's lists at in_base + row in_row (keys)
  uint out_base, out_row; // not last: the lists written at out_base + row out_row
  uint v_offset, v_stride0, v_stride1;
  uint i_offset, i_stride0, i_stride1;
  uint base_x, base_y, base_z; // last: vkrt_ops_dispatch_3d fills them
} pc;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer P { uvec2 part[]; };
layout(std430, set = 0, binding = 2) writeonly buffer V { float values[]; };
layout(std430, set = 0, binding = 3) writeonly buffer I { int ids[]; };

shared uvec2 keys[SORT];

uvec2 key_of(float v, uint i) {
  uint b = isnan(v) ? 0xff800000u : floatBitsToUint(v);
  return uvec2((b & 0x80000000u) != 0u ? ~b : b | 0x80000000u, ~i);
}

float value_of(uvec2 key) {
  return uintBitsToFloat((key.x & 0x80000000u) != 0u ? key.x & 0x7fffffffu : ~key.x);
}

bool greater(uvec2 a, uvec2 b) { return a.x > b.x || (a.x == b.x && a.y > b.y); }

void main() {
  uint g = pc.base_x + gl_WorkGroupID.x, row = pc.base_y + gl_WorkGroupID.y;
  uint tid = gl_LocalInvocationID.x;
  if (pc.mode == 0u) {
    for (uint i = tid; i < SORT; i += WG) {
      uint e = g * pc.per + i;
      keys[i] = i < pc.per && e < pc.n
                    ? key_of(x[pc.x_offset + e * pc.x_stride0 + row * pc.x_stride1], e)
                    : uvec2(0u);
    }
  } else {
    for (uint i = tid; i < SORT; i += WG) {
      uint list = g * pc.per + i / pc.k;
      keys[i] = i < pc.per * pc.k && list < pc.n
                    ? part[pc.in_base + row * pc.in_row + list * pc.k + i % pc.k]
                    : uvec2(0u);
    }
  }
  // bitonic: blocks of `size` sorted in alternating directions, merged; the last descending
  for (uint size = 2u; size <= SORT; size <<= 1u)
    for (uint stride = size >> 1u; stride > 0u; stride >>= 1u) {
      barrier();
      for (uint p = tid; p < SORT / 2u; p += WG) {
        uint i = 2u * p - (p & (stride - 1u)), j = i + stride;
        uvec2 a = keys[i], b = keys[j];
        if ((i & size) == 0u ? greater(b, a) : greater(a, b)) {
          keys[i] = b;
          keys[j] = a;
        }
      }
    }
  barrier();
  for (uint j = tid; j < pc.k; j += WG) {
    uvec2 key = keys[j];
    if (pc.last != 0u) {
      values[pc.v_offset + j * pc.v_stride0 + row * pc.v_stride1] = value_of(key);
      ids[pc.i_offset + j * pc.i_stride0 + row * pc.i_stride1] = int(~key.y);
    } else {
      part[pc.out_base + row * pc.out_row + g * pc.k + j] = key;
    }
  }
}
