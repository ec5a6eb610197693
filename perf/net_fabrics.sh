#!/usr/bin/env bash
# All-reduce over coll's networks, 2 ranks as processes, side by side in one run: on loopback, and
# across 2 hosts that are network namespaces (tests/netns/lib.sh: veth pairs into a bridge, one
# rank per host, 10.77.0.0/24; NETNS=0 skips them):
#   coll-tcp      coll's sockets                      (COLL_NET=tcp)
#   coll-ucx      coll's UCX provider over TCP        (COLL_NET=ucx UCX_TLS=tcp)
#   coll-ofi      coll over aws-ofi-nccl, libfabric's tcp provider (COLL_NET_PLUGIN; the plugin
#                 is built by tests/compat/aws_ofi_nccl.sh into .compat/, skipped when absent)
#   openmpi-ucx   Open MPI over UCX                   (mpirun --mca pml ucx -x UCX_TLS=tcp, devices any)
#   gloo          Gloo over TCP
# coll with COLL_SHM_DISABLE=1 so that every byte crosses the network under test. Sizes 8 B,
# 1 MiB and 256 MiB (float32 sum), each configuration REPEAT times in alternation; medians.
#
#   bash perf/net_fabrics.sh            # REPEAT=3
#
# Writes perf/results/<stamp>-fabrics/: raw outputs, env.txt (machine, versions, commands) and
# summary.md. Needs root (namespaces), iproute2, openmpi-bin, libopenmpi-dev, libgloo-dev,
# libucx-dev.
set -uo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-3}
NETNS=${NETNS:-1}
# Multi-node coll-run needs one random bootstrap secret shared by every node.
export COLL_BOOTSTRAP_SECRET=${COLL_BOOTSTRAP_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
build=$(cd "${COLL_BUILD_DIR:-build}" && pwd)
out=$(pwd)/perf/results/$(date -u +%Y%m%d-%H%M%S)-fabrics
mkdir -p "$out" perf/build
cmake --build "$build" --target coll-perf coll-run >/dev/null || exit 1
mpicc.openmpi -O2 -o perf/build/mpi_allreduce.openmpi perf/drivers/mpi_allreduce.c -lm || exit 1
g++ -O2 -std=c++17 -o perf/build/gloo_allreduce perf/drivers/gloo_allreduce.cc -lgloo -lpthread || exit 1
ofi=$(pwd)/.compat/aws-ofi-nccl/install/lib/libnccl-net-ofi.so
OFI_ENV=(LD_LIBRARY_PATH="$(pwd)/.compat/aws-ofi-nccl/fake-cudart" FI_PROVIDER=tcp FI_TCP_IFACE=lo
         OFI_NCCL_EXCLUDE_TCP_IF=docker0 OFI_NCCL_PROTOCOL=SENDRECV COLL_NET_PLUGIN="$ofi")
SIZES=("8 8 -n 2000 -w 50" "1M 1M -n 100 -w 10" "256M 256M -n 3 -w 1")
# UCX's version, read before the heredoc-free echo below (inside its double quotes the shell
# expanded dpkg-query's ${Version} under set -u).
ucx_version=$(dpkg-query -W -f '${Version}' libucx0 2>/dev/null || true)
{
  echo "date: $(date -u)"
  echo "machine: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); kernel $(uname -r)"
  echo "coll: $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-60))"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1); ucx: $ucx_version;" \
    "gloo: $(dpkg-query -W -f='${Version}' libgloo-dev); libfabric: $(dpkg-query -W -f='${Version}' libfabric1)"
  echo "aws-ofi-nccl: $([ -f "$ofi" ] && git -C .compat/aws-ofi-nccl/src rev-parse HEAD 2>/dev/null || echo absent)"
  echo "layout: 2 ranks on this machine (loopback); repeats: $REPEAT, alternating"
  echo "commands (ARGS = -b S -e S -n N -w W -c 1 for S in 8, 1M, 256M):"
  echo "  coll-tcp:    COLL_NET=tcp COLL_SHM_DISABLE=1 coll-run -n 2 coll-perf all_reduce ARGS"
  echo "  coll-ucx:    COLL_NET=ucx UCX_TLS=tcp COLL_SHM_DISABLE=1 coll-run -n 2 coll-perf all_reduce ARGS"
  echo "  coll-ofi:    ${OFI_ENV[*]} COLL_SHM_DISABLE=1 coll-run -n 2 coll-perf all_reduce ARGS"
  echo "  openmpi-ucx: mpirun.openmpi -np 2 --mca pml ucx --mca pml_ucx_devices any --mca pml_ucx_tls any -x UCX_TLS=tcp" \
    "perf/build/mpi_allreduce.openmpi ARGS (Open MPI 4.1 selects pml ucx only on mlx5 devices unless told any)"
  echo "  gloo:        GLOO_HOST=127.0.0.1 perf/build/gloo_allreduce R 2 STOREDIR ARGS (two processes)"
  echo "across 2 namespaces (host i = collhost<i>, 10.77.0.(i+1) on cveth0), one rank per host:"
  echo "  coll-*:      as above without COLL_SHM_DISABLE, per host i: COLL_SOCKET_IFNAME=cveth0 coll-run -n 1" \
    "--nnodes 2 --node-rank i --master 10.77.0.1:PORT coll-perf all_reduce ARGS (coll-ofi: FI_TCP_IFACE=cveth0;" \
    "UCX: UCX_NET_DEVICES=cveth0)"
  echo "  openmpi-ucx: on host 0, mpirun.openmpi --host collhost0:1,collhost1:1 -np 2 --mca plm_rsh_agent" \
    "tests/netns/mpirun_agent.sh --mca oob_tcp_if_include 10.77.0.0/24 --mca pml ucx --mca pml_ucx_devices any" \
    "-x UCX_TLS=tcp -x UCX_NET_DEVICES=cveth0 perf/build/mpi_allreduce.openmpi ARGS"
  echo "  gloo:        GLOO_HOST=10.77.0.(i+1) in host i"
} > "$out/env.txt"

