#!/usr/bin/env bash
# Makes the Python environment of the PyTorch backend: a venv (COLL_TORCH_VENV, default
# ~/.cache/coll-torch/venv) with torch, numpy and pytest from PyPI, created once and reused (torch
# is a few GB); then builds this checkout's wheels, coll-runtime and coll-torch (scripts/wheels.sh,
# into build-wheel/dist), and installs them:
#
#   bash scripts/torch_env.sh          into the torch venv itself (a developer's environment)
#   bash scripts/torch_env.sh VENV     into VENV, made afresh over the torch venv (which stays as it
#                                      is): the quick start's tests run there
#
# Afterwards: $VENV/bin/python -c "import torch.distributed as d; print('coll' in d.Backend.backend_list)"
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}
target=${1:-}
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

COLL_TORCH_VENV=$venv bash scripts/wheels.sh build-wheel/dist ${target:+"$target"}
if [ -z "$target" ]; then
  target=$venv
  "$venv/bin/pip" install -q --no-index --no-deps --force-reinstall build-wheel/dist/coll_runtime-*.whl \
    build-wheel/dist/coll_torch-*.whl
fi
# The backend must come from the wheel just installed, not from an older install the venv can see.
TORCH_DEVICE_BACKEND_AUTOLOAD=1 "$target/bin/python" -c "
import os, sys, torch, torch.distributed as dist
import coll_torch
assert 'coll' in dist.Backend.backend_list, 'autoload did not register coll'
assert os.path.realpath(coll_torch.__file__).startswith(os.path.realpath(sys.prefix) + os.sep), coll_torch.__file__
print('torch_env: coll_torch', coll_torch.version(), 'on torch', torch.__version__, 'in', sys.prefix)"
