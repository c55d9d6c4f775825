# tests/package/check.cmake — one packaging check, run by CTest as `cmake -P` (see CMakeLists.txt).
#   MODE=find_package  install the build tree into a fresh prefix, then configure, build and run
#                      the consumer with find_package(tickwheel 0.1 CONFIG REQUIRED)
#   MODE=subdirectory  configure, build and run the consumer with add_subdirectory(<source tree>)
#   MODE=pkgconfig     install into a fresh prefix, then compile the consumer's main.cpp with the
#                      compiler alone and `pkg-config --cflags --libs --static tickwheel`, and run it
# The consumer is configured with the parent build's generator, compiler, build type and
# CMAKE_CXX_FLAGS, so a sanitizer build's consumer links against its sanitized library.
# Everything goes under WORK_DIR, which is emptied first, so a stale cache cannot hide a failure.
cmake_minimum_required(VERSION 3.25)

foreach(_var MODE SOURCE_DIR PARENT_BINARY_DIR WORK_DIR GENERATOR CXX_COMPILER BUILD_TYPE LIBDIR
             VERSION)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "check.cmake: -D${_var}=... is required")
  endif()
endforeach()

# Runs a command; stops the check with the command and its output if it fails. The output (stdout
# and stderr together, in order) is left in `output`.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    list(JOIN ARGN " " _cmd)
    message(FATAL_ERROR "failed (${_rc}): ${_cmd}\n${_out}")
  endif()
  set(output "${_out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(_prefix "${WORK_DIR}/prefix")
set(_consumer_src "${SOURCE_DIR}/tests/package/consumer")

if(MODE STREQUAL "find_package" OR MODE STREQUAL "pkgconfig")
  # The install copies the headers as they are now and the library as it was last built; bring the
  # library up to date first (a no-op right after a build) so the two cannot disagree about a type.
  run(${CMAKE_COMMAND} --build "${PARENT_BINARY_DIR}" --target tickwheel)
  run(${CMAKE_COMMAND} --install "${PARENT_BINARY_DIR}" --prefix "${_prefix}")
endif()

if(MODE STREQUAL "pkgconfig")
  if(NOT DEFINED PKG_CONFIG)
    message(FATAL_ERROR "check.cmake: MODE=pkgconfig needs -DPKG_CONFIG=<pkg-config executable>")
  endif()
  # Only the fresh prefix's .pc directory is searched first; hwloc's own .pc comes from the system.
  set(ENV{PKG_CONFIG_PATH} "${_prefix}/${LIBDIR}/pkgconfig")
  run(${PKG_CONFIG} --modversion tickwheel)
  string(STRIP "${output}" _pc_version)
  if(NOT _pc_version STREQUAL VERSION)
    message(FATAL_ERROR "tickwheel.pc says version '${_pc_version}', the project is ${VERSION}")
  endif()
  run(${PKG_CONFIG} --cflags --libs --static tickwheel)
  string(STRIP "${output}" _pc_flags)
  message(STATUS "pkg-config --cflags --libs --static tickwheel: ${_pc_flags}")
  foreach(_needed "-I${_prefix}/" "-ltickwheel" "-lhwloc" "-pthread")
    string(FIND "${_pc_flags}" "${_needed}" _at)
    if(_at EQUAL -1)
      message(FATAL_ERROR "pkg-config flags lack '${_needed}': ${_pc_flags}")
    endif()
  endforeach()
  separate_arguments(_pc_args UNIX_COMMAND "${_pc_flags}")
  separate_arguments(_cxx_args UNIX_COMMAND "${CXX_FLAGS}")
  # tickwheel.pc does not force a language standard; a consumer asks for C++20 itself. The rpath
  # lets a shared libtickwheel.so (BUILD_SHARED_LIBS) be found in the prefix at run time.
  set(_exe "${WORK_DIR}/consumer")
  run(${CXX_COMPILER} -std=c++20 ${_cxx_args} -Wall -Wextra -Wpedantic -Werror
      "${_consumer_src}/main.cpp" -o "${_exe}" ${_pc_args} "-Wl,-rpath,${_prefix}/${LIBDIR}")
elseif(MODE STREQUAL "find_package" OR MODE STREQUAL "subdirectory")
  if(MODE STREQUAL "find_package")
    set(_how "-DCMAKE_PREFIX_PATH=${_prefix}")
  else()
    set(_how "-DTICKWHEEL_SOURCE_DIR=${SOURCE_DIR}")
  endif()
  set(_build "${WORK_DIR}/build")
  run(${CMAKE_COMMAND} -S "${_consumer_src}" -B "${_build}" -G "${GENERATOR}"
      "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
      "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "${_how}")
  if(MODE STREQUAL "find_package")
    # The package must be the one just installed, not one found elsewhere on the system.
    file(STRINGS "${_build}/CMakeCache.txt" _dir REGEX "^tickwheel_DIR:")
    string(FIND "${_dir}" "=${_prefix}/" _at)
    if(NOT _at GREATER -1)
      message(FATAL_ERROR "find_package found tickwheel outside ${_prefix}: ${_dir}")
    endif()
  endif()
  # Two jobs: the subdirectory build compiles the library's six sources, and CTest may be running
  # other cases beside this one.
  run(${CMAKE_COMMAND} --build "${_build}" --parallel 2)
  set(_exe "${_build}/consumer")
else()
  message(FATAL_ERROR "check.cmake: unknown MODE '${MODE}'")
endif()

run("${_exe}")
message(STATUS "${output}")
string(FIND "${output}" "tickwheel ${VERSION} " _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "the consumer did not report version ${VERSION}")
endif()
