#version 450
// x = x * mul + add over n words, in place: reads and writes a buffer end to end (the test over
// 128 MiB, past the storage-buffer binding range, uses it).
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(push_constant) uniform Args { Words buf; uint n; uint mul; uint add; } args;
void main() {
  uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  uint i = wg * 256u + gl_LocalInvocationID.x;
  if (i < args.n) args.buf.w[i] = args.buf.w[i] * args.mul + args.add;
}
