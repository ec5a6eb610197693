#!/usr/bin/env bash
# The client layer's strategies side by side at 4 ranks on this machine: coll-train (one process
# per rank under coll-run) with the same transformer and batch under data parallel (bucketed
# all-reduces overlapping backward, and after backward for comparison), ZeRO 1-3, tensor parallel
# (with and without sequence parallel), context parallel and dp x tp; and the MLP in 4 pipeline
# stages under both schedules. Each configuration runs REPEAT times; the table takes the median of
# the runs' median step times (first step excluded), the median share of the step a rank spent
# blocked on communication, rank 0's bytes sent per step and its peak bytes of parameters,
# gradients and optimizer state.
#
#   bash perf/parallel_strategies.sh            # 4 ranks, 3 repeats, 8 steps
#   NP=4 REPEAT=5 STEPS=12 MODEL="--layers 4 --dmodel 256 --heads 8 --ffn 1024 --seq 64 --batch 8" \
#     bash perf/parallel_strategies.sh
#
# Writes perf/results/<stamp>-parallel/: raw outputs, env.txt (machine, commit, commands) and
# summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-4}
REPEAT=${REPEAT:-3}
STEPS=${STEPS:-8}
MODEL=${MODEL:-"--layers 4 --dmodel 128 --heads 8 --ffn 512 --seq 64 --batch 8"}
MLP=${MLP:-"--layers 8 --dmodel 256 --ffn 1024 --batch 64 --micro 8"}
build=${COLL_BUILD_DIR:-build}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=perf/results/$stamp-parallel
mkdir -p "$out"
cmake --build "$build" --target coll-train coll-run >/dev/null

configs=(
  "dp:--dp $NP --bucket-mb 0.5 $MODEL"
  "dp-no-overlap:--dp $NP --bucket-mb 0.5 --no-overlap $MODEL"
  "zero1:--zero 1 $MODEL"
  "zero2:--zero 2 $MODEL"
  "zero3:--zero 3 $MODEL"
  "tp:--tp $NP $MODEL"
  "tp-sp:--tp $NP --sp $MODEL"
  "cp:--cp $NP $MODEL"
  "dp2-tp2:--dp 2 --tp 2 $MODEL"
  "zero3-tp2:--zero 3 --tp 2 $MODEL"
  "pp-gpipe:--pp $NP --schedule gpipe $MLP"
  "pp-1f1b:--pp $NP --schedule 1f1b $MLP"
)

{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "coll: $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-60))"
  echo "ranks: $NP; repeats: $REPEAT; steps: $STEPS"
  echo "commands:"
  for c in "${configs[@]}"; do echo "  $build/bin/coll-run -n $NP $build/bin/coll-train --steps $STEPS ${c#*:}"; done
} >"$out/env.txt"

for c in "${configs[@]}"; do
  name=${c%%:*}
  for r in $(seq 1 "$REPEAT"); do
    # shellcheck disable=SC2086
    "$build/bin/coll-run" -n "$NP" --timeout 600 "$build/bin/coll-train" --steps "$STEPS" ${c#*:} \
      >"$out/$name-$r.txt" 2>&1 || { echo "$name run $r failed:"; tail -5 "$out/$name-$r.txt"; exit 1; }
  done
  echo "$name done"
done

python3 - "$out" "$NP" <<'PY'
import glob, os, re, statistics, sys
out, np = sys.argv[1], sys.argv[2]
rows = {}
order = []
for path in sorted(glob.glob(os.path.join(out, "*-[0-9]*.txt"))):
    name = re.sub(r"-\d+\.txt$", "", os.path.basename(path))
    line = [l for l in open(path) if l.startswith("summary:")]
    if not line:
        continue
    kv = dict(p.split("=", 1) for p in line[-1].split()[1:])
    rows.setdefault(name, []).append(kv)
    if name not in order:
        order.append(name)
want = ["dp", "dp-no-overlap", "zero1", "zero2", "zero3", "tp", "tp-sp", "cp", "dp2-tp2", "zero3-tp2", "pp-gpipe", "pp-1f1b"]
order = [n for n in want if n in rows] + [n for n in order if n not in want]
def med(name, key):
    return statistics.median(float(r[key]) for r in rows[name])
lines = [f"# coll-train at {np} ranks (medians of {len(next(iter(rows.values())))} runs)", "",
         "| strategy | params/rank | step ms | comm wait share | bytes sent/step (rank 0) | peak params B | peak grads B | peak optim B | peak total B |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for n in order:
    r0 = rows[n][0]
    lines.append(f"| {r0['strategy']} | {r0['params_per_rank']} | {med(n, 'median_step_ms'):.1f} | {med(n, 'median_wait_share'):.2f} | "
                 f"{float(r0['bytes_per_step']):.0f} | {r0['peak_params_B']} | {r0['peak_grads_B']} | {r0['peak_optim_B']} | {r0['peak_total_B']} |")
if "dp" in rows and "dp-no-overlap" in rows:
    a, b = med("dp", "median_step_ms"), med("dp-no-overlap", "median_step_ms")
    verdict = f"{(b - a) / b * 100:.1f}% faster" if a < b else f"{(a - b) / b * 100:.1f}% slower"
    lines += ["", f"Bucketed DDP overlapping backward: {a:.1f} ms per step against {b:.1f} ms with the all-reduce after backward "
              f"({verdict})."]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
