#include <vkgrad/vk/instance.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>

#include <vkgrad/core/error.hpp>
#include <vkgrad/vk/check.hpp>
#include <vkgrad/vk/env.hpp>
#include <vkgrad/vk/structure.hpp>

namespace vkg::vk {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

struct ValidationLog {
  std::atomic<std::size_t> count{0};
  std::mutex mutex;
  std::vector<std::string> messages;
};

ValidationLog& validation_log() {
  static ValidationLog log;  // never destroyed before the instances that write to it
  return log;
}

// Called by the layer on its own thread or inside any Vulkan call. It must not throw: an exception
// crossing the C boundary of the loader is undefined behaviour.
VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                VkDebugUtilsMessageTypeFlagsEXT types,
                                                const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                void*) {
  const bool counted = (types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                 VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)) != 0;
  ValidationLog& log = validation_log();
  if (counted) log.count.fetch_add(1, std::memory_order_relaxed);
  try {
    std::string text =
        fmt::format("[vulkan {}] {}",
                    severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
                    data && data->pMessage ? data->pMessage : "(no message)");
    std::fprintf(stderr, "%s\n", text.c_str());
    if (counted) {
      std::lock_guard lock(log.mutex);
      log.messages.push_back(std::move(text));
    }
  } catch (...) {
    // Out of memory while formatting: the count above still records that a message came.
  }
  return VK_FALSE;
}

VkDebugUtilsMessengerCreateInfoEXT messenger_info() {
  VkDebugUtilsMessengerCreateInfoEXT info = structure<VkDebugUtilsMessengerCreateInfoEXT>(
      VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = on_debug_message;
  return info;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  check(vkEnumerateInstanceLayerProperties(&n, nullptr), "vkEnumerateInstanceLayerProperties");
  std::vector<VkLayerProperties> layers(n);
  check(vkEnumerateInstanceLayerProperties(&n, layers.data()),
        "vkEnumerateInstanceLayerProperties");
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_instance_extension(const char* name) {
  uint32_t n = 0;
  check(vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr),
        "vkEnumerateInstanceExtensionProperties");
  std::vector<VkExtensionProperties> exts(n);
  check(vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data()),
        "vkEnumerateInstanceExtensionProperties");
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

}  // namespace

InstanceOptions InstanceOptions::from_env() {
  InstanceOptions o;
  o.validation = env_flag("VKG_VALIDATION");
  o.sync_validation = env_string("VKG_VALIDATION") == "sync";
  return o;
}

Instance::Instance(const InstanceOptions& options) : options_(options) {
  uint32_t api = 0;
  check(vkEnumerateInstanceVersion(&api), "vkEnumerateInstanceVersion");
  if (api < VK_API_VERSION_1_3)
    throw Error(fmt::format("the Vulkan loader supports version {}.{}, vkgrad needs 1.3",
                            VK_API_VERSION_MAJOR(api), VK_API_VERSION_MINOR(api)));

  std::vector<const char*> layers, extensions;
  if (options_.validation) {
    if (!has_layer(kValidationLayer))
      throw Error(
          "VKG_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed "
          "(Debian: apt install vulkan-validationlayers)");
    layers.push_back(kValidationLayer);
  }
  const bool debug_utils = has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  if (options_.validation && debug_utils) extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  // MoltenVK is a "portability" driver: the loader hides it unless we ask to see such drivers.
  VkInstanceCreateFlags flags = 0;
  if (has_instance_extension(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }

  VkApplicationInfo app = structure<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  app.pApplicationName = "vkgrad";
  app.pEngineName = "vkgrad";
  app.apiVersion = VK_API_VERSION_1_3;

  VkInstanceCreateInfo info =
      structure<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  info.flags = flags;
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();

  // Chained into the create info, the messenger also sees vkCreateInstance and vkDestroyInstance.
  VkDebugUtilsMessengerCreateInfoEXT messenger = messenger_info();
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features =
      structure<VkValidationFeaturesEXT>(VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT);
  if (options_.validation && debug_utils) {
    info.pNext = &messenger;
    if (options_.sync_validation) {
      features.enabledValidationFeatureCount = 1;
      features.pEnabledValidationFeatures = &sync;
      messenger.pNext = &features;
    }
  }
  check(vkCreateInstance(&info, nullptr, &instance_), "vkCreateInstance");

  if (options_.validation && debug_utils) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    VkDebugUtilsMessengerCreateInfoEXT standalone = messenger_info();
    VkResult r = create ? create(instance_, &standalone, nullptr, &messenger_)
                        : VK_ERROR_EXTENSION_NOT_PRESENT;
    if (r != VK_SUCCESS) {
      vkDestroyInstance(instance_, nullptr);
      throw_result(r, "vkCreateDebugUtilsMessengerEXT");
    }
  }
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  vkDestroyInstance(instance_, nullptr);
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
  uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(n);
  check(vkEnumeratePhysicalDevices(instance_, &n, devices.data()), "vkEnumeratePhysicalDevices");
  devices.resize(n);
  return devices;
}

std::size_t validation_message_count() {
  return validation_log().count.load(std::memory_order_relaxed);
}

std::vector<std::string> take_validation_messages() {
  ValidationLog& log = validation_log();
  std::lock_guard lock(log.mutex);
  return std::exchange(log.messages, {});
}

}  // namespace vkg::vk
