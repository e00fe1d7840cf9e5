# Every dependency is a Debian package found on the system; nothing is downloaded at build time.
find_package(Threads REQUIRED)
find_package(Vulkan 1.3 REQUIRED)
find_package(fmt REQUIRED)
# nn/: zlib gunzips datasets; nlohmann-json reads and writes safetensors headers.
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3 REQUIRED)

# shaderc: Debian's libshaderc_combined.a still leaves glslang and SPIRV-Tools symbols undefined,
# and mixing libshaderc.so with static glslang crashed. Linking the combined archive together with
# the static glslang and SPIRV-Tools archives in one link group is what works.
set(_vkg_shaderc_archives shaderc_combined glslang SPIRV SPIRV-Tools-opt SPIRV-Tools
    glslang-default-resource-limits MachineIndependent GenericCodeGen OSDependent OGLCompiler)
set(_vkg_shaderc_paths "")
foreach(_lib IN LISTS _vkg_shaderc_archives)
  find_library(VKG_LIB_${_lib} NAMES lib${_lib}.a REQUIRED)
  list(APPEND _vkg_shaderc_paths ${VKG_LIB_${_lib}})
endforeach()
find_path(VKG_SHADERC_INCLUDE shaderc/shaderc.hpp REQUIRED)
add_library(vkg_shaderc_static INTERFACE)
target_include_directories(vkg_shaderc_static INTERFACE ${VKG_SHADERC_INCLUDE})
string(REPLACE ";" "," _vkg_shaderc_csv "${_vkg_shaderc_paths}")
target_link_libraries(vkg_shaderc_static INTERFACE "$<LINK_GROUP:RESCAN,${_vkg_shaderc_csv}>" Threads::Threads)

# glslangValidator turns the runtime's own shaders into SPIR-V at build time.
find_program(VKG_GLSLANG_VALIDATOR glslangValidator REQUIRED)
