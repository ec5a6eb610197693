#!/usr/bin/env bash
# A foreign launcher: Open MPI's mpirun starts 4 ranks of the worker, which initializes with
# collCommInitFromEnv from OMPI_COMM_WORLD_* (plus the master address, which mpirun cannot give)
# and checks its rank and size against OMPI_COMM_WORLD_RANK/SIZE. Exit 77 (skip) without mpirun.
set -euo pipefail
worker=$1
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -z "$mpirun" ]; then
  echo "SKIP: Open MPI's mpirun is not installed (apt-get install openmpi-bin)"
  exit 77
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(env -u COLL_RANK -u COLL_WORLD_SIZE -u RANK -u WORLD_SIZE \
  OMPI_MCA_plm_rsh_agent= timeout 120 "$mpirun" --allow-run-as-root --oversubscribe -np 4 \
  -x COLL_MASTER_ADDR=127.0.0.1 -x COLL_MASTER_PORT="$port" -x COLL_DEBUG=WARN \
  "$worker" basic OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE 2>&1) || { echo "$out"; echo "FAIL: mpirun exited $?"; exit 1; }
echo "$out"
n=$(grep -cE 'worker rank [0-3]/4 ok' <<<"$out" || true)
if [ "$n" != 4 ]; then
  echo "FAIL: expected 4 ranks ok under mpirun, saw $n"
  exit 1
fi
echo "PASS: 4 ranks started by $mpirun initialized from OMPI_COMM_WORLD_*"
