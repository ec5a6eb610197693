#!/usr/bin/env bash
# coll-train under coll-run, as a user runs it: several strategies on a tiny transformer print a
# summary, and their first step's loss (same model, same data, before any update) is the one-rank
# loss within 1e-5 (the split sums add in another order); the pipeline runs both schedules and
# matches --pp 1 run alone (one rank, no launcher); a mesh that does not fit is refused with a
# sentence and a non-zero status.
set -uo pipefail
bin=$1
model="--layers 2 --dmodel 32 --heads 4 --ffn 64 --seq 8 --batch 4 --classes 8 --steps 2"
fail=0
run() {  # n, args...
  local n=$1
  shift
  "$bin/coll-run" -n "$n" --timeout 120 "$bin/coll-train" "$@" 2>&1
}
loss0() { awk '$1 == "0" { print $2; exit }'; }

ref=$(run 1 $model | loss0)
# ZeRO computes from a bf16 working copy: its reference is ZeRO on one rank.
refz=$(run 1 --zero 0 $model | loss0)
echo "one rank: step 0 loss $ref (ZeRO: $refz)"
[ -n "$ref" ] || { echo "FAIL: no loss from one rank"; fail=1; }
for args in "--dp 4" "--zero 3" "--zero 1 --tp 2" "--tp 2 --sp --dp 2" "--cp 2 --tp 2" "--cp 4" "--tp 4 --sp"; do
  out=$(run 4 $args $model)
  l=$(echo "$out" | loss0)
  want=$ref
  case "$args" in *--zero*) want=$refz ;; esac
  echo "$args: step 0 loss $l"
  if ! echo "$out" | grep -q '^summary: '; then
    echo "FAIL: $args printed no summary:"
    echo "$out" | tail -5
    fail=1
  elif ! awk -v a="$l" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * b) }'; then
    echo "FAIL: $args: step 0 loss $l, one rank $want"
    fail=1
  fi
done
# --pp 1, alone (no launcher: one rank), trains the same MLP in one stage: the reference whose
# losses --pp 2 must give (same model, data and micro-batches) within 1e-5.
pipe="--micro 2 --layers 4 --dmodel 16 --ffn 32 --batch 8 --steps 2"
one=$("$bin/coll-train" --pp 1 $pipe 2>&1)
two=$(run 2 --pp 2 $pipe)
echo "$one" | grep -q '^summary: strategy=dp1-pp1' || { echo "FAIL: --pp 1 alone:"; echo "$one" | tail -5; fail=1; }
for step in 0 1; do
  a=$(echo "$one" | awk -v s=$step '$1 == s { print $2; exit }')
  b=$(echo "$two" | awk -v s=$step '$1 == s { print $2; exit }')
  echo "pipeline step $step loss: --pp 1 $a, --pp 2 $b"
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-5 * a) }' ||
    { echo "FAIL: --pp 2 step $step loss $b, --pp 1 $a"; fail=1; }
done
for sched in gpipe 1f1b; do
  out=$(run 4 --pp 2 --schedule $sched --micro 2 --layers 4 --dmodel 16 --ffn 32 --batch 8 --steps 2)
  echo "$out" | grep -q '^summary: strategy=dp2-pp2'"$sched" || { echo "FAIL: pp $sched:"; echo "$out" | tail -5; fail=1; }
done
out=$(run 4 --tp 3 $model)
rc=$?
if [ $rc -eq 0 ] || ! echo "$out" | grep -q "does not divide the 4 ranks: choose sizes whose product divides it"; then
  echo "FAIL: --tp 3 on 4 ranks: status $rc, output:"
  echo "$out"
  fail=1
fi
[ $fail -eq 0 ] && echo "coll-train: all checks passed"
exit $fail
