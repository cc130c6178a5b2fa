# The Debian package: `cpack -G DEB` in the build directory (or
# `cpack --config build/CPackConfig.cmake -G DEB -B OUT`) makes
# engine_VERSION_ARCH.deb from the install rules (CMakeLists.txt), under /usr.
# The maintainer scripts (packaging/debian/) make the `engine` user, the state
# directory /var/lib/engine and a commented /etc/engine/engine.conf, and
# enable engine.service without starting it. docs/operations.md ("The Debian package") says
# what the package holds and does; tests/integration/test_deb.sh installs it
# into a fresh Debian 12 root.

# The package's version is the project's (project() in CMakeLists.txt).
set(ENGINE_PACKAGE_MAINTAINER "engine maintainers <engine@localhost>" CACHE STRING
    "the Debian package's Maintainer field: Name <address>")

# The configuration sample postinst copies to /etc/engine/engine.conf when
# there is none (also installed by a plain `cmake --install`, for reference).
install(FILES packaging/engine.conf.sample DESTINATION share/engine)

set(CPACK_PACKAGE_NAME engine)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "engine")
set(CPACK_PACKAGE_CONTACT "${ENGINE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "durable workflow engine for long-running AI agent sessions")
set(CPACK_PACKAGE_DESCRIPTION
    "Workflows are Lua 5.4 scripts; every activity result, timer, signal and
checkpoint is appended to an event log in SQLite (or PostgreSQL), and after a
crash the engine rebuilds each workflow by replaying its script against that
log. Agent sessions run their tools in a Docker or bubblewrap sandbox, under
policies that ask a person to approve what they want to do.
.
This package installs the engine command, its Lua library, workflows,
policies, skills, web page and examples under /usr/share/engine, and the
engine.service systemd unit (enabled, not started) with an engine user and
the state directory /var/lib/engine.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# the binary without its debug information (which also names the build's
# source tree)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${ENGINE_PACKAGE_MAINTAINER}")
# Depends: the shared libraries the binary links, from dpkg-shlibdeps (with
# the versions their symbols need) where it runs, else named here (Debian 12's
# packages of what `readelf -d engine` lists as NEEDED); then what the Lua
# library and the workflows use at run time: lua-yaml (lua/skills.lua reads a
# skill's frontmatter with it) and git (the pull-request review's checkout).
# lua-cjson is not one: the engine builds its own "cjson" module in. The
# libraries the engine opens at their first use (engine/base/lazylib.h) are
# not NEEDED, so dpkg-shlibdeps cannot see them: named here.
set(ENGINE_DEB_RUNTIME_DEPENDS "libcurl4, libmicrohttpd12, libpq5, lua-yaml, git")
find_program(ENGINE_DPKG_SHLIBDEPS dpkg-shlibdeps)
# CPack's own shlibdeps step is off: it runs file(1) on every installed file
# (two hundred docs, workflows and fixtures) to find the one ELF file, half a
# minute of a package build on a busy machine. cmake/package-depends.cmake,
# which cpack reads, runs dpkg-shlibdeps on the engine binary alone (its
# NEEDED are the installed one's; stripping does not change them).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
if(ENGINE_DPKG_SHLIBDEPS)
  set(CPACK_ENGINE_DPKG_SHLIBDEPS "${ENGINE_DPKG_SHLIBDEPS}")
  set(CPACK_ENGINE_RUNTIME_DEPENDS "${ENGINE_DEB_RUNTIME_DEPENDS}")
  set(CPACK_ENGINE_BINARY_FILE "${CMAKE_CURRENT_BINARY_DIR}/package-binary.txt")
  file(GENERATE OUTPUT "${CPACK_ENGINE_BINARY_FILE}" CONTENT "$<TARGET_FILE:engine>")
  set(CPACK_PROJECT_CONFIG_FILE "${CMAKE_CURRENT_SOURCE_DIR}/cmake/package-depends.cmake")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "${ENGINE_DEB_RUNTIME_DEPENDS}")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libc6, liblua5.4-0, libuv1, libsqlite3-0, libssl3, libseccomp2, ${ENGINE_DEB_RUNTIME_DEPENDS}")
endif()
# a sandbox driver (Docker, else bubblewrap) and mkfs.ext4 for workspaces
# with a disk quota; adduser makes the engine user (useradd from passwd, which
# every Debian has, does it otherwise); ca-certificates for the model APIs
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "docker.io | bubblewrap, e2fsprogs, adduser, ca-certificates")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postinst"
    "${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/prerm"
    "${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postrm")
# the maintainer scripts 0755 and the control files 0644, whatever the
# checkout's modes
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

if(NOT EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/packaging/engine.service")
  message(STATUS "package: no packaging/engine.service yet: the .deb will have no systemd unit")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
