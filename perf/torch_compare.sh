#!/usr/bin/env bash
# torch.distributed with backend "coll" against Gloo on this machine, in one session:
# all_reduce float32 8 B .. 256 MiB on 2 and 4 ranks, a DDP step of a 67M-parameter MLP on 2 and
# 4 ranks (batch 8 and 2), and the per-call overhead of the binding. Needs scripts/torch_env.sh done.
#
#   bash perf/torch_compare.sh            (ROUNDS=3 by default)
#
# Writes perf/results/<stamp>-torch/: one JSON per run, results.md (tables, commands, machine)
# and plot.png (busbw against size).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${COLL_TORCH_PYTHON:-${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}/bin/python}
rounds=${ROUNDS:-3}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-torch
mkdir -p "$out"
run() {  # $1: name, rest: arguments of torch_compare.py
  local name=$1
  shift
  echo "\$ ${COLL_SPIN_US:+COLL_SPIN_US=$COLL_SPIN_US }python perf/torch_compare.py $* --json $out/$name.json" | tee -a "$out/log.md"
  "$py" perf/torch_compare.py "$@" --json "$out/$name.json" 2>&1 | grep -v -e Warning -e '^\[rank' | tee -a "$out/log.md"
}
for w in 2 4; do run "allreduce-$w" allreduce --world "$w" --rounds "$rounds"; done
# Batch 8: compute and communication of the same order; batch 2: communication-heavy.
for b in 8 2; do for w in 2 4; do run "ddp-b$b-$w" ddp --world "$w" --batch "$b" --rounds "$rounds"; done; done
# 4 ranks on fewer cores: coll's waits do not nap by default there (COLL_SPIN_US); with naps:
if [ "$(nproc)" -lt 4 ]; then COLL_SPIN_US=200 run "ddp-b2-4-spin200" ddp --world 4 --batch 2 --rounds "$rounds"; fi
run overhead overhead --rounds "$rounds"
"$py" perf/torch_compare_plot.py "$out"
echo "results in $out"
