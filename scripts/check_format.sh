#!/usr/bin/env bash
# Fails if any C/C++/CUDA file in the tree differs from .clang-format's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh')
bad=()
for f in $files; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "clang-format would change: ${bad[*]}"
  echo "fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "format: $(echo "$files" | wc -w) files clean"
