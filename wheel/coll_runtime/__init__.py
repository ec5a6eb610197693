"""Where the coll-runtime wheel put coll: the library, the NCCL drop-in, headers, CMake package.

C/C++ users build against it with ``find_package(coll)`` and
``-DCMAKE_PREFIX_PATH=$(python -c "import coll_runtime; print(coll_runtime.cmake_dir())")``, or
with pkg-config through ``pkgconfig_dir()``. Programs linked so find ``libcoll.so.0`` through a run
path or ``LD_LIBRARY_PATH=lib_dir()``; the tools (coll-run, coll-perf, ...) are console scripts.
"""

import os

from . import _build_info

__all__ = ["prefix", "lib_dir", "library", "include_dir", "nccl_dir", "cmake_dir", "pkgconfig_dir", "bin_dir",
           "cuda_archs", "build_info"]
__version__ = _build_info.version

_here = os.path.dirname(os.path.abspath(__file__))


def prefix() -> str:
    """The install prefix (lib, include, bin below it); also works as a CMAKE_PREFIX_PATH entry."""
    return _here


def lib_dir() -> str:
    """The folder of libcoll.so.0 (and libcoll.so, libcoll_parallel.a)."""
    return os.path.join(_here, "lib")


def library() -> str:
    """The path of libcoll.so.0, for ctypes or dlopen."""
    return os.path.join(lib_dir(), "libcoll.so.0")


def include_dir() -> str:
    """The folder holding coll/coll.h."""
    return os.path.join(_here, "include")


def nccl_dir() -> str:
    """The folder of the libnccl.so.2 drop-in: put it first in LD_LIBRARY_PATH, or LD_PRELOAD the file."""
    return os.path.join(lib_dir(), "coll-nccl")


def cmake_dir() -> str:
    """The folder of collConfig.cmake (coll_DIR, or an entry of CMAKE_PREFIX_PATH)."""
    return os.path.join(lib_dir(), "cmake", "coll")


def pkgconfig_dir() -> str:
    """The folder of coll.pc (an entry of PKG_CONFIG_PATH)."""
    return os.path.join(lib_dir(), "pkgconfig")


def bin_dir() -> str:
    """The folder of the tool binaries."""
    return os.path.join(_here, "bin")


def cuda_archs() -> list:
    """The CUDA architectures libcoll has device code for, e.g. ["80", "90"] (SASS for each, PTX for
    the last); empty when the wheel was built without nvcc (host memory only)."""
    return list(_build_info.cuda_archs)


def build_info() -> dict:
    """What the wheel was built with: version, CUDA architectures and toolkit, InfiniBand, UCX."""
    return {"version": _build_info.version, "cuda_archs": cuda_archs(), "cuda_version": _build_info.cuda_version,
            "ib": _build_info.ib, "ucx": _build_info.ucx}
