#!/usr/bin/env bash
# Usage: check_exports.sh DIR
#
# Checks that each of DIR/libnccl-net-colltest-v{6..12}.so exports its own ncclNetPlugin_vN, no other
# ncclNet*/ncclCollNet* symbol, and no other symbol of its own (names starting with "__", which toolchains and
# sanitizers add, and the linker's _edata/_end/_init/_fini are allowed). A library that also exported, say,
# ncclNetPlugin_v11 would let a loader pass a v12 test with its v11 adapter.
# Uses $NM if set (CMake passes CMAKE_NM), else nm. Exits non-zero if any library fails.
set -euo pipefail

dir=${1:?usage: check_exports.sh DIR}
nm_tool=${NM:-nm}
failed=0

fail() {
  echo "check_exports: FAIL: $*" >&2
  failed=1
  lib_failed=1
}

for version in 6 7 8 9 10 11 12; do
  lib=$dir/libnccl-net-colltest-v$version.so
  own=ncclNetPlugin_v$version
  lib_failed=0
  if [[ ! -f $lib ]]; then
    fail "$lib does not exist"
    continue
  fi
  if ! listing=$("$nm_tool" -D --defined-only "$lib"); then
    fail "$nm_tool -D --defined-only $lib failed"
    continue
  fi
  names=$(awk 'NF { print $NF }' <<<"$listing")
  if ! grep -qx "$own" <<<"$names"; then
    fail "$lib does not export $own"
  fi
  stray=$(grep -E '^(ncclNet|ncclCollNet)' <<<"$names" | grep -vx "$own" || true)
  if [[ -n $stray ]]; then
    fail "$lib exports other plugin symbols besides $own:" $stray
  fi
  others=$(grep -vE '^(ncclNet|ncclCollNet)' <<<"$names" | grep -vE '^(__|_edata$|_end$|_init$|_fini$)' || true)
  if [[ -n $others ]]; then
    fail "$lib exports symbols of its own besides $own (is it built with -fvisibility=hidden?):" $others
  fi
  if [[ $lib_failed -eq 0 ]]; then
    echo "check_exports: ok: $lib exports $own only"
  fi
done

if [[ $failed -ne 0 ]]; then
  echo "check_exports: FAILED for $dir" >&2
  exit 1
fi
