#!/usr/bin/env python3
"""Finds the NCCL a machine's Python environment ships, for the device script.

Prints one line, "<folder of libnccl.so.2> <version code> <how found>", or nothing (exit 1) with the
reason on stderr. The nvidia-nccl-cu13 wheel installs nvidia/nccl as a namespace package (no
__init__.py), so nvidia.nccl.__file__ is None and its folders are in __path__. The version comes
from the library itself (ncclGetVersion needs no GPU), else from the wheel's nccl.h.
Where no wheel has it, the dynamic loader's cache (ldconfig -p) is asked.

    python3 tests/gpu/find_nccl.py [extra sys.path entry]
"""
import ctypes
import os
import re
import subprocess
import sys


def version_of(lib):
    try:
        handle = ctypes.CDLL(lib)
        v = ctypes.c_int(0)
        if handle.ncclGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
            return v.value
    except (OSError, AttributeError) as e:
        print(f"find_nccl: {lib}: {e}", file=sys.stderr)
    header = os.path.join(os.path.dirname(os.path.dirname(lib)), "include", "nccl.h")
    if os.path.exists(header):
        m = re.search(r"#define NCCL_VERSION_CODE (\d+)", open(header).read())
        if m:
            return int(m.group(1))
    return 0


def from_wheel():
    try:
        import nvidia.nccl as pkg  # noqa: PLC0415 (found where the environment has it)
    except ImportError as e:
        print(f"find_nccl: no nvidia.nccl package: {e}", file=sys.stderr)
        return None
    for folder in list(getattr(pkg, "__path__", [])):
        lib = os.path.join(folder, "lib", "libnccl.so.2")
        if os.path.exists(lib):
            return lib, "wheel"
    print(f"find_nccl: nvidia.nccl has no lib/libnccl.so.2 in {list(pkg.__path__)}", file=sys.stderr)
    return None


def from_ldconfig():
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"find_nccl: ldconfig: {e}", file=sys.stderr)
        return None
    for line in out.splitlines():
        if "libnccl.so.2 " in line and "=>" in line:
            return line.split("=>")[1].strip(), "ldconfig"
    return None


def main():
    if len(sys.argv) > 1:
        sys.path.insert(0, sys.argv[1])
    found = from_wheel() or from_ldconfig()
    if not found:
        print("find_nccl: no libnccl.so.2 in a wheel or in the loader's cache", file=sys.stderr)
        return 1
    lib, how = found
    # The folder as found (a wheel's lib/, or the cache's entry), not where links lead: that is the
    # folder whose libnccl.so.2 the loader takes from LD_LIBRARY_PATH.
    print(os.path.dirname(os.path.abspath(lib)), version_of(lib), how)
    return 0


if __name__ == "__main__":
    sys.exit(main())
