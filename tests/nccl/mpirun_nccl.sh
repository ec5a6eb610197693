#!/usr/bin/env bash
# The NCCL program one rank per process under Open MPI's mpirun (the unique id through MPI_Bcast,
# as NCCL's user guide does it), linked against coll's libnccl.so.2. Exit 77 (skip) without mpirun.
set -euo pipefail
program=$1
ranks=${2:-3}
mpirun=$(command -v mpirun.openmpi || command -v mpirun || true)
if [ -z "$mpirun" ]; then
  echo "SKIP: Open MPI's mpirun is not installed (apt-get install openmpi-bin)"
  exit 77
fi
pass=()
if [ -n "${COLL_SHM_DISABLE:-}" ]; then pass=(-x COLL_SHM_DISABLE); fi  # the TCP run
env -u COLL_RANK -u COLL_WORLD_SIZE -u RANK -u WORLD_SIZE OMPI_MCA_plm_rsh_agent= \
  timeout 120 "$mpirun" --allow-run-as-root --oversubscribe -np "$ranks" "${pass[@]}" "$program" mpi
