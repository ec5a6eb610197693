#!/usr/bin/env bash
# Fails when a file under src/ includes a folder its layer may not use (src/README.md). Every
# layer may include the public header (coll/...) and system headers.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
  [base]="base"
  [topo]="base topo"
  [kernels]="kernels"
  [algorithms]="algorithms"
  [device]="base topo device"
  [bootstrap]="base topo bootstrap"
  [transport]="base topo device bootstrap transport"
  [exec]="base device kernels algorithms transport exec"
  [core]="base topo device bootstrap transport kernels algorithms exec core"
  [api]="base topo device bootstrap transport kernels algorithms exec core api"
  [parallel]="parallel"
  [nccl]="nccl"
)

bad=0
while IFS= read -r file; do
  layer=$(echo "$file" | cut -d/ -f2)
  if [ -z "${allowed[$layer]+x}" ]; then
    echo "check_layers: $file: folder src/$layer is not a known layer (add it to this script and src/README.md)"
    bad=1
    continue
  fi
  while IFS= read -r inc; do
    top=${inc%%/*}
    [ "$top" = coll ] && continue
    if [ "$top" = "$inc" ] || ! [[ " ${allowed[$layer]} " == *" $top "* ]]; then
      echo "check_layers: $file includes \"$inc\": layer $layer may include only: ${allowed[$layer]} (and coll/)"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src -mindepth 2 -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) | sort)

if [ $bad -ne 0 ]; then exit 1; fi
echo "check_layers: every include under src/ points down or within its layer"
