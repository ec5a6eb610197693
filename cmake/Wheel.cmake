# The runtime wheel (pyproject.toml, built by scikit-build-core, which defines SKBUILD): the
# install prefix is the coll_runtime package itself. A wheel cannot hold symbolic links (each
# becomes a full copy), so libcoll is installed once, as libcoll.so.0, and libcoll.so is a GNU
# ld script that points the linker at it (as glibc's libc.so does).
set_property(TARGET coll PROPERTY VERSION)
install(CODE "file(REMOVE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libcoll.so\")
file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libcoll.so\" \"INPUT(libcoll.so.0)\\n\")"
        COMPONENT dev)

# What was built, for coll_runtime.cuda_archs() and build_info(): the architectures with device
# code (real code for each, PTX for the last), or none when nvcc was not found.
set(COLL_WHEEL_CUDA_ARCHS "")
set(COLL_WHEEL_CUDA_VERSION "")
if(COLL_HAVE_CUDA)
  list(JOIN COLL_CUDA_ARCHITECTURES "\", \"" COLL_WHEEL_CUDA_ARCHS)
  set(COLL_WHEEL_CUDA_ARCHS "\"${COLL_WHEEL_CUDA_ARCHS}\"")
  set(COLL_WHEEL_CUDA_VERSION ${CMAKE_CUDA_COMPILER_VERSION})
endif()
configure_file(wheel/coll_runtime/_build_info.py.in ${CMAKE_CURRENT_BINARY_DIR}/_build_info.py @ONLY)
install(FILES wheel/coll_runtime/__init__.py wheel/coll_runtime/_tools.py ${CMAKE_CURRENT_BINARY_DIR}/_build_info.py
        DESTINATION . COMPONENT python)
