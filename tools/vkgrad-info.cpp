// vkgrad-info: prints the Vulkan devices vkgrad sees, which one it would choose (VK_DEVICE picks
// another), and the capabilities record it read from that device.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <vkgrad/vk/capabilities.hpp>
#include <vkgrad/vk/device.hpp>
#include <vkgrad/vk/env.hpp>
#include <vkgrad/vk/instance.hpp>

extern char** environ;

int main() {
  namespace vk = vkg::vk;
  try {
    vk::Instance instance;
    const auto devices = vk::list_physical_devices(instance);
    std::printf("Vulkan devices:\n");
    for (size_t i = 0; i < devices.size(); ++i) {
      const vk::Capabilities& c = devices[i].caps;
      std::printf("  %zu: %s (%s, Vulkan %u.%u.%u)%s\n", i, c.name.c_str(),
                  vk::device_type_name(c.type), VK_API_VERSION_MAJOR(c.api_version),
                  VK_API_VERSION_MINOR(c.api_version), VK_API_VERSION_PATCH(c.api_version),
                  c.usable() ? "" : " [not usable]");
    }
    const std::string select = vk::env_string("VK_DEVICE");
    const size_t chosen = vk::choose_physical_device(devices, select);
    std::printf("\nchosen: %zu%s\n%s", chosen,
                select.empty() ? " (set VK_DEVICE=<index or name> to pick another)" : "",
                vk::describe(devices[chosen].caps).c_str());
    // The VKG_ settings in force: VKG_MAX_* lower the limits printed above, others change the
    // kernels (VKG_HEURISTICS, VKG_TEXEL_LOADS): a log read later must say so.
    std::string settings;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "VKG_", 4) == 0)
        settings += std::string(settings.empty() ? "" : " ") + *e;
    std::printf("settings: %s\n",
                settings.empty() ? "none (no VKG_ variable set)" : settings.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkgrad-info: %s\n", e.what());
    return 1;
  }
}
