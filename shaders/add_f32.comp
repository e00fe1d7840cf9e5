#version 450
// c = a + b over n floats: the streaming reference for generated elementwise kernels (vec4 loads,
// 256-wide workgroups, buffers by device address). The grid may be folded into y and z when the
// element count needs more than maxComputeWorkGroupCount[0] workgroups.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4s { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float f[]; };
layout(push_constant) uniform Args { Vec4s a; Vec4s b; Vec4s c; uint n; } args;
void main() {
  uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  uint i = wg * 256u + gl_LocalInvocationID.x;  // index of a vec4
  if (4u * i + 3u < args.n) {
    args.c.v[i] = args.a.v[i] + args.b.v[i];
  } else {
    for (uint j = 4u * i; j < args.n; ++j)  // the last, partial vec4
      Floats(args.c).f[j] = Floats(args.a).f[j] + Floats(args.b).f[j];
  }
}
