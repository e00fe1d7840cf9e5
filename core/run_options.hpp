// The settings that decide how a kernel is compiled and reported, read once where a realize
// starts and handed down to the device and codegen, so that nothing below reads the environment
// (a ScopedSetting of one thread then applies to exactly the realizes it wraps).
#pragma once
#include <cstdint>

#include <vkgrad/core/context.hpp>

namespace vkg {

struct RunOptions {
  int debug = 0;       // DEBUG: 3 prints opts, 4 the GLSL, 5 the AST and linear UOps
  bool noopt = false;  // NOOPT: no opts at all
  int beam = 0;        // BEAM: beam width of the opt search; 0 for the heuristics
  // BEAM_TIMEOUT: seconds one kernel's search may spend before it stops expanding the beam.
  double beam_timeout_s = 10;
  // VKG_NO_FLOAT16: compute float16 in float32 and store its bits, as on a device without
  // shaderFloat16 (so that path is tested on devices that have it).
  bool no_float16 = false;
  // VKG_NO_STORAGE16: as on a device without storageBuffer16BitAccess: float16 and bfloat16
  // buffers hold two elements per uint (int16 buffers have no such form and fail).
  bool no_storage16 = false;
  // DISPATCH_GROUPS=0: a Jit recording launches each kernel on its own (no dispatch groups,
  // devices/vk_dispatch_groups.cpp).
  bool dispatch_groups = true;

  static RunOptions from_settings() {
    RunOptions o;
    o.debug = int(setting("DEBUG"));
    o.noopt = setting("NOOPT") != 0;
    o.beam = int(setting("BEAM"));
    o.beam_timeout_s = double(setting("BEAM_TIMEOUT", 10));
    o.no_float16 = setting("VKG_NO_FLOAT16") != 0;
    o.no_storage16 = setting("VKG_NO_STORAGE16") != 0;
    o.dispatch_groups = setting("DISPATCH_GROUPS", 1) != 0;
    return o;
  }
};

}  // namespace vkg
