# Read by cpack (CPACK_PROJECT_CONFIG_FILE, cmake/package.cmake) before it
# builds a package: the DEB's Depends gains the shared libraries the engine
# binary links, with the versions their symbols need, from one dpkg-shlibdeps
# run on that binary.
if(NOT CPACK_GENERATOR STREQUAL "DEB" OR NOT CPACK_ENGINE_DPKG_SHLIBDEPS)
  return()
endif()
file(READ "${CPACK_ENGINE_BINARY_FILE}" _engine_binary)
if(NOT EXISTS "${_engine_binary}")
  message(FATAL_ERROR "package: no engine binary at ${_engine_binary} (build it first: cmake --build)")
endif()
# dpkg-shlibdeps wants a debian/control where it runs (an empty one will do)
set(_work "${CPACK_PACKAGE_DIRECTORY}/_CPack_Packages/shlibdeps")
file(REMOVE_RECURSE "${_work}")
file(WRITE "${_work}/debian/control" "")
execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C "${CPACK_ENGINE_DPKG_SHLIBDEPS}" --ignore-missing-info
                        -O "${_engine_binary}"
                WORKING_DIRECTORY "${_work}" OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
file(REMOVE_RECURSE "${_work}")
if(NOT _rc EQUAL 0 OR NOT _out MATCHES "shlibs:Depends=")
  message(FATAL_ERROR "package: dpkg-shlibdeps ${_engine_binary} failed (${_rc}): ${_err}")
endif()
string(REGEX REPLACE "^.*shlibs:Depends=" "" _libs "${_out}")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_libs}, ${CPACK_ENGINE_RUNTIME_DEPENDS}")
