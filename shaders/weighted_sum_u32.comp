#version 450
// dst[i] = sum over k of (k + 1) * src[k][i], for 20 sources: 21 buffer addresses and a count are
// 172 bytes, more than the 128 bytes of push constants many devices have. So the arguments live
// in a buffer (Queue::spill) and the only push constant is its address.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer ArgBlock {
  Words src[20];
  Words dst;
  uint n;
};
layout(push_constant) uniform Args { ArgBlock args; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.args.n) return;
  uint acc = 0u;
  for (uint k = 0u; k < 20u; ++k) acc += (k + 1u) * pc.args.src[k].w[i];
  pc.args.dst.w[i] = acc;
}
