#!/usr/bin/env bash
# Checks the code nvcc made of the device interpreter's kernels, the window kernels and the
# one-sided kernel (exec/cuda/kernel.cuh, launch.cu, window_run.h), from their sm_90 SASS, without
# a GPU:
#   - no local memory: no LDL/STL instruction, and 0 bytes of stack and local memory per kernel
#     (a window or one-sided kernel: at most 16 LDL/STL and 8 bytes of stack, loop counters
#     outside its element loops);
#   - data moved in 16-byte accesses: at most one 8-bit global load for every ten 128-bit ones;
# and prints registers, stack, local memory and those counts per kernel. Fails when a check fails.
#
#   bash scripts/check_sass.sh [build-dir]    (default: build; needs a CUDA build for sm_90)
#
# cuobjdump and nvdisasm are not in this machine's CUDA install: they come from PyPI
# (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) into a venv under ~/.cache/coll-cuobjdump, made once.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
lib=$(find "$build" -name 'libcoll.so*' -type f | head -1)
[ -n "$lib" ] || { echo "check_sass: no libcoll.so under $build" >&2; exit 1; }

tools=${COLL_CUOBJDUMP_VENV:-$HOME/.cache/coll-cuobjdump/venv}
bin=$(ls -d "$tools"/lib/python3*/site-packages/nvidia/cu*/bin 2>/dev/null | head -1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/cuobjdump" ] || [ ! -x "$bin/nvdisasm" ]; then
  python3 -m venv "$tools" >/dev/null
  "$tools/bin/pip" install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
  bin=$(ls -d "$tools"/lib/python3*/site-packages/nvidia/cu*/bin | head -1)
fi
export PATH="$bin:$PATH"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cuobjdump -sass -arch sm_90 "$lib" > "$out/sass.txt"
cuobjdump -res-usage -arch sm_90 "$lib" > "$out/res.txt"

python3 - "$out/sass.txt" "$out/res.txt" <<'EOF'
import re, subprocess, sys

sass_path, res_path = sys.argv[1], sys.argv[2]

def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return dict(zip(names, out))

# Per kernel: its instructions' opcodes (the first word after the address, without a predicate).
kernels, current = {}, None
for line in open(sass_path):
    m = re.match(r"\s*Function : (\S+)", line)
    if m:
        current = m.group(1)
        kernels[current] = []
        continue
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]\s+)?([A-Z][A-Z0-9_.]*)", line)
    if m and current:
        kernels[current].append(m.group(1))

usage = {}
name = None
for line in open(res_path):
    m = re.match(r"\s*Function (\S+):", line)
    if m:
        name = m.group(1)
        continue
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", line)
    if m and name:
        usage[name] = tuple(int(x) for x in m.groups())

names = demangle(list(kernels))
ours = {k: v for k, v in kernels.items()
        if any(kind in names[k] for kind in ("interpreterKernel", "windowKernel", "oneSidedKernel"))}
if not any("interpreterKernel" in names[k] for k in ours) or not any("windowKernel" in names[k] for k in ours):
    sys.exit("check_sass: the interpreter's or the window kernels are missing from the sm_90 SASS")

def is_global_load(op):
    return op.startswith("LD.") or op.startswith("LDG.")

failures = []
tot8 = tot128 = 0
print(f"{'kernel':58} {'regs':>4} {'stack':>5} {'local':>5} {'LDL/STL':>7} {'ld8':>4} {'ld128':>5} {'st128':>5}")
for k in sorted(ours, key=lambda k: names[k]):
    ops = ours[k]
    local = sum(op.startswith("LDL") or op.startswith("STL") for op in ops)
    ld8 = sum(is_global_load(op) and (".U8" in op or ".S8" in op) for op in ops)
    ld128 = sum(is_global_load(op) and op.endswith(".128") or (is_global_load(op) and ".128." in op) for op in ops)
    st128 = sum((op.startswith("ST.") or op.startswith("STG.")) and ".128" in op for op in ops)
    reg, stack, shared, lmem = usage.get(k, (-1, -1, -1, -1))
    short = re.sub(r"coll::exec::dev::", "", names[k])
    short = re.sub(r"\(anonymous namespace\)::|\(DevChannel const\*\)", "", short)
    print(f"{short[:58]:58} {reg:>4} {stack:>5} {lmem:>5} {local:>7} {ld8:>4} {ld128:>5} {st128:>5}")
    tot8 += ld8
    tot128 += ld128
    # A window kernel may keep a few loop counters in local memory: ptxas does in the fp8 max and
    # min ones (across the conversions' branches: in Fp8E5m2 max, a store and a load per move and
    # per source, none per element) and around the 64-bit division's call in collAvg's pass.
    window = "windowKernel" in names[k] or "oneSidedKernel" in names[k]
    if (local > 16 or stack > 8 or lmem) if window else (local or stack or lmem):
        failures.append(f"{short}: local memory ({local} LDL/STL, stack {stack}, local {lmem})")
print(f"interpreter and window kernels: {len(ours)}; 8-bit global loads {tot8}, 128-bit global loads {tot128}")
if tot8 * 10 > tot128:
    failures.append(f"{tot8} 8-bit loads against {tot128} 128-bit loads (more than one in ten)")
if failures:
    print("check_sass: FAILED")
    for f in failures:
        print("  " + f)
    sys.exit(1)
print("check_sass: no local memory in the interpreter kernels, the window kernels within their allowance, 8-bit loads within one in ten 128-bit loads")
EOF
