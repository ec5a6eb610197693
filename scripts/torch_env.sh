#!/usr/bin/env bash
# Makes the Python environment of the PyTorch backend: a venv (COLL_TORCH_VENV, default
# ~/.cache/coll-torch/venv) with torch, numpy and pytest from PyPI, created once and reused (torch
# is a few GB), then builds coll_torch against this checkout's libcoll (COLL_BUILD_DIR, default
# build) and installs it there. Afterwards: $COLL_TORCH_VENV/bin/python -c "import coll_torch".
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}
# Installing needs no backend autoloaded (and an older coll_torch whose libcoll has gone must not
# stand in the way of replacing it).
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
# The release this backend is built and tested against (torch >= 2.15: C++20 headers, the
# all_gather_single/... names of c10d::Backend).
torch_spec=${COLL_TORCH_SPEC:-torch==2.15.0}
if [ ! -x "$venv/bin/python" ]; then
  echo "torch_env: creating $venv (downloads $torch_spec, a few GB, once)"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import torch, pytest, numpy" 2>/dev/null; then
  "$venv/bin/pip" install -q "$torch_spec" numpy pytest
fi
export COLL_BUILD_DIR=$(cd "${COLL_BUILD_DIR:-build}" && pwd)
# No build isolation: the extension must be compiled against the torch it will run with.
MAX_JOBS=${MAX_JOBS:-2} "$venv/bin/pip" install -q --no-build-isolation --force-reinstall --no-deps ./python
rm -rf python/build python/*.egg-info
TORCH_DEVICE_BACKEND_AUTOLOAD=1 "$venv/bin/python" -c "import coll_torch; print('torch_env: coll_torch', coll_torch.version(), 'on torch', coll_torch.torch.__version__)"
