#!/usr/bin/env bash
# Under the NCCL drop-in, NCCL's variables with a coll twin are read (NCCL_DEBUG as COLL_DEBUG) and
# the others are named once at INFO as not applying; the program still passes its checks.
set -euo pipefail
out=$(NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0 "$1" threads 2 2>&1) || { echo "$out"; echo "FAIL: the program failed"; exit 1; }
grep -q "NCCL variables read: NCCL_DEBUG as COLL_DEBUG" <<<"$out" || { echo "$out"; echo "FAIL: NCCL_DEBUG not read"; exit 1; }
grep -q "INIT coll version" <<<"$out" || { echo "$out"; echo "FAIL: no INFO line although NCCL_DEBUG=INFO"; exit 1; }
grep -q "NCCL variables that do not apply to coll: NCCL_IB_HCA" <<<"$out" || { echo "$out"; echo "FAIL: NCCL_IB_HCA not named"; exit 1; }
grep -q "all checks passed" <<<"$out" || { echo "$out"; echo "FAIL"; exit 1; }
echo "PASS: NCCL_DEBUG read as COLL_DEBUG, NCCL_IB_HCA named as not applying"
