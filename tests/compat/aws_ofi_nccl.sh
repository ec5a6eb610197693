#!/usr/bin/env bash
# Compatibility check: coll over Amazon's aws-ofi-nccl NCCL network plugin
# (https://github.com/aws/aws-ofi-nccl, Apache-2.0), with libfabric's tcp
# provider on loopback.
#
# usage: tests/compat/aws_ofi_nccl.sh [BUILD_DIR] [RESULTS_DIR]
#   BUILD_DIR    a coll build with bin/coll-run and bin/coll-perf
#                (default: <repo>/build-host)
#   RESULTS_DIR  where the logs and coll-perf's output go
#                (default: <repo>/.compat/results), so they can be copied
#                into perf/results later
# environment:
#   AWS_OFI_NCCL_GIT  where to fetch the pinned commit from (a URL or a local
#                     git dir; default: the local mirror if it has the commit,
#                     else GitHub)
#   COMPAT_JOBS       make -j (default 2: the build machines are small)
#   COMPAT_SKIP_RUN=1 stop after the probe (steps a-d), do not run coll-perf
#   COMPAT_REBUILD=1  rebuild the plugin even if the pinned build is present
#   COMPAT_REAL_CUDART=1  use CUDA's libcudart instead of the stand-in (only
#                     where an NVIDIA driver is installed)
#   COMPAT_EXPECT_TRANSPORT=WORD  fail unless coll-perf's "# coll transports"
#                     line contains WORD (e.g. the plugin transport's name)
#
# Nothing of aws-ofi-nccl is ever committed to coll: the script checks its
# source out under <repo>/.compat/ (git-ignored), builds it there, and only
# this script (ours) lives in the tree.
#
# Steps:
#   (a) check out the pinned commit into .compat/aws-ofi-nccl/src
#   (b) configure and build it (generic platform, CUDA runtime loaded with
#       dlopen) into .compat/aws-ofi-nccl/install
#   (c) build a test-only stand-in libcudart (see fake_cudart.c below for why)
#   (d) prove the plugin initialises: a probe dlopens the plugin, calls the
#       newest ncclNetPlugin_vN's init(), devices() and getProperties()
#   (e) run coll-perf over it at 2 and 3 ranks with results checked (-c 1)
set -euo pipefail

# The aws-ofi-nccl commit this script was written and tested against
# ("tests: add missing test binaries to .gitignore", 2026-08-12; describes as
# v1.4.0-1383-g2daf7d30). Pinned so the check does not drift with upstream.
AWS_OFI_NCCL_COMMIT=2daf7d303aa139a03140aa530957d10521e4478d
AWS_OFI_NCCL_MIRROR=/work/.mirror/aws+aws-ofi-nccl/repo
AWS_OFI_NCCL_URL=https://github.com/aws/aws-ofi-nccl.git

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
COMPAT_DIR=$REPO_ROOT/.compat
WORK=$COMPAT_DIR/aws-ofi-nccl
SRC=$WORK/src
OBJ=$WORK/build
PREFIX=$WORK/install
FAKE_CUDA_DIR=$WORK/fake-cudart
PROBE=$WORK/probe_plugin

BUILD_DIR=$(realpath -m "${1:-$REPO_ROOT/build-host}")
RESULTS=$(realpath -m "${2:-$COMPAT_DIR/results}")
JOBS=${COMPAT_JOBS:-2}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIBFABRIC_PREFIX=${LIBFABRIC_PREFIX:-/usr}

mkdir -p "$WORK" "$RESULTS"
log() { printf '== %s\n' "$*" >&2; }

# ---------------------------------------------------------------------------
# (a) Check out the pinned commit.
# A real git checkout (not `git archive`): the plugin's configure takes its
# version from m4/get_version.sh, which needs either .git or .release_version.
# ---------------------------------------------------------------------------
if [[ -z "${AWS_OFI_NCCL_GIT:-}" ]]; then
  if git --git-dir="$AWS_OFI_NCCL_MIRROR" cat-file -e "$AWS_OFI_NCCL_COMMIT^{commit}" 2>/dev/null; then
    AWS_OFI_NCCL_GIT=$AWS_OFI_NCCL_MIRROR
  else
    AWS_OFI_NCCL_GIT=$AWS_OFI_NCCL_URL
  fi
fi

if [[ "$(git -C "$SRC" rev-parse HEAD 2>/dev/null || true)" != "$AWS_OFI_NCCL_COMMIT" ]]; then
  log "(a) checking out aws-ofi-nccl $AWS_OFI_NCCL_COMMIT from $AWS_OFI_NCCL_GIT"
  rm -rf "$SRC" "$OBJ" "$PREFIX"
  git init -q "$SRC"
  # One commit, no history: GitHub and local repositories both serve a
  # fetch by full hash.
  git -C "$SRC" -c protocol.version=2 fetch -q --depth 1 "$AWS_OFI_NCCL_GIT" "$AWS_OFI_NCCL_COMMIT"
  git -C "$SRC" -c advice.detachedHead=false checkout -q FETCH_HEAD
