#!/usr/bin/env bash
# Downloads (does not install) the Debian packages the device machine lacks for building coll,
# into .devdeps/ (git-ignored), for the device tool to carry: tests/gpu/run_on_device.sh unpacks
# them under /tmp/devdeps there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .devdeps
cd .devdeps
apt-get download libfmt-dev libfmt9 libhwloc-dev libhwloc15 catch2 nlohmann-json3-dev libudev1 libltdl7 >/dev/null
ls
