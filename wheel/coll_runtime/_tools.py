"""Console scripts: each replaces the Python process with the bundled binary of the same name."""

import os
import sys

from . import bin_dir


def _exec(name: str) -> None:
    path = os.path.join(bin_dir(), name)
    # argv[0] is the binary's own path; coll-perf -np finds coll-run beside it (/proc/self/exe).
    os.execv(path, [path] + sys.argv[1:])


def coll_run() -> None:
    _exec("coll-run")


def coll_perf() -> None:
    _exec("coll-perf")


def coll_info() -> None:
    _exec("coll-info")


def coll_top() -> None:
    _exec("coll-top")


def coll_topo() -> None:
    _exec("coll-topo")


def coll_sim() -> None:
    _exec("coll-sim")


def coll_flight() -> None:
    _exec("coll-flight")


def coll_train() -> None:
    _exec("coll-train")
