#!/usr/bin/env bash
# Fails if the test suite left shared-memory segments or coll processes behind.
left=$(ls /dev/shm 2>/dev/null | grep -i coll || true)
procs=$(pgrep -af 'coll-run|coll_test_worker|coll-info --check' | grep -v pgrep || true)
status=0
if [ -n "$left" ]; then echo "FAIL: left in /dev/shm: $left"; status=1; fi
if [ -n "$procs" ]; then echo "FAIL: stray processes: $procs"; status=1; fi
[ $status = 0 ] && echo "PASS: nothing left in /dev/shm, no stray coll processes"
exit $status
