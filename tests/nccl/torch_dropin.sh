#!/usr/bin/env bash
# The NCCL drop-in against the torch wheel from PyPI (its venv: scripts/torch_env.sh), which is
# built against NCCL 2.30.7 and ships it (nvidia-nccl-cu13):
#  1. every nccl* symbol libtorch_cuda.so imports is defined by coll's libnccl.so.2;
#  2. with coll's library preloaded, `import torch` succeeds and torch's own NCCL calls
#     (ncclGetVersion, ncclGetUniqueId) run in coll's library;
#  3. tests/nccl/abi_check.cc compiles against the wheel's nccl.h and nccl_device/core.h (2.30.7).
#
#   bash tests/nccl/torch_dropin.sh BUILD_DIR [VENV]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
venv=${2:-${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}}
lib=$build/nccl/libnccl.so.2
site=$("$venv/bin/python" -c "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))")
torch_cuda=$site/torch/lib/libtorch_cuda.so
include=$site/nvidia/nccl/include
[ -f "$lib" ] || { echo "FAIL: no $lib"; exit 1; }
[ -f "$torch_cuda" ] || { echo "FAIL: no $torch_cuda"; exit 1; }

wanted=$(nm -D "$torch_cuda" | awk '$1 == "U" && $2 ~ /^nccl/ {sub(/@.*/, "", $2); print $2}' | sort -u)
defined=$(nm -D --defined-only "$lib" | awk '{sub(/@.*/, "", $3); print $3}' | sort -u)
missing=$(comm -23 <(echo "$wanted") <(echo "$defined"))
[ -z "$missing" ] || { echo "FAIL: libtorch_cuda.so imports what coll's libnccl.so.2 lacks:" $missing; exit 1; }
echo "PASS: all $(echo "$wanted" | wc -l) nccl symbols libtorch_cuda.so imports are defined"

out=$(LD_PRELOAD=$lib NCCL_DEBUG=INFO "$venv/bin/python" -c "
import torch, torch.cuda.nccl as nccl
print('version', nccl.version())
print('id bytes', len(nccl.unique_id()))
" 2>&1) || { echo "$out"; echo "FAIL: import torch with coll's libnccl.so.2 preloaded"; exit 1; }
grep -q "version (2, 30, 7)" <<<"$out" || { echo "$out"; echo "FAIL: torch saw another NCCL version"; exit 1; }
grep -q "coll INFO BOOTSTRAP root listening" <<<"$out" ||
  { echo "$out"; echo "FAIL: torch's ncclGetUniqueId did not run in coll's library"; exit 1; }
echo "PASS: import torch with coll's libnccl.so.2 preloaded; torch's ncclGetVersion and ncclGetUniqueId ran in coll"

[ -f "$include/nccl_device/core.h" ] || { echo "FAIL: no NCCL 2.30 headers under $include"; exit 1; }
c++ -std=c++17 -fsyntax-only -I"$include" -I/usr/local/cuda/include -I"$root/src" -I"$root/include" \
  "$root/tests/nccl/abi_check.cc"
echo "PASS: the drop-in's ABI matches NCCL $(sed -n 's/^#define NCCL_VERSION_CODE //p' "$include/nccl.h")'s headers"
