#version 450
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(capabilities = [4466], 4461, 32);
layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) buffer Data0 { float v[]; } data0;
layout(std430, set = 0, binding = 0) buffer Data0x4 { vec4 v[]; } data0x4;
layout(std430, set = 0, binding = 1) buffer Data1 { float v[]; } data1;
layout(std430, set = 0, binding = 1) buffer Data1x4 { vec4 v[]; } data1x4;
layout(std430, set = 0, binding = 2) buffer Data2 { float v[]; } data2;
layout(std430, set = 0, binding = 2) buffer Data2x4 { vec4 v[]; } data2x4;
layout(std430, set = 0, binding = 3) readonly buffer Data3 { float v[]; } data3;
layout(std430, set = 0, binding = 3) readonly buffer Data3x4 { vec4 v[]; } data3x4;
layout(std430, set = 0, binding = 4) readonly buffer Data4 { float v[]; } data4;
layout(std430, set = 0, binding = 5) readonly buffer Data5 { float v[]; } data5;
layout(std430, set = 0, binding = 6) readonly buffer Data6 { float v[]; } data6;
layout(std430, set = 0, binding = 6) readonly buffer Data6x4 { vec4 v[]; } data6x4;
layout(std430, set = 0, binding = 7) readonly buffer Data7 { float v[]; } data7;
layout(std430, set = 0, binding = 7) readonly buffer Data7x4 { vec4 v[]; } data7x4;
layout(std430, set = 0, binding = 8) readonly buffer Data8 { float v[]; } data8;
layout(std430, set = 0, binding = 8) readonly buffer Data8x4 { vec4 v[]; } data8x4;
float fdiv_exact(float a, float b) {
  uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
  uint xa = ua & 0x7fffffffu, xb = ub & 0x7fffffffu, sign = (ua ^ ub) & 0x80000000u;
  if (xa > 0x7f800000u || xb > 0x7f800000u || (xa == 0u && xb == 0u) ||
      (xa == 0x7f800000u && xb == 0x7f800000u))
    return uintBitsToFloat(0x7fc00000u);
  if (xa == 0x7f800000u || xb == 0u) return uintBitsToFloat(sign | 0x7f800000u);
  if (xa == 0u || xb == 0x7f800000u) return uintBitsToFloat(sign);
  double da = xa < 0x00800000u ? double(xa) * 1.401298464324817e-45lf : double(uintBitsToFloat(xa));
  double db = xb < 0x00800000u ? double(xb) * 1.401298464324817e-45lf : double(uintBitsToFloat(xb));
  double q = da / db;
  if (q >= 3.4028235677973366e38lf) return uintBitsToFloat(sign | 0x7f800000u);
  if (q < 1.1754943508222875e-38lf)
    return uintBitsToFloat(sign | uint(floor(q * 7.1362384635298e44lf + 0.5lf)));
  // float exponent = double exponent - (1023 - 127); 23 bits of significand, then round.
  uvec2 w = unpackDouble2x32(q);
  uint f = ((((w.y >> 20) - 896u) << 23) | ((w.y & 0xfffffu) << 3) | (w.x >> 29)) + ((w.x >> 28) & 1u);
  return uintBitsToFloat(sign | f);
}
vec4 fdiv_exact(vec4 a, vec4 b) {
  return vec4(fdiv_exact(a.x, b.x), fdiv_exact(a.y, b.y), fdiv_exact(a.z, b.z), fdiv_exact(a.w, b.w));
}
void main() {  // E_25088_4
  int gidx0 = int(gl_WorkGroupID.x);  /* 98 */
  int idx0 = gidx0*256 + int(gl_LocalInvocationID.x);
  int alu0 = (idx0*4);
  vec4 val0 = data6x4.v[(alu0)>>2];
  vec4 val1 = data7x4.v[(alu0)>>2];
  vec4 val2 = data8x4.v[(alu0)>>2];
  vec4 val3 = data3x4.v[(alu0)>>2];
  vec4 alu1 = ((val0*vec4(0.9f))+(val3*vec4(0.1f)));
  data0x4.v[(alu0)>>2] = alu1;
  vec4 alu2 = ((val1*vec4(0.999f))+((val3*val3)*vec4(0.001f)));
  data1x4.v[(alu0)>>2] = alu2;
  float val4 = data4.v[0];
  float val5 = data5.v[2844];
  float alu3 = sqrt((1.0f-val5));
  float val6 = data5.v[1420];
  float alu4 = fdiv_exact((val4*alu3), (1.0f-val6));
  float alu5 = (alu3*1e-08f);
  data2x4.v[(alu0)>>2] = (val2-fdiv_exact((vec4(alu4, alu4, alu4, alu4)*alu1), (sqrt(alu2)+vec4(alu5, alu5, alu5, alu5))));
}
