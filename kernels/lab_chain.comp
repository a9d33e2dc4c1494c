#version 450
// The lab's chain of dependent products (vkrt_lab_chain_record): link i computes
// y = W_(i % matrices) x, f16 rows of pc.n halves, x the output of link i - 1 (f32, the two
// halves of one buffer in turn), one dispatch a link. It times what orders the links:
// - ORDER 0: a pipeline barrier between the dispatches (what the stream records between a
//   dependent op and the op it reads);
// - ORDER 1: no barrier; every workgroup counts itself in its link's arrival counter once
//   its rows are written, and each workgroup of the next link waits until that counter holds
//   the whole grid before it reads x (the producer's tail and the consumer's start overlap);
// - ORDER 2: the same, each subgroup's first weights loaded before the wait;
// - ORDER 3: neither (the links race: a wrong result), the floor of a perfect overlap.
// Every order runs the same code otherwise (the counting and the coherent reads of x too).
// A wait gives up after pc.spin_limit polls and sets counter[pc.links] (the result is then
// void): a GPU that ran a link's workgroups before the ones they wait for would not hang.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 256) in;
const uint WG = 256u;
const uint ROWS = 16u;   // rows per workgroup
const uint NMAX = 8192u; // x staged in shared memory
const uint B = 8u;       // 16-byte chunks of a row a lane loads at once

layout(push_constant) uniform Push {
  uint n;                  // rows and columns, a multiple of 256
  uint w_offset;           // this link's matrix, in 16-byte chunks
  uint x_offset, y_offset; // floats
  uint order, link, groups, links, spin_limit;
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer W { uvec4 w[]; };
layout(std430, set = 0, binding = 1) coherent buffer XY { float xy[]; };
layout(std430, set = 0, binding = 2) coherent buffer C { uint counter[]; };

shared vec4 sx[NMAX / 4u];

float chunk_dot(uvec4 u, uint c) {
  vec4 lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  vec4 hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
  return dot(lo, sx[2u * c]) + dot(hi, sx[2u * c + 1u]);
}

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint g = pc.base_group + gl_WorkGroupID.x;
  uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
  uint chunks = pc.n / 8u;                     // 16-byte chunks a row
  uint row0 = g * ROWS + gl_SubgroupID;        // the subgroup's first row
  uint first = pc.w_offset + row0 * chunks;

  uvec4 early[B];
  bool prefetched = pc.order == 2u && row0 < g * ROWS + ROWS;
  if (prefetched)
    [[unroll]] for (uint i = 0u; i < B; i++)
      early[i] = lane + i * S < chunks ? w[first + lane + i * S] : uvec4(0u);

  if ((pc.order == 1u || pc.order == 2u) && pc.link > 0u) {
    if (tid == 0u) {
      uint polls = 0u;
      while (atomicAdd(counter[pc.link - 1u], 0u) < pc.groups) {
        if (++polls >= pc.spin_limit) {
          atomicOr(counter[pc.links], 1u);
          break;
        }
      }
    }
    barrier();
    memoryBarrierBuffer();
  }
  for (uint i = tid; i < pc.n / 4u; i += WG)
    sx[i] = vec4(xy[pc.x_offset + 4u * i], xy[pc.x_offset + 4u * i + 1u],
                 xy[pc.x_offset + 4u * i + 2u], xy[pc.x_offset + 4u * i + 3u]);
  barrier();

  for (uint r = row0; r < g * ROWS + ROWS; r += gl_NumSubgroups) {
    uint base = pc.w_offset + r * chunks;
    float acc = 0.0;
    for (uint c0 = 0u; c0 < chunks; c0 += B * S) {
      uvec4 u[B];
      [[unroll]] for (uint i = 0u; i < B; i++) {
        uint c = c0 + lane + i * S;
        u[i] = prefetched ? early[i] : (c < chunks ? w[base + c] : uvec4(0u));
      }
      prefetched = false;
      [[unroll]] for (uint i = 0u; i < B; i++) {
        uint c = c0 + lane + i * S;
        if (c < chunks)
          acc += chunk_dot(u[i], c);
      }
    }
    acc = subgroupAdd(acc);
    if (lane == 0u)
      xy[pc.y_offset + r] = acc;
  }

  memoryBarrierBuffer();
  barrier();
  if (tid == 0u)
    atomicAdd(counter[pc.link], 1u);
}
