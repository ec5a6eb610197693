#!/usr/bin/env bash
# Open MPI's remote shell for hosts that are network namespaces (tests/netns/lib.sh): mpirun
# calls "AGENT [ssh options] HOST COMMAND..." to start its daemon on HOST; this runs COMMAND
# inside HOST's namespace (NETNS_PREFIX<i> for collhost<i>), with its host name, as ssh would
# run it in a shell on that machine.
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
host=$1
shift
exec ip netns exec "${NETNS_PREFIX:?}${host#collhost}" unshare --uts sh -c 'hostname "$0" && eval "$*"' "$host" "$@"
