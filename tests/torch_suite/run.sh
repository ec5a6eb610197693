#!/usr/bin/env bash
# PyTorch's distributed suite (TestDistBackend, test_dist_backend.py) on CPU for backend "coll" and
# for Gloo registered as a plugin under another name, at 2 and 3 ranks; prints per world size the
# tests each passed, and every test Gloo-as-plugin passes that coll does not. Outside CI (it takes
# long): bash tests/torch_suite/run.sh [VENV] [OUTDIR]  (VENV: a venv with torch and coll-torch
# installed, default ~/.cache/coll-torch/venv; WORLD_SIZES="2 3"; PYTEST_ARGS, e.g. "-k allreduce").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:-${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}}
out=${2:-$(mktemp -d /tmp/coll-torch-suite.XXXXXX)}
mkdir -p "$out"
# torch's test helpers need expecttest (from PyPI, small), which torch itself does not install.
"$venv/bin/python" -c "import expecttest" 2>/dev/null || "$venv/bin/pip" install -q expecttest
for ws in ${WORLD_SIZES:-2 3}; do
  for backend in gloo_plugin coll; do
    tmp=$(mktemp -d)
    echo "== $backend, $ws ranks -> $out/$backend-$ws.xml"
    # CPU only: torch skips its CUDA tests; float8 and CUDA are outside what is compared here.
    (cd "$here" && CUDA_VISIBLE_DEVICES= BACKEND=$backend WORLD_SIZE=$ws TEMP_DIR=$tmp \
      PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" timeout ${SUITE_TIMEOUT:-7200} \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider test_dist_backend.py --junitxml="$out/$backend-$ws.xml" \
      ${PYTEST_ARGS:-} >"$out/$backend-$ws.log" 2>&1) || true
    tail -1 "$out/$backend-$ws.log"
    rm -rf "$tmp"
  done
  "$venv/bin/python" "$here/compare.py" "$out/gloo_plugin-$ws.xml" "$out/coll-$ws.xml" | tee "$out/compare-$ws.txt"
done
