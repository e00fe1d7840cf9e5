#version 450
// add_f32 with its buffers bound as descriptors instead of device addresses. The runtime does not
// bind descriptors; this exists only so bench_vk can show what the binding decision costs on the
// device at hand (on Lavapipe, device-address loads are several times slower).
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A { vec4 a[]; };
layout(set = 0, binding = 1) readonly buffer B { vec4 b[]; };
layout(set = 0, binding = 2) writeonly buffer C { vec4 c[]; };
layout(push_constant) uniform Args { uint n; } args;
void main() {
  uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  uint i = wg * 256u + gl_LocalInvocationID.x;
  if (i < args.n / 4u) c[i] = a[i] + b[i];
}
