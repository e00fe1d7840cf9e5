# `cmake --install` gives include/vkgrad/..., the library, and a CMake package so that a consumer
# writes find_package(vkgrad) and target_link_libraries(app vkgrad::vkgrad).
include(CMakePackageConfigHelpers)
install(TARGETS vkgrad EXPORT vkgradTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES vkgrad.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkgrad)
foreach(_part core codegen vk shaders nn dist)
  install(DIRECTORY ${_part}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkgrad/${_part}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
set(_cfgdir ${CMAKE_INSTALL_LIBDIR}/cmake/vkgrad)
install(EXPORT vkgradTargets NAMESPACE vkgrad:: DESTINATION ${_cfgdir})
configure_package_config_file(cmake/vkgradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/vkgradConfig.cmake INSTALL_DESTINATION ${_cfgdir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vkgradConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vkgradConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/vkgradConfigVersion.cmake DESTINATION ${_cfgdir})
install(FILES onnx/model.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vkgrad/onnx)
