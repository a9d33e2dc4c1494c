#version 450
// SwiGLU gate of a llama-style MLP: d[i] = silu(g[i]) * u[i], silu(g) = g / (1 + e^-g), over
// `count` dense f32 elements (element offsets from each binding; dst may be g or u exactly:
// each element is read, then written, by one invocation).
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
  uint d_offset, g_offset, u_offset, count;
  uint base_group;
} pc;

layout(std430, set = 0, binding = 0) readonly buffer G { float g[]; };
layout(std430, set = 0, binding = 1) readonly buffer U { float u[]; };
layout(std430, set = 0, binding = 2) buffer D { float d[]; };

void main() {
  uint i = (pc.base_group + gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= pc.count)
    return;
  float x = g[pc.g_offset + i];
  d[pc.d_offset + i] = x / (1.0 + exp(-x)) * u[pc.u_offset + i];
}
