#version 450
// One pass of a sum: workgroup w adds floats [w * 4096, (w + 1) * 4096) of src (those below n) and
// writes the total to dst[w]. Run it again on the partial sums until one is left.
#extension GL_EXT_buffer_reference : require
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float f[]; };
layout(push_constant) uniform Args { Floats src; Floats dst; uint n; } args;
shared float partial[256];
void main() {
  uint wg = gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
  uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint k = 0u; k < 16u; ++k) {
    uint i = wg * 4096u + k * 256u + t;  // neighbouring threads read neighbouring floats
    if (i < args.n) acc += args.src.f[i];
  }
  partial[t] = acc;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    barrier();
  }
  if (t == 0u) args.dst.f[wg] = partial[0];
}
