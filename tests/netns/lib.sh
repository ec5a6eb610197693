# Hosts as network namespaces, for tests/netns/hosts.sh and perf/netns_vs_gloo.sh (sourced).
#
# netns_up HOSTS makes host i a network namespace ${ns[i]} with cveth0 = 10.77.0.(i+1)/24 and
# cveth1 = 10.77.1.(i+1)/24, both veth pairs into a bridge that lives in a namespace of its own;
# on_host i CMD... runs CMD inside host i, in a UTS namespace whose host name is collhost<i>. Every
# namespace (with its veths and processes) is removed on exit, also on failure. Exits 77
# (ctest: skipped) with the reason when namespaces cannot be made here. Needs root.

tag="c$$"
bridge_ns="${tag}br"
ns=()
log=$(mktemp -d /tmp/coll-netns-XXXXXX)

netns_cleanup() {
  for n in "${ns[@]}" "$bridge_ns"; do
    if ip netns list 2>/dev/null | grep -qw "$n"; then
      # SIGTERM first: coll-run forwards it and reaps its ranks (a rank whose coll-run is killed
      # outright is left to pid 1, which in a container may never reap it). Gone, not just
      # signalled, before the namespace goes (the leftover check runs next).
      for pid in $(ip netns pids "$n" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
      for _ in $(seq 50); do [ -z "$(ip netns pids "$n" 2>/dev/null)" ] && break; sleep 0.1; done
      for pid in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
      ip netns del "$n" 2>/dev/null
    fi
  done
  rm -rf "$log"
}
trap netns_cleanup EXIT
trap 'exit 130' INT TERM

skip() { echo "SKIPPED: $*"; exit 77; }

netns_up() {
  local hosts=$1 i n
  for ((i = 0; i < hosts; i++)); do ns+=("${tag}h$i"); done
  [ "$(id -u)" = 0 ] || skip "network namespaces need root"
  command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
  command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
  ip netns add "$bridge_ns" 2>/dev/null || skip "this machine forbids network namespaces (ip netns add failed)"
  set -e
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  for ((i = 0; i < hosts; i++)); do
    n=${ns[$i]}
    ip netns add "$n"
    ip -n "$n" link set lo up
    # Two ports per host, each a veth pair with one end on the bridge; cveth1 is on a subnet of
    # its own, for the choice of NIC by locality.
    for port in 0 1; do
      ip link add "${tag}v$i$port" netns "$n" type veth peer name "${tag}p$i$port" netns "$bridge_ns"
      ip -n "$n" link set "${tag}v$i$port" name cveth$port
      ip -n "$n" addr add "10.77.$port.$((i + 1))/24" dev cveth$port
      ip -n "$n" link set cveth$port up
      ip -n "$bridge_ns" link set "${tag}p$i$port" master br0
      ip -n "$bridge_ns" link set "${tag}p$i$port" up
    done
  done
  set +e
}

# Master ports are drawn from 20000-31999, below the kernel's ephemeral range (32768-60999): a
# port left in TIME_WAIT by an earlier run's outgoing connection could not be bound.

# on_host I CMD...: CMD inside host I, with the host name collhost<I>.
on_host() {
  local i=$1
  shift
  ip netns exec "${ns[$i]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "collhost$i" "$@"
}
