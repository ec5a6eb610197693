#!/usr/bin/env bash
# Several hosts on one machine: each "host" is a network namespace with its own UTS namespace
# (its own host name, so coll sees distinct hosts), joined to the others by a veth pair into a
# bridge that lives in a namespace of its own. Nothing is put on the machine's own interfaces:
# traffic stays on these namespaces' addresses (10.77.0.0/24). One coll-run per host with
# --nnodes/--node-rank/--master, as on a cluster.
#
#   tests/netns/hosts.sh BUILD_DIR [HOSTS] [PER_HOST]
#
# Checks, with HOSTS hosts of PER_HOST ranks (default 2 x 2):
#   1. every collective, type and op across the hosts, each result checked by coll-perf (-c);
#      the header must show shm between a host's ranks and TCP between hosts;
#   2. COLL_SOCKET_IFNAME picks the namespace's veth; a name no interface has fails init, named;
#      without it, of two ports the one closest to the rank's NUMA node (a topology file says
#      which) is used;
#   3. the hierarchical all-reduce forced across the hosts;
#   3b. ranks placed round-robin over the hosts: rings still enter each host once;
#   3c. Open MPI's mpirun across the namespaces (mpirun_agent.sh as its ssh), ranks initialized
#      from OMPI_COMM_WORLD_*;
#   3d. coll's UCX provider (COLL_NET=ucx, UCX_TLS=tcp) across the namespaces;
#   4. one host's ranks killed mid-run: the other host's ranks fail within COLL_TIMEOUT_MS,
#      naming a rank of the lost host and the host.
# The namespaces come from lib.sh: removed on exit, also on failure; exit 77 (ctest: skipped) with
# the reason when namespaces cannot be made here.
set -uo pipefail
# Multi-node coll-run needs one random bootstrap secret shared by every node.
export COLL_BOOTSTRAP_SECRET=${COLL_BOOTSTRAP_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
build=$(cd "${1:?usage: hosts.sh BUILD_DIR [HOSTS] [PER_HOST]}" && pwd)
HOSTS=${2:-2}
PER_HOST=${3:-2}
failures=0
n=$((HOSTS * PER_HOST))
source "$(dirname "$0")/lib.sh"
netns_up "$HOSTS"

# run_hosts [--round-robin] NAME ENV... -- ARGS: one coll-run of PER_HOST ranks per host, or with
# --round-robin one coll-run per rank, rank r on host r % HOSTS (as a launcher placing ranks
# round-robin would). Output of coll-run j goes to $log/NAME.j.
run_hosts() {
  local runs=$HOSTS per=$PER_HOST
  if [ "$1" = --round-robin ]; then
    runs=$n per=1
    shift
  fi
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local port=$((20000 + RANDOM % 12000)) pids=() rc=0 j
  for ((j = 0; j < runs; j++)); do
    on_host $((j % HOSTS)) env "${envs[@]}" "$build/bin/coll-run" -n "$per" --nnodes "$runs" --node-rank "$j" \
      --master "10.77.0.1:$port" --timeout 120 "$@" > "$log/$name.$j" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

check() {  # description, command status
  if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAILED: $1"; failures=$((failures + 1)); fi
}

show() { for ((i = 0; i < HOSTS; i++)); do sed "s/^/  host$i| /" "$log/$1.$i" | tail -${2:-15}; done; }

# 1. Every collective, across hosts, checked.
for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  run_hosts "$coll" COLL_DEBUG=WARN -- "$build/bin/coll-perf" "$coll" -b 8 -e 256K -f 32 -d all -o all -r all \
    -n 2 -w 1 -c 1
  rc=$?
  [ $rc = 0 ] || show "$coll"
  check "$coll: every type and op across $HOSTS hosts x $PER_HOST ranks, results checked" $rc
done
head=$(grep -m1 "^# coll transports:" "$log/all_reduce.0")
echo "  $head"
echo "$head" | grep -q "$n ranks on $HOSTS hosts" && echo "$head" | grep -q "shm to $((PER_HOST - 1)) peer" &&
  echo "$head" | grep -q "tcp to"
check "ranks of a host use shm, hosts use TCP" $?

# 2. Interface selection inside the namespaces.
run_hosts ifname COLL_SOCKET_IFNAME=cveth0 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET,BOOTSTRAP -- \
  "$build/bin/coll-perf" all_reduce -b 1M -e 1M -n 2 -w 1 -c 1
rc=$?
[ $rc = 0 ] && grep -q "uses interface cveth0" "$log/ifname.0"
rc2=$?
[ $rc2 = 0 ] || show ifname 30
check "COLL_SOCKET_IFNAME=cveth0 is used" $rc2
run_hosts badif COLL_SOCKET_IFNAME=nosuchif -- "$build/bin/coll-perf" all_reduce -b 8 -e 8 -n 1 -w 0
rc=$?
[ $rc != 0 ] && grep -q "COLL_SOCKET_IFNAME.*nosuchif" "$log/badif.0"
rc2=$?
[ $rc2 = 0 ] || show badif
check "COLL_SOCKET_IFNAME=nosuchif fails init, naming it" $rc2

# 2b. The NIC by locality: tests/netns/two-ports.json puts cveth1 on this machine's NUMA node 0
# and cveth0 across the socket; without COLL_SOCKET_IFNAME every rank takes cveth1.
topo_file="$(dirname "$0")/two-ports.json"
run_hosts nic COLL_TOPO_FILE="$topo_file" COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET -- \
  "$build/bin/coll-perf" all_reduce -b 1M -e 1M -n 2 -w 1 -c 1
rc=$?
[ $rc = 0 ] && [ "$(cat "$log"/nic.* | grep -c "uses interface cveth1 (10.77.1.*the closest to its NUMA node")" = $n ]
rc2=$?
[ $rc2 = 0 ] || show nic 30
check "no COLL_SOCKET_IFNAME: every rank uses the port closest to its NUMA node (cveth1), checked" $rc2
run_hosts nic2 COLL_TOPO_FILE="$topo_file" COLL_SOCKET_IFNAME=cveth0 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET -- \
  "$build/bin/coll-perf" all_reduce -b 1M -e 1M -n 2 -w 1 -c 1
rc=$?
[ $rc = 0 ] && [ "$(cat "$log"/nic2.* | grep -c "uses interface cveth0 (10.77.0.")" = $n ]
rc2=$?
[ $rc2 = 0 ] || show nic2 30
check "COLL_SOCKET_IFNAME=cveth0 overrides the locality choice" $rc2

# 3. The hierarchical all-reduce across real host boundaries.
run_hosts hier COLL_ALGO=allreduce:hier -- "$build/bin/coll-perf" all_reduce -b 8 -e 4M -f 16 -d all -o sum -n 2 \
  -w 1 -c 1
rc=$?
[ $rc = 0 ] && grep -q "hier" "$log/hier.0"
rc2=$?
[ $rc2 = 0 ] || show hier
check "hierarchical all-reduce across hosts, checked" $rc2

# 3b. Ranks placed round-robin over the hosts (rank r on host r % HOSTS, one coll-run -n 1 per
# rank): rings and the hierarchical all-reduce still enter each host once (COLL_RING_ORDER=topo).
for algo in "allreduce:ring;allgather:ring;reducescatter:ring" allreduce:hier; do
  for coll in all_reduce all_gather reduce_scatter; do
    [ "$algo" = allreduce:hier ] && [ $coll != all_reduce ] && continue
    run_hosts --round-robin "rr-$coll" COLL_ALGO="$algo" COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=TOPO -- \
      "$build/bin/coll-perf" $coll -b 8 -e 1M -f 32 -d all -o sum -n 2 -w 1 -c 1
    rc=$?
    [ $rc = 0 ] && grep -q "ring (topo):.* it crosses between hosts $HOSTS time(s), rank order would $n" "$log/rr-$coll.0" &&
      { [ "$algo" != allreduce:hier ] || grep -q "hierarchical all-reduce: $HOSTS hosts x $PER_HOST ranks" "$log/rr-$coll.0"; }
    rc2=$?
    [ $rc2 = 0 ] || tail -20 "$log/rr-$coll.0"
    check "ranks round-robin over hosts, $coll with $algo: ring host by host ($HOSTS crossings, not $n), checked" $rc2
  done
done

# 3c. A foreign launcher across the hosts: Open MPI's mpirun, started on host 0, starts its
# daemons in the other namespaces through mpirun_agent.sh (its ssh), and the ranks initialize
# from OMPI_COMM_WORLD_* (plus the master address, which mpirun cannot give).
mpirun=$(command -v mpirun.openmpi || true)
if [ -n "$mpirun" ]; then
  slots=$(for ((i = 0; i < HOSTS; i++)); do printf "collhost%d:%d," "$i" "$PER_HOST"; done)
  mpi_run() {  # NAME PROGRAM ARGS...
    local name=$1
    shift
    on_host 0 env NETNS_PREFIX="${tag}h" timeout 120 "$mpirun" --allow-run-as-root --oversubscribe \
      --host "${slots%,}" -np "$n" --mca plm_rsh_agent "$(cd "$(dirname "$0")" && pwd)/mpirun_agent.sh" \
      --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 \
      -x COLL_MASTER_ADDR=10.77.0.1 -x COLL_MASTER_PORT=$((20000 + RANDOM % 12000)) -x COLL_DEBUG=WARN \
      "$@" > "$log/$name.0" 2>&1
  }
  mpi_run mpi-basic "$build/tests/coll_test_worker" basic OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
  rc=$?
  [ $rc = 0 ] && [ "$(grep -cE "worker rank [0-9]+/$n ok" "$log/mpi-basic.0")" = $n ]
  rc2=$?
  [ $rc2 = 0 ] || tail -20 "$log/mpi-basic.0"
  check "mpirun across the $HOSTS namespaces: $n ranks initialize from OMPI_COMM_WORLD_*" $rc2
  mpi_run mpi-perf "$build/bin/coll-perf" all_reduce -b 8 -e 1M -f 32 -d all -o sum -n 2 -w 1 -c 1
  rc=$?
  [ $rc = 0 ] && grep -q "$n ranks on $HOSTS hosts; shm to $((PER_HOST - 1)) peer" "$log/mpi-perf.0"
  rc2=$?
  [ $rc2 = 0 ] || tail -20 "$log/mpi-perf.0"
  check "mpirun across the namespaces: coll-perf all_reduce checked, shm inside hosts and TCP across" $rc2
else
  echo "skipped: mpirun across namespaces (Open MPI's mpirun.openmpi is not installed)"
fi

# 3d. coll's UCX provider across the hosts (UCX_TLS=tcp over the veths), shm off so that every
# pair of ranks goes through it; results checked. Skipped when coll was built without UCX.
# UCX_NET_DEVICES=cveth0: with both ports of each host given to UCX (its default), 3 of 4 CI runs
# on 2026-11-29 and then every local run failed here: "rank 3 refused a connection: no hello within
# 3000 ms" (20000 with a longer COLL_HANDSHAKE_TIMEOUT_MS: not slowness) and "Endpoint timeout" on
# the connecting rank; with cveth0 alone it passed every time. Two ports on one bridge, in
# namespaces, break UCX's TCP lanes here; coll's UCX provider does not yet hand UCX the interface
# coll chose (issue 48: UCX settings through ucp_config_modify). This check is about the data.
if "$build/bin/coll-info" 2>/dev/null | grep -q "^Network:" && COLL_NET=ucx "$build/bin/coll-info" 2>&1 |
  grep -q "^Network:     ucx"; then
  run_hosts ucx COLL_NET=ucx UCX_TLS=tcp UCX_NET_DEVICES=cveth0 COLL_SHM_DISABLE=1 -- \
    "$build/bin/coll-perf" all_reduce -b 8 -e 4M -f 16 \
    -d all -o sum -n 2 -w 1 -c 1
  rc=$?
  [ $rc = 0 ] && grep -q "^# coll transports: $n ranks on $HOSTS hosts; ucx \[UCX" "$log/ucx.0"
  rc2=$?
  [ $rc2 = 0 ] || show ucx
  check "ucx (UCX_TLS=tcp) between every pair across $HOSTS hosts, every type, checked" $rc2
else
  echo "skipped: coll built without UCX (COLL_NET=ucx)"
fi

# 4. A host lost mid-run: its coll-run is killed with its ranks.
port=$((20000 + RANDOM % 12000))
pids=()
start=$(date +%s)
for ((i = 0; i < HOSTS; i++)); do
  on_host "$i" env COLL_TIMEOUT_MS=5000 "$build/bin/coll-run" -n "$PER_HOST" --nnodes "$HOSTS" --node-rank "$i" \
    --master "10.77.0.1:$port" --timeout 120 "$build/bin/coll-perf" all_reduce -b 64M -e 64M -n 100000 -w 0 -c 0 \
    > "$log/kill.$i" 2>&1 &
  pids+=($!)
done
sleep 4
lost=$((HOSTS - 1))
# The ranks die (SIGKILL, no goodbye); their coll-run sees it, reaps them and exits.
for pid in $(ip netns pids "${ns[$lost]}"); do
  [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = coll-perf ] && kill -9 "$pid" 2>/dev/null
done
wait "${pids[0]}"
rc=$?
elapsed=$(($(date +%s) - start))
lostRanks=$(seq $((lost * PER_HOST)) $((lost * PER_HOST + PER_HOST - 1)) | paste -sd'|')
[ $rc != 0 ] && [ $elapsed -lt 60 ] && grep -Eq "rank ($lostRanks) on host collhost$lost" "$log/kill.0"
rc2=$?
[ $rc2 = 0 ] || show kill
grep -m1 -E "rank ($lostRanks) on host" "$log/kill.0" | sed 's/^/  /' | cut -c1-200
check "host $lost killed: host 0's ranks fail (status $rc after ${elapsed}s), naming a lost rank and its host" $rc2
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done

echo "netns: $failures failure(s)"
[ $failures = 0 ]
