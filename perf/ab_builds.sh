#!/usr/bin/env bash
# Two builds of coll against each other on the host path, paired: an all-reduce (float32, sum)
# with NP ranks over shared memory, each build once per round at each size, REPEAT rounds; the
# median of the per-round time ratios (B / A) says whether a change made the path slower, on a
# machine whose speed drifts between runs (this VM's slow mode lasts whole runs).
#
#   A=/tmp/ref/build B=build REPEAT=15 SIZES="8 1048576 268435456" bash perf/ab_builds.sh
#
# Over a network instead: COLL_ENV="COLL_NET=ucx UCX_TLS=tcp COLL_SHM_DISABLE=1". One build's
# tools with two libcoll builds: A=build B=build A_LIB=/tmp/libold B_LIB=/tmp/libnew (each side's
# LD_LIBRARY_PATH; the tools' run path lets it override).
#
# Writes perf/results/<stamp>-ab/: raw.txt (round size build time_us), env.txt, summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${A:?A=reference build dir}
B=${B:-build}
REPEAT=${REPEAT:-15}
NP=${NP:-2}
SIZES=${SIZES:-8 1048576 268435456}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-ab
mkdir -p "$out"
iters() { if [ "$1" -ge 67108864 ]; then echo "10 2"; elif [ "$1" -ge 1048576 ]; then echo "300 20"; else echo "20000 1000"; fi; }
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "A: $A ($(git -C "$A/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "B: $B ($(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'))"
  echo "libraries: A ${A_LIB:-its own}, B ${B_LIB:-its own}; environment: ${COLL_ENV:-none}"
  echo "command: BUILD/bin/coll-run -n $NP BUILD/bin/coll-perf all_reduce -b S -e S -n N -w W"
} >"$out/env.txt"
for r in $(seq "$REPEAT"); do
  for s in $SIZES; do
    read -r n w <<<"$(iters "$s")"
    for which in A B; do
      dir=${!which}
      lib_var=${which}_LIB
      lib=${!lib_var:-}
      # shellcheck disable=SC2086  # COLL_ENV is a list of NAME=VALUE words
      t=$(env ${COLL_ENV:-} ${lib:+LD_LIBRARY_PATH=$lib} "$dir/bin/coll-run" -n "$NP" "$dir/bin/coll-perf" all_reduce \
        -b "$s" -e "$s" -n "$n" -w "$w" |
        awk -v s="$s" '$1 == s { print $6; exit }')
      echo "$r $s $which $t" >>"$out/raw.txt"
    done
  done
  echo "round $r done" >&2
done
python3 - "$out" <<'PY' | tee "$out/summary.md"
import collections, statistics, sys
out = sys.argv[1]
t = collections.defaultdict(dict)
for line in open(out + "/raw.txt"):
    r, s, which, us = line.split()
    t[(int(s), int(r))][which] = float(us)
sizes = sorted({s for s, _ in t})
print("| bytes | A median us | B median us | median of per-round B/A | rounds B slower |")
print("|---:|---:|---:|---:|---:|")
for s in sizes:
    rounds = [v for (size, _), v in t.items() if size == s and "A" in v and "B" in v]
    a = statistics.median(v["A"] for v in rounds)
    b = statistics.median(v["B"] for v in rounds)
    ratio = statistics.median(v["B"] / v["A"] for v in rounds)
    slower = sum(v["B"] > v["A"] for v in rounds)
    print("| %d | %.2f | %.2f | %.3f | %d of %d |" % (s, a, b, ratio, slower, len(rounds)))
PY
