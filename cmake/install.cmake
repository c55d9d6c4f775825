# cmake/install.cmake — what `cmake --install` puts under the prefix (included from the top-level
# CMakeLists.txt when TICKWHEEL_INSTALL is ON):
#   include/tickwheel/...                      the public headers, detail/ and version.hpp included
#   lib*/libtickwheel.a (or .so)               static unless BUILD_SHARED_LIBS is ON
#   lib*/cmake/tickwheel/                      find_package(tickwheel) -> tickwheel::tickwheel
#   lib*/pkgconfig/tickwheel.pc                pkg-config --cflags --libs [--static] tickwheel
#   bin/tickwheel-topo                         when the tools are built (tools/CMakeLists.txt)
# Checked by tests/package/ against a real consumer in each of those ways.
include(CMakePackageConfigHelpers)

set(TICKWHEEL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tickwheel)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tickwheel
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/tickwheel/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tickwheel)

install(TARGETS tickwheel EXPORT tickwheelTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT tickwheelTargets
        NAMESPACE tickwheel::
        DESTINATION ${TICKWHEEL_CMAKE_DIR})

# A static archive records none of its own dependencies, so the consumer's link line must name
# them: the exported target lists hwloc as $<LINK_ONLY:PkgConfig::HWLOC>, and the package config
# must create that imported target (and PkgConfig::JEMALLOC when built with jemalloc). A shared
# library carries its dependencies itself, and its export names none of them.
get_target_property(_tickwheel_type tickwheel TYPE)
if(_tickwheel_type STREQUAL "STATIC_LIBRARY")
  set(TICKWHEEL_STATIC ON)
else()
  set(TICKWHEEL_STATIC OFF)
endif()
# The pkg-config modules behind the PkgConfig::<MODULE> targets that link PRIVATE to the library;
# both the package config and tickwheel.pc (Requires.private) are written from this one list.
set(TICKWHEEL_PRIVATE_PKG_MODULES hwloc)
if(TICKWHEEL_WITH_JEMALLOC)
  list(APPEND TICKWHEEL_PRIVATE_PKG_MODULES jemalloc)
endif()

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/tickwheelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/tickwheelConfig.cmake
  INSTALL_DESTINATION ${TICKWHEEL_CMAKE_DIR})
# SameMinorVersion: while the major version is 0, a minor release may break the API (semantic
# versioning's rule for 0.y.z), so a request for 0.1 must accept 0.1.z only, never 0.2; and
# find_package(tickwheel 1.0) fails against any 0.x. SameMajorVersion would let 0.2 satisfy 0.1.
# Once 1.0 ships, SameMajorVersion is the rule to switch to.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/package/tickwheelConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/tickwheelConfig.cmake
              ${PROJECT_BINARY_DIR}/package/tickwheelConfigVersion.cmake
        DESTINATION ${TICKWHEEL_CMAKE_DIR})

# tickwheel.pc finds its prefix from its own location (${pcfiledir}), not from the
# CMAKE_INSTALL_PREFIX seen at configure time, so `cmake --install --prefix` and a moved install
# tree still give correct paths. An absolute install dir is used as it is.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TICKWHEEL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _tickwheel_pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")  # "../.."
  string(REGEX REPLACE "/$" "" _tickwheel_pc_up "${_tickwheel_pc_up}")
  set(TICKWHEEL_PC_PREFIX "\${pcfiledir}/${_tickwheel_pc_up}")
endif()
foreach(_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    set(TICKWHEEL_PC_${_dir} "${CMAKE_INSTALL_${_dir}}")
  else()
    set(TICKWHEEL_PC_${_dir} "\${prefix}/${CMAKE_INSTALL_${_dir}}")
  endif()
endforeach()
# Libs.private names the libraries themselves rather than Requires.private naming their modules:
# the library links the shared hwloc and jemalloc, so a static link of tickwheel needs them, not
# what their own static archives would need (Debian's hwloc.pc would drag in -ludev).
list(TRANSFORM TICKWHEEL_PRIVATE_PKG_MODULES PREPEND "-l" OUTPUT_VARIABLE _tickwheel_pc_libs)
list(JOIN _tickwheel_pc_libs " " TICKWHEEL_PC_LIBS_PRIVATE)
configure_file(${PROJECT_SOURCE_DIR}/cmake/tickwheel.pc.in ${PROJECT_BINARY_DIR}/package/tickwheel.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/package/tickwheel.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
