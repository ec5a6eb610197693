#!/usr/bin/env bash
# Sanitizer runs, called by .ci/run (and by hand):
#   ASan+UBSan: the library and the test suites that exercise it (unit, threads, processes,
#     collectives over shm and TCP, host streams, the device interpreter's host build (its
#     dtype x op and failure cases), the client layer). The symbolic schedule verification runs its small rank counts only here
#     ([large] and [hier] go up to 4096 ranks: minutes under ASan, and pure arithmetic that the
#     regular build checks).
#   TSan: the suites whose ranks are threads of one process (threads, host streams, and the
#     collective tests where threads interact most: protocols, groups, mismatch, abort), and the
#     network suite (plugins and UCX, ranks as instrumented processes).
# Any report fails the run (halt_on_error); leaks count (detect_leaks=1). Builds go to
# build-asan/ and build-tsan/ (ccache speeds up reruns when installed).
# Usage: tests/sanitize/run.sh [asan|tsan|all]
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/coll-ccache} CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
configure() {  # dir sanitizer
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLL_ENABLE_CUDA=OFF -DCOLL_SANITIZER="$2" \
    "${launcher[@]}" >/dev/null
}
start=$SECONDS
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export COLL_DEBUG=WARN

if [ "$what" = asan ] || [ "$what" = all ]; then
  # hwloc's PCI discovery dlopens libpciaccess, which (once OpenCL and fabric packages are on the
  # machine) leaves allocations LeakSanitizer cannot attribute after it is unloaded (see
  # lsan.supp): the PCI tree is not what these suites check, so hwloc skips it here.
  export HWLOC_COMPONENTS=-pci
  configure build-asan "address,undefined"
  cmake --build build-asan --target coll_unit_tests coll_schedule_tests coll_device_host_tests coll_thread_tests \
    coll_collective_tests coll_stream_tests coll_process_tests coll_collective_process_tests coll_parallel_tests \
    coll_device_emulated_tests coll_tagged_tests coll-run coll-info coll_test_worker
  echo "sanitize: ASan+UBSan build done at $((SECONDS - start)) s"
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitize/lsan.supp print_suppressions=0"
  # hwloc's PCI plugin loads libpciaccess, which keeps its state in globals; hwloc unloads the
  # plugin when the last topology is destroyed, and LeakSanitizer then reports that state with
  # frames in an unloaded module (so no suppression can name it: found in "detection on this
  # machine matches hwloc"). Under ASan, hwloc runs without that plugin; the regular build runs
  # the PCI discovery.
  export HWLOC_PLUGINS_BLACKLIST=hwloc_pci
  b=build-asan/tests
  "$b/coll_unit_tests"
  "$b/coll_schedule_tests" "~[large]" "~[hier]"
  # Its every-algorithm case at 1-8 ranks takes over 10 minutes under ASan on 2 cores; the dtype x
  # op and failure cases run the same interpreter code (the full case runs in the regular build).
  "$b/coll_device_host_tests" "~*every collective and algorithm*"
  "$b/coll_thread_tests"
  # CI's time limit on 2 cores leaves out the large-count and PreMulSum/bitwise cases (minutes each under
  # ASan); as processes it runs the matrix over shm and TCP, host streams and the all-pairs group;
  # the rest of these suites runs in the regular build.
  "$b/coll_collective_tests" "~*large counts*" "~*PreMulSum*"
  "$b/coll_stream_tests"
  # coll-info probes InfiniBand through libibverbs, whose libnl caches leak; the provider library
  # is often unloaded before LeakSanitizer reports, so no suppression can name it: the cases that
  # run coll-info are left out here (they run in the regular build).
  "$b/coll_process_tests" "~*COLL_DEBUG_FILE*" "~coll-info*"
  "$b/coll_collective_process_tests" "processes over shm: every collective*,[tcp],[streams],a group in which*"
  "$b/coll_parallel_tests"
  "$b/coll_tagged_tests"
  # The device path on the emulated device over each device transport.
  COLL_DEVICE_EMULATION=2 "$b/coll_device_emulated_tests"
  COLL_DEVICE_EMULATION=2 COLL_P2P_DISABLE=1 "$b/coll_device_emulated_tests" "~*at 4 and 8 ranks*"
  COLL_DEVICE_EMULATION=2 COLL_P2P_DISABLE=1 COLL_SHM_DISABLE=1 "$b/coll_device_emulated_tests" "~*at 4 and 8 ranks*"
  echo "sanitize: ASan+UBSan suites passed at $((SECONDS - start)) s"
fi

