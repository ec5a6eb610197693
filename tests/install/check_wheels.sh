#!/usr/bin/env bash
# The wheels as a user gets them: a clean clone of REPO (default: this checkout's committed HEAD)
# builds coll-runtime and coll-torch (scripts/wheels.sh: pip wheel, auditwheel show and repair to
# manylinux), installs both into a fresh venv over the torch venv, and then checks:
#   - coll_runtime's paths (library, headers, drop-in, CMake and pkg-config files) lie in the venv,
#     and cuda_archs() says what the build compiled (80 and 90 where nvcc is found);
#   - the console scripts start the bundled tools;
#   - every ELF file's run path is $ORIGIN-relative, and ldd of the extension and of the drop-in
#     resolves libcoll.so.0 inside the venv's site-packages;
#   - a C99 program builds against the wheel with find_package(coll) (CMAKE_PREFIX_PATH =
#     coll_runtime.cmake_dir()) and with pkg-config, and runs;
#   - two ranks: coll-run -n 2 coll-perf through the console scripts, and a torch all_reduce on
#     backend "coll" registered by autoload alone (no import coll_torch).
#
#   bash tests/install/check_wheels.sh [REPO]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${1:-$here/../..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

git clone -q "$repo" "$tmp/clone"
(cd "$tmp/clone" && bash scripts/wheels.sh "$tmp/dist" "$tmp/venv")
venv=$tmp/venv
py=$venv/bin/python
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# The module's paths, inside this venv.
"$py" - "$site" <<'PY' || fail "coll_runtime's paths"
import os, sys
import coll_runtime as c
site = sys.argv[1]
want = {c.library(): "", c.include_dir(): "coll/coll.h", c.nccl_dir(): "libnccl.so.2",
        c.cmake_dir(): "collConfig.cmake", c.pkgconfig_dir(): "coll.pc", c.bin_dir(): "coll-perf"}
for path, inside in want.items():
    full = os.path.join(path, inside) if inside else path
    assert full.startswith(site + os.sep), f"{full} is not in {site}"
    assert os.path.isfile(full), f"no {full}"
nvcc = os.path.exists("/usr/local/cuda/bin/nvcc")
assert c.cuda_archs() == (["80", "90"] if nvcc else []), c.build_info()
print("coll_runtime", c.__version__, c.build_info())
PY

# The console scripts.
for tool in coll-info coll-perf coll-run coll-sim coll-top coll-topo coll-train coll-flight; do
  [ "$(head -c2 "$venv/bin/$tool")" = "#!" ] || fail "$tool is not a console script"
  "$venv/bin/$tool" --help >/dev/null 2>&1 || fail "console script $tool does not start"
done
"$venv/bin/coll-info" | grep -q "^coll $("$py" -c 'import coll_runtime; print(coll_runtime.__version__)')" ||
  fail "coll-info does not report the wheel's version"

# Run paths: only $ORIGIN-relative entries (never the build folder).
while IFS= read -r f; do
  rp=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p;s/.*(RPATH).*\[\(.*\)\]/\1/p')
  tr ':' '\n' <<<"$rp" | grep -v '^$ORIGIN' | grep -q . && fail "$f has run path $rp"
