#!/usr/bin/env bash
# Fails if the test suite left shared-memory segments, coll processes or network namespaces behind.
left=$(ls /dev/shm 2>/dev/null | grep -i coll || true)
procs=$(pgrep -af 'coll-run|coll_test_worker|coll-info --check|coll-perf' | grep -v pgrep || true)
# The namespace test's hosts and bridge: c<pid>h<i>, c<pid>br (tests/netns/hosts.sh).
netns=$(ip netns list 2>/dev/null | grep -E '^c[0-9]+(h[0-9]+|br)\b' || true)
status=0
if [ -n "$left" ]; then echo "FAIL: left in /dev/shm: $left"; status=1; fi
if [ -n "$procs" ]; then echo "FAIL: stray processes: $procs"; status=1; fi
if [ -n "$netns" ]; then echo "FAIL: network namespaces left: $netns"; status=1; fi
[ $status = 0 ] && echo "PASS: nothing left in /dev/shm, no stray coll processes, no test namespaces"
exit $status
