# tests/readme/run_block.cmake — one documentation example's test (see CMakeLists.txt beside it):
# builds its target in the build tree, then, for a whole-program block (RUN given), runs it. Fails
# if the build fails or the program exits non-zero, times out or dies on a signal.
#   cmake -DBUILD_DIR=<build tree> -DTARGET=<target> [-DRUN=<executable>] -DREADME_LINE=<n>
#         -DMARKDOWN=<file, from the source root> -P run_block.cmake
foreach(_var BUILD_DIR TARGET README_LINE MARKDOWN)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "run_block.cmake: -D${_var}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET} RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "The ${MARKDOWN} example at line ${README_LINE} does not compile (${TARGET}; the "
                      "compiler's line numbers above are ${MARKDOWN}'s)")
endif()

if(DEFINED RUN)
  # The examples are meant to finish in well under a second; the bound only turns a hang into a
  # failure.
  execute_process(COMMAND ${RUN} RESULT_VARIABLE _rc TIMEOUT 120)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "The ${MARKDOWN} example at line ${README_LINE} (${RUN}) exited with '${_rc}', not 0")
  endif()
  message(STATUS "${MARKDOWN} example at line ${README_LINE}: built and ran, exit status 0")
else()
  message(STATUS "${MARKDOWN} example at line ${README_LINE}: compiled (compile-only)")
endif()