done < <(find "$site/coll_runtime" "$site/coll_runtime.libs" "$site/coll_torch" -type f \( -name '*.so*' -o -perm -u+x \) \
           -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
ext=$(ls "$site"/coll_torch/_C*.so)
readelf -d "$ext" | grep -q 'RUNPATH.*\[$ORIGIN/../coll_runtime/lib' || fail "extension's run path: $(readelf -d "$ext" | grep PATH)"
for f in "$ext" "$site/coll_runtime/lib/coll-nccl/libnccl.so.2"; do
  lib=$(ldd "$f" | awk '$1 == "libcoll.so.0" {print $3}')
  [ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$site/coll_runtime/lib/libcoll.so.0" ] ||
    fail "ldd $f: libcoll.so.0 => '$lib', not the wheel's"
done
echo "PASS: run paths \$ORIGIN-relative; the extension and the drop-in load the wheel's libcoll.so.0"

# A C consumer: CMake package, then pkg-config (libcoll.so is a linker script naming libcoll.so.0).
cmake_dir=$("$py" -c 'import coll_runtime; print(coll_runtime.cmake_dir())')
cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$cmake_dir" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
env -u LD_LIBRARY_PATH "$tmp/consumer/consumer" || fail "the CMake consumer does not run"
PKG_CONFIG_PATH=$("$py" -c 'import coll_runtime; print(coll_runtime.pkgconfig_dir())')
export PKG_CONFIG_PATH
cc -std=c99 -pedantic -Wall -Wextra -Werror "$here/consumer/consumer.c" $(pkg-config --cflags --libs coll) \
  -Wl,-rpath,"$(pkg-config --variable=libdir coll)" -o "$tmp/consumer-pc"
"$tmp/consumer-pc" || fail "the pkg-config consumer does not run"

# Two ranks through the console scripts (coll-run starts coll-perf from PATH).
PATH=$venv/bin:$PATH COLL_TIMEOUT_MS=20000 coll-run -n 2 coll-perf -b 8 -e 1K -f 32 -n 2 -w 1 >"$tmp/perf.txt" 2>&1 &&
  grep -q "# Out of bounds values : 0 OK" "$tmp/perf.txt" || { cat "$tmp/perf.txt"; fail "coll-run -n 2 coll-perf"; }
# UCX: the wheel carries the provider and loads the system's libucp at run time (never linked).
if ldconfig -p | grep -q 'libucp.so.0 '; then
  ldd "$site/coll_runtime/lib/libcoll.so.0" | grep -q 'libuc[pst]' && fail "the wheel's libcoll links UCX"
  PATH=$venv/bin:$PATH COLL_NET=ucx UCX_TLS=tcp COLL_SHM_DISABLE=1 COLL_TIMEOUT_MS=20000 \
    coll-run -n 2 coll-perf -b 8 -e 1M -f 64 -n 2 -w 1 >"$tmp/perf-ucx.txt" 2>&1 &&
    grep -q "# Out of bounds values : 0 OK" "$tmp/perf-ucx.txt" || { cat "$tmp/perf-ucx.txt"; fail "coll-perf over UCX"; }
  echo "PASS: the wheel's UCX provider runs over the system's UCX (loaded at run time)"
fi
echo "PASS: console scripts; C consumers via CMake and pkg-config; coll-run -n 2 coll-perf"

# torch: the backend registered by autoload only, from this venv's coll_torch; 2 ranks all-reduce.
# (A file, not stdin: spawned ranks import the main module by its path.)
cat >"$tmp/ranks.py" <<'PY'
import os, sys, tempfile
import torch, torch.distributed as dist, torch.multiprocessing as mp

def rank(r, init):
    dist.init_process_group("coll", init_method=init, rank=r, world_size=2)
    t = torch.full((4,), float(r + 1))
    dist.all_reduce(t)
    assert t.tolist() == [3.0] * 4, t
    dist.destroy_process_group()

if __name__ == "__main__":
    assert "coll" in dist.Backend.backend_list, "autoload did not register coll"
    assert sys.modules["coll_torch"].__file__.startswith(sys.argv[1] + os.sep), sys.modules["coll_torch"].__file__
    init = "file://" + os.path.join(tempfile.mkdtemp(), "rdv")
    mp.spawn(rank, args=(init,), nprocs=2)
    print("torch", torch.__version__, ": 2 ranks all-reduced on backend coll (autoload)")
PY
(cd "$tmp" && TORCH_DEVICE_BACKEND_AUTOLOAD=1 "$py" ranks.py "$site") || fail "torch with the coll-torch wheel"
echo "PASS: wheels build from a clean clone, repair to manylinux, install and run"
