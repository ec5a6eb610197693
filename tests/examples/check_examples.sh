#!/usr/bin/env bash
# The README's code works as shown: every ```c and ```python block of README.md must appear
# verbatim in a file under examples/ (C: between README:begin and README:end markers, compared
# after trimming), the C examples run and check their own results, and the README's mpirun line
# runs (with this build's path and a free port) when Open MPI is installed.
# Usage: check_examples.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
python3 - "$src" <<'PY'
import pathlib, re, sys
src = pathlib.Path(sys.argv[1])
readme = (src / "README.md").read_text()
texts = {p.name: p.read_text() for p in (src / "examples").iterdir() if p.suffix in (".c", ".py")}
regions = []
for text in texts.values():
    regions += [m.strip() for m in re.findall(r"README:begin \w+ \*/\n(.*?)/\* README:end", text, re.S)]
missing = 0
for lang, block in re.findall(r"^```(c|python)\n(.*?)^```", readme, re.S | re.M):
    block = block.strip()
    found = block in regions if lang == "c" else any(block in t for t in texts.values())
    if not found:
        missing += 1
        print(f"FAIL: this README {lang} block is not in examples/ verbatim:\n{block[:300]}\n")
if missing:
    sys.exit(1)
print("README blocks found in examples/")
PY

for n in 1 2 3 4; do "$build/examples/first_steps" "$n"; done
"$build/bin/coll-run" -n 2 "$build/examples/host_stream"
"$build/bin/coll-run" -n 3 "$build/examples/host_stream"
"$build/bin/coll-run" -n 1 "$build/examples/tagged"
"$build/bin/coll-run" -n 4 "$build/examples/tagged"
"$build/bin/coll-run" -n 1 "$build/examples/onesided"
"$build/bin/coll-run" -n 2 "$build/examples/onesided"
"$build/bin/coll-run" -n 5 "$build/examples/onesided"
"$build/bin/coll-run" -n 1 "$build/examples/window_allreduce"
"$build/bin/coll-run" -n 2 "$build/examples/window_allreduce"
COLL_ALGO=window "$build/bin/coll-run" -n 3 "$build/examples/window_allreduce"

if command -v mpirun >/dev/null; then
  line=$(grep -E '^mpirun ' "$src/README.md" | head -1)
  [ -n "$line" ] || { echo "FAIL: no mpirun line in the README"; exit 1; }
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  line=${line//build\/bin/$build/bin}
  line=${line//29500/$port}
  [ "$(id -u)" = 0 ] || line=${line//--allow-run-as-root /}
  out=$(eval "$line" 2>&1) || { echo "$out"; echo "FAIL: $line"; exit 1; }
  grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "FAIL: $line"; exit 1; }
  echo "README mpirun line ran: $line"
fi
echo "PASS: README examples"