run() {  # CONFIG REP SIZEIDX
  local cfg=$1 rep=$2 s=(${SIZES[$3]}) dest="$out/$1-$3-$2.txt"
  local args=(-b "${s[0]}" -e "${s[1]}" "${s[@]:2}" -c 1)
  case $cfg in
    coll-tcp) env COLL_NET=tcp COLL_SHM_DISABLE=1 "$build/bin/coll-run" -n 2 --timeout 600 "$build/bin/coll-perf" \
                all_reduce "${args[@]}" > "$dest" 2>&1 ;;
    coll-ucx) env COLL_NET=ucx UCX_TLS=tcp COLL_SHM_DISABLE=1 "$build/bin/coll-run" -n 2 --timeout 600 \
                "$build/bin/coll-perf" all_reduce "${args[@]}" > "$dest" 2>&1 ;;
    coll-ofi) env "${OFI_ENV[@]}" COLL_SHM_DISABLE=1 "$build/bin/coll-run" -n 2 --timeout 600 "$build/bin/coll-perf" \
                all_reduce "${args[@]}" > "$dest" 2>&1 ;;
    openmpi-ucx) timeout 600 mpirun.openmpi --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_devices any \
                --mca pml_ucx_tls any -x UCX_TLS=tcp \
                perf/build/mpi_allreduce.openmpi "${args[@]}" > "$dest" 2>&1 ;;
    gloo) local store
          store=$(mktemp -d)
          GLOO_HOST=127.0.0.1 perf/build/gloo_allreduce 1 2 "$store" "${args[@]}" > /dev/null 2>&1 &
          GLOO_HOST=127.0.0.1 timeout 600 perf/build/gloo_allreduce 0 2 "$store" "${args[@]}" > "$dest" 2>&1
          wait
          rm -rf "$store" ;;
  esac
}

CFGS=(coll-tcp coll-ucx openmpi-ucx gloo)
[ -f "$ofi" ] && CFGS+=(coll-ofi)
for rep in $(seq 1 "$REPEAT"); do
  for si in 0 1 2; do
    for cfg in "${CFGS[@]}"; do
      echo "repeat $rep/$REPEAT size ${SIZES[$si]%% *} $cfg"
      run "$cfg" "$rep" "$si"
    done
  done
done