fi
[[ "$(git -C "$SRC" rev-parse HEAD)" == "$AWS_OFI_NCCL_COMMIT" ]]

# ---------------------------------------------------------------------------
# (b) Configure and build.
#   --with-libfabric/--with-cuda    Debian's libfabric-dev (1.17; the plugin
#                                   needs >= 1.11, >= 1.22 only on the AWS
#                                   platform) and the CUDA toolkit's headers.
#                                   --with-libfabric=/usr would add
#                                   "-isystem /usr/include", which breaks
#                                   libstdc++'s #include_next <stdlib.h>; for
#                                   /usr we pass "yes" (the default paths).
#   --enable-cudart-dynamic         dlopen("libcudart.so") at init instead of
#                                   linking cudart_static: lets step (c) swap in
#                                   the stand-in and keeps NVIDIA's code out of
#                                   the built library
#   --disable-platform-aws          the generic ("Default") platform; without it
#                                   configure probes whether this is an EC2
#                                   instance and, if so, needs libfabric 1.22
#   --disable-tests                 its unit/functional tests need MPI and a GPU
#   --disable-werror                a .git dir makes configure add -Werror;
#                                   a newer compiler's new warning should not
#                                   fail a compatibility check
# Needs: autoconf automake libtool, libfabric-dev, libhwloc-dev, a C++20 g++.
# ---------------------------------------------------------------------------
PLUGIN=$PREFIX/lib/libnccl-net-ofi.so
STAMP=$PREFIX/.built-$AWS_OFI_NCCL_COMMIT
if [[ ! -f "$STAMP" || "${COMPAT_REBUILD:-0}" == 1 ]]; then
  log "(b) configuring and building aws-ofi-nccl (make -j$JOBS)"
  rm -rf "$OBJ" "$PREFIX"
  (cd "$SRC" && ./autogen.sh) > "$RESULTS/aws-ofi-nccl-autogen.log" 2>&1
  mkdir -p "$OBJ"
  with_libfabric=$LIBFABRIC_PREFIX
  [[ "$(realpath -m "$LIBFABRIC_PREFIX")" == /usr ]] && with_libfabric=yes
  (cd "$OBJ" && "$SRC/configure" --prefix="$PREFIX" \
      --with-libfabric="$with_libfabric" --with-cuda="$CUDA_HOME" \
      --enable-cudart-dynamic --disable-platform-aws --disable-tests \
      --disable-werror) > "$RESULTS/aws-ofi-nccl-configure.log" 2>&1 \
    || { tail -30 "$RESULTS/aws-ofi-nccl-configure.log" >&2; exit 1; }
  make -C "$OBJ" -j"$JOBS" > "$RESULTS/aws-ofi-nccl-make.log" 2>&1 \
    || { tail -40 "$RESULTS/aws-ofi-nccl-make.log" >&2; exit 1; }
  make -C "$OBJ" install > "$RESULTS/aws-ofi-nccl-install.log" 2>&1
  touch "$STAMP"
fi
[[ -f "$PLUGIN" ]]
# Which ncclNetPlugin_vN the library exports (NCCL and coll pick the newest).
nm -D --defined-only "$PLUGIN" | awk '{print $3}' | grep -E '^nccl[A-Za-z]*Plugin_v[0-9]+$' \
  | sort -V > "$RESULTS/aws-ofi-nccl-exports.txt" || true
log "plugin: $PLUGIN"
log "exports: $(tr '\n' ' ' < "$RESULTS/aws-ofi-nccl-exports.txt")"

# ---------------------------------------------------------------------------
# (c) A stand-in libcudart, for the plugin runs only: the plugin needs
# cuDriverGetVersion to succeed at init, which needs an NVIDIA driver; see
# tests/compat/fake_cudart.c for exactly what it answers and why.
# ---------------------------------------------------------------------------
mkdir -p "$FAKE_CUDA_DIR"
# Only the unversioned name the plugin dlopens, never libcudart.so.13, so
# anything linked against the real runtime (by soname) still gets the real one.
cc -shared -fPIC -O1 -Wall -Wextra -Wl,-soname,libcudart.so \
   -o "$FAKE_CUDA_DIR/libcudart.so" "$HERE/fake_cudart.c"