if [ "$what" = tsan ] || [ "$what" = all ]; then
  configure build-tsan thread
  cmake --build build-tsan --target coll_thread_tests coll_collective_tests coll_stream_tests coll_device_emulated_tests \
    coll_tagged_tests coll_network_tests coll_test_worker coll-run coll-info coll-perf
  echo "sanitize: TSan build done at $((SECONDS - start)) s"
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/sanitize/tsan.supp"
  # Without address randomisation (setarch -R, inherited by the ranks the suites start): TSan's
  # shadow mapping failed at start once in a few hundred processes with ASLR on ("ThreadSanitizer
  # failed to allocate ... errno 12", a rank of the network suite in CI on 2026-11-29).
  norand=(setarch "$(uname -m)" -R)
  b=build-tsan/tests
  "${norand[@]}" "$b/coll_thread_tests"
  # The whole collective matrix takes over 20 minutes of CPU under TSan on 2 cores: the thread
  # interplay is covered by the protocol variants, one thread driving a clique, a count mismatch
  # and abort; the matrix itself runs under ASan+UBSan above.
  "${norand[@]}" "$b/coll_collective_tests" "[proto],[group],ranks that disagree*,collCommAbort wakes*"
  "${norand[@]}" "$b/coll_stream_tests"
  # Tagged messages: the posting threads and the mailbox's progress thread. The window matrix at
  # 8 ranks as threads took 197 s of the 429 here on 2026-11-30 (TSan, 2 cores): its other
  # sections run one by one (1, 2, 3 and 5 ranks, both window kinds, the tuner, ^window); the 8
  # ranks run without TSan in ctest and under ASan above. (A comma in a Catch name is escaped.)
  wmatrix='collectives on windows\, ranks as threads: every collective\, exact\, on the path'
  "${norand[@]}" "$b/coll_tagged_tests" "[threads]" "~$wmatrix"
  for n in 1 2 3 5; do
    "${norand[@]}" "$b/coll_tagged_tests" "$wmatrix" -c "$n ranks, collMemAlloc windows, COLL_ALGO=window"
  done
  for section in "2 ranks, heap windows, COLL_ALGO=window" "3 ranks, heap windows, COLL_ALGO=window" \
    "3 ranks, the tuner's choice" "2 ranks, COLL_ALGO=^window"; do
    "${norand[@]}" "$b/coll_tagged_tests" "$wmatrix" -c "$section"
  done
  # The device path: the enqueuing thread, the proxy thread, the emulated streams and CTAs, over
  # each device transport (the 4- and 8-rank matrix takes two minutes here: left to ASan above;
  # operations split across channels, 25 s here, over p2p only).
  # Emulated CTAs are teams of COLL_DEVICE_EMULATION_THREADS host threads (8 by default) with a
  # real barrier: a chosen subset runs with 8 (every barrier, vote and thread-strided loop of the
  # interpreter, the team pool, both protocols, a group, split channels), the rest with 2.
  "${norand[@]}" env COLL_DEVICE_EMULATION=2 COLL_DEVICE_EMULATION_THREADS=8 "$b/coll_device_emulated_tests" \
    "[sync],[group],*and placement,LL:*"
  "${norand[@]}" env COLL_DEVICE_EMULATION=2 COLL_DEVICE_EMULATION_THREADS=2 "$b/coll_device_emulated_tests" "~*at 4 and 8 ranks*"
  # Over shm and the network the device window matrix is left out (about 130 s each): its
  # collectives move through the windows, not through those transports, and run above over p2p.
  for transports in "COLL_P2P_DISABLE=1" "COLL_P2P_DISABLE=1 COLL_SHM_DISABLE=1"; do
    "${norand[@]}" env $transports COLL_DEVICE_EMULATION=2 COLL_DEVICE_EMULATION_THREADS=2 "$b/coll_device_emulated_tests" \
      "~*at 4 and 8 ranks*" "~[channels]" "~collectives on device windows\, ranks as threads: every collective*"
  done
  # The networks, ranks as processes (each TSan-instrumented): NCCL net plugins v6..v12 and the
  # UCX provider at 2-4 ranks, a rank SIGKILLed mid all-reduce over each, the mismatch checks.
  # UCX runs with its memory hooks off through its own settings: libucm's mmap/madvise hooks
  # crash thread creation under TSan (ucm_madvise from glibc's stack allocation).
  # A rank whose TSan runtime cannot map its shadow ("ThreadSanitizer failed to allocate
  # 0x1ecbffffff000 bytes at address 100c00001000 (errno: 12)", setarch or not; cause not found)
  # fails its case with no report: the suite then runs once more, and only then; a TSan report or
  # any other failure ends the run. The net plugin's SIGKILL case is left out here: on the VM of
  # 2026-11-30 its rank 0 died that way, mid-run, in 5 of 8 runs, and in both runs of the whole
  # suite. It runs without TSan in ctest; the proxy's and UCX's SIGKILL cases stay.
  net=(env UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEMTYPE_CACHE=n "$b/coll_network_tests"
    "~net plugin: a rank SIGKILLed mid all-reduce is named by the survivors within the timeout")
  netlog=$(mktemp)
  if ! "${norand[@]}" "${net[@]}" >"$netlog" 2>&1; then
    cat "$netlog"
    if grep -q 'ThreadSanitizer failed to allocate' "$netlog" && ! grep -q 'WARNING: ThreadSanitizer' "$netlog"; then
      echo "sanitize: a rank's TSan runtime failed at start (not a report): the network suite once more"
      "${norand[@]}" "${net[@]}"
    else
      rm -f "$netlog"
      exit 1
    fi
  else
    cat "$netlog"
  fi
  rm -f "$netlog"
  echo "sanitize: TSan suites passed at $((SECONDS - start)) s"
fi
echo "sanitize: PASS ($what) in $((SECONDS - start)) s"
