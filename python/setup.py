"""Builds coll_torch: the torch.distributed backend "coll" (a C++ extension linking libcoll).

Where libcoll is: COLL_HOME (an install prefix, `cmake --install build --prefix P`) or
COLL_BUILD_DIR (a build folder of this repository; default ../build). The extension records
libcoll's folder as its run path, so no LD_LIBRARY_PATH is needed.
"""

import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
home = os.environ.get("COLL_HOME")
if home:
    include_dir = os.path.join(home, "include")
    lib_dir = os.path.join(home, "lib")
else:
    build = os.path.abspath(os.environ.get("COLL_BUILD_DIR", os.path.join(repo, "build")))
    include_dir = os.path.join(repo, "include")
    lib_dir = os.path.join(build, "src")
if not any(f.startswith("libcoll.so") for f in os.listdir(lib_dir) if os.path.isdir(lib_dir)):
    raise SystemExit(f"coll_torch: no libcoll.so in {lib_dir}: build coll first, or set COLL_HOME/COLL_BUILD_DIR")

setup(
    name="coll_torch",
    version="0.1.0",
    description="coll as a torch.distributed backend",
    packages=["coll_torch"],
    py_modules=["coll_torch_autoload"],  # the autoload hook: outside the package (its docstring says why)
    ext_modules=[
        CppExtension(
            "coll_torch._C",
            sources=[os.path.join("csrc", f) for f in ("module.cc", "backend.cc", "collectives.cc", "sparse.cc", "launch.cc", "watcher.cc", "types.cc", "work.cc")],
            include_dirs=[include_dir, os.path.join(here, "csrc")],
            library_dirs=[lib_dir],
            libraries=["coll"],
            extra_compile_args=["-O2"],  # torch 2.15 headers need C++20, which torch adds,
            extra_link_args=[f"-Wl,-rpath,{lib_dir}"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
