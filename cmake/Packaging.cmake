# Debian packages through CPack: `cpack -G DEB` in a build folder (configured with
# -DCMAKE_INSTALL_PREFIX=/usr, as packages install there) writes three packages, one per install
# component:
#   libcoll0     runtime: libcoll.so.0 and the NCCL drop-in (lib/coll-nccl/libnccl.so.2)
#   libcoll-dev  headers, the libcoll.so link, the client layer's archive, the CMake package and
#                the pkg-config file; depends on libcoll0 of the same version
#   coll-tools   coll-run, coll-perf, coll-info, coll-top, coll-topo, coll-sim, coll-flight, coll-train;
#                depends on libcoll0 of the same version
# Library dependencies (libhwloc15, libfmt9, ...) are computed by dpkg-shlibdeps from what the
# binaries link, so they follow the build's options. UCX is loaded at run time when a communicator
# chooses it (src/transport/net/ucx/ucx_api.h), so libcoll0 only suggests libucx0.
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "coll")
set(CPACK_PACKAGE_VENDOR "coll")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "coll developers <coll@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# coll-tools needs libcoll.so.0, which dpkg-shlibdeps finds in the build tree (a library of this
# source package, so no dependency is computed for it) while the component dependency below adds
# libcoll0 (= version).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${PROJECT_BINARY_DIR}/src")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION "libs")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "libcoll0")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION "libs")
# A shlibs file and the ldconfig trigger, as Debian's shared-library packages carry.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_GENERATE_SHLIBS ON)
if(COLL_HAVE_UCX)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "libucx0")
endif()
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "coll runtime library: collectives on host and device memory over shm, TCP, UCX and NCCL net plugins, and the libnccl.so.2 drop-in")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME "libcoll-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION "libdevel")
set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_COMPONENT_DEV_DESCRIPTION "coll development files: coll.h, the client layer, CMake package and pkg-config file")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME "coll-tools")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION "net")
set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "coll tools: coll-run, coll-perf (nccl-tests' command lines), coll-info, coll-top, coll-topo, coll-sim, coll-flight, coll-train")

include(CPack)