# Across two namespaces: one rank per host.
run_ns() {  # CONFIG REP SIZEIDX
  local cfg=$1 rep=$2 s=(${SIZES[$3]}) dest="$out/ns-$1-$3-$2.txt" port=$((20000 + RANDOM % 12000)) pids=() i
  local args=(-b "${s[0]}" -e "${s[1]}" "${s[@]:2}" -c 1)
  local envs=(COLL_SOCKET_IFNAME=cveth0)
  case $cfg in
    coll-tcp) envs+=(COLL_NET=tcp) ;;
    coll-ucx) envs+=(COLL_NET=ucx UCX_TLS=tcp UCX_NET_DEVICES=cveth0) ;;
    coll-ofi) envs+=("${OFI_ENV[@]}" FI_TCP_IFACE=cveth0) ;;
  esac
  case $cfg in
    coll-*)
      for i in 1 0; do
        local d=/dev/null
        [ $i = 0 ] && d=$dest
        on_host "$i" env "${envs[@]}" "$build/bin/coll-run" -n 1 --nnodes 2 --node-rank "$i" \
          --master "10.77.0.1:$port" --timeout 600 "$build/bin/coll-perf" all_reduce "${args[@]}" > "$d" 2>&1 &
        pids+=($!)
      done
      wait "${pids[@]}" ;;
    openmpi-ucx)
      on_host 0 env NETNS_PREFIX="${tag}h" timeout 600 mpirun.openmpi --allow-run-as-root --host collhost0:1,collhost1:1 \
        -np 2 --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include 10.77.0.0/24 --mca pml ucx \
        --mca pml_ucx_devices any --mca pml_ucx_tls any -x UCX_TLS=tcp -x UCX_NET_DEVICES=cveth0 \
        perf/build/mpi_allreduce.openmpi "${args[@]}" > "$dest" 2>&1 ;;
    gloo)
      local store
      store=$(mktemp -d)
      on_host 1 env GLOO_HOST=10.77.0.2 perf/build/gloo_allreduce 1 2 "$store" "${args[@]}" > /dev/null 2>&1 &
      on_host 0 env GLOO_HOST=10.77.0.1 timeout 600 perf/build/gloo_allreduce 0 2 "$store" "${args[@]}" > "$dest" 2>&1
      wait
      rm -rf "$store" ;;
  esac
}

if [ "$NETNS" = 1 ]; then
  source tests/netns/lib.sh
  netns_up 2
  agent=$(pwd)/tests/netns/mpirun_agent.sh
  for rep in $(seq 1 "$REPEAT"); do
    for si in 0 1 2; do
      for cfg in "${CFGS[@]}"; do
        echo "namespaces: repeat $rep/$REPEAT size ${SIZES[$si]%% *} $cfg"
        run_ns "$cfg" "$rep" "$si"
      done
    done
  done
fi

/usr/bin/python3 - "$out" <<'PY'
import os, re, statistics, sys
from collections import defaultdict
out = sys.argv[1]
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)")
CFGS = ["coll-tcp", "coll-ucx", "coll-ofi", "openmpi-ucx", "gloo"]
data = {"": defaultdict(lambda: defaultdict(list)), "ns-": defaultdict(lambda: defaultdict(list))}
wrong = 0
for name in sorted(os.listdir(out)):
    m = re.match(r"(ns-)?(.+)-(\d)-(\d+)\.txt$", name)
    if not m:
        continue
    for line in open(os.path.join(out, name)):
        r = ROW.match(line)
        if r:
            size, _, t, _, bus, bad = r.groups()
            data[m.group(1) or ""][int(size)][m.group(2)].append((float(t), float(bus)))
            wrong += int(bad)
lines = ["# All-reduce over the networks, 2 ranks (float32 sum, out of place), medians of the repeats", "",
         "time in us (bus bandwidth GB/s); ratios against coll-tcp and openmpi-ucx in the same run"]
for prefix, title in (("", "loopback, one host, shm off"), ("ns-", "2 network namespaces, one rank each")):
    d = data[prefix]
    if not d:
        continue
    cfgs = [c for c in CFGS if any(c in d[s] for s in d)]
    lines += ["", f"## {title}", "", "| size | " + " | ".join(cfgs) + " | ucx/tcp busbw | ucx/openmpi-ucx time |",
              "|---|" + "---|" * (len(cfgs) + 2)]
    for size in sorted(d):
        cells, med = [], {}
        for c in cfgs:
            v = d[size].get(c)
            if not v:
                cells.append("-")
                continue
            t = statistics.median(x[0] for x in v)
            b = statistics.median(x[1] for x in v)
            med[c] = (t, b)
            cells.append(f"{t:.2f} ({b:.3f})")
        r1 = (f"{med['coll-ucx'][1] / med['coll-tcp'][1]:.2f}x"
              if "coll-ucx" in med and "coll-tcp" in med and med["coll-tcp"][1] > 0 else "-")
        r2 = f"{med['coll-ucx'][0] / med['openmpi-ucx'][0]:.2f}x" if "coll-ucx" in med and "openmpi-ucx" in med else "-"
        lines.append(f"| {size} | " + " | ".join(cells) + f" | {r1} | {r2} |")
lines += ["", f"wrong results across all runs: {wrong}", "",
          "raw outputs: [ns-]<config>-<size index>-<repeat>.txt; env.txt"]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
