#version 450
// Adds one to each of n words: the link of a dependency chain in the queue tests.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(push_constant) uniform Args { Words buf; uint n; } args;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < args.n) args.buf.w[i] += 1u;
}
