#version 450
// Fills a buffer with a 32-bit pattern; the runtime uses it to clear device buffers.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint w[]; };
layout(push_constant) uniform Args { uint64_t dst; uint count; uint value; } args;
void main() {
  uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (i < args.count) Words(args.dst).w[i] = args.value;
}