# ---------------------------------------------------------------------------
# The environment for every plugin run, written once so it can be reused and
# is recorded with the results.
# ---------------------------------------------------------------------------
PLUGIN_ENV=(
  # The stand-in libcudart of step (c); nothing else is on this path. Set
  # COMPAT_REAL_CUDART=1 on a machine with an NVIDIA driver to use the real one
  # (it must then be findable as libcudart.so).
  "LD_LIBRARY_PATH=$([[ "${COMPAT_REAL_CUDART:-0}" == 1 ]] && echo "$CUDA_HOME/lib64" || echo "$FAKE_CUDA_DIR")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # libfabric's tcp provider (tcp;ofi_rxm for FI_EP_RDM), on loopback: every
  # rank is on this machine.
  FI_PROVIDER=tcp
  FI_TCP_IFACE=lo
  # The plugin drops tcp interfaces named in OFI_NCCL_EXCLUDE_TCP_IF, which
  # defaults to "lo,docker0": without this, FI_TCP_IFACE=lo leaves it no
  # device and init fails. (An empty value is rejected as invalid.)
  OFI_NCCL_EXCLUDE_TCP_IF=docker0
  # tcp offers no FI_RMA/multi-rail, so the plugin would fall back from RDMA
  # to SENDRECV anyway, after a WARN that fi_getinfo failed; say it up front.
  OFI_NCCL_PROTOCOL=SENDRECV
)
printf '%s\n' "${PLUGIN_ENV[@]}" > "$RESULTS/aws-ofi-nccl-env.txt"

# ---------------------------------------------------------------------------
# (d) The probe: dlopen the plugin, take the newest ncclNetPlugin_vN (v12 down
# to v8), call init() and devices(), print the name, the device count and the
# properties coll cares about; with v11/v12, send 8 B, 4 KiB and 4 MiB from
# device 0 to itself and check them (tests/compat/probe_plugin.c).
# ---------------------------------------------------------------------------
cc -O1 -Wall -Wextra -o "$PROBE" "$HERE/probe_plugin.c" -ldl
log "(d) probing the plugin"
if ! env "${PLUGIN_ENV[@]}" "$PROBE" "$PLUGIN" > "$RESULTS/aws-ofi-nccl-probe.txt" 2> "$RESULTS/aws-ofi-nccl-probe.err"; then
  cat "$RESULTS/aws-ofi-nccl-probe.txt" "$RESULTS/aws-ofi-nccl-probe.err" >&2
  log "probe FAILED"
  exit 1
fi
cat "$RESULTS/aws-ofi-nccl-probe.txt"

[[ "${COMPAT_SKIP_RUN:-0}" == 1 ]] && { log "COMPAT_SKIP_RUN=1: stopping after the probe"; exit 0; }

# ---------------------------------------------------------------------------
# (e) coll over the plugin: coll-perf, all_reduce 8 B .. 64 MiB, results
# checked, at 2 and 3 ranks. COLL_SHM_DISABLE=1 so that shm does not carry the
# traffic between ranks of one machine; COLL_NET_PLUGIN names the plugin
# (read by libcoll's loader; a build without it runs over coll's sockets,
# which the "# coll transports" line shows).
# ---------------------------------------------------------------------------
for bin in coll-run coll-perf; do
  [[ -x "$BUILD_DIR/bin/$bin" ]] || { echo "no $BUILD_DIR/bin/$bin: build coll first" >&2; exit 1; }
done
status=0
for n in 2 3; do
  out=$RESULTS/aws-ofi-nccl-coll-perf-np$n
  log "(e) coll-perf all_reduce over aws-ofi-nccl, $n ranks"
  if env "${PLUGIN_ENV[@]}" COLL_NET_PLUGIN="$PLUGIN" COLL_SHM_DISABLE=1 \
       "$BUILD_DIR/bin/coll-run" -n "$n" --timeout 600 \
       "$BUILD_DIR/bin/coll-perf" -b 8 -e 64M -f 4 -c 1 -J "$out.json" \
       > "$out.txt" 2> "$out.err"; then
    :
  else
    rc=$?; status=1
    log "coll-perf at $n ranks FAILED (exit $rc); see $out.err"
    tail -20 "$out.err" >&2
  fi
  line=$(grep -m1 '^# coll transports' "$out.txt" || true)
  echo "${line:-(no '# coll transports' line in $out.txt)}"
  # coll names the network it used: "ncclnet ['Libfabric' vN from <path>, device ...]".
  expect=${COMPAT_EXPECT_TRANSPORT:-ncclnet}
  if [[ "$line" != *"$expect"* ]]; then
    log "expected '$expect' in the transports line at $n ranks"; status=1
  fi
  grep -E '^# (Out of bounds|Avg bus)' "$out.txt" || true
done
log "results in $RESULTS"
exit $status
