#!/usr/bin/env python3
"""Median-per-size tables and plot for a perf/compare_allreduce.sh results folder.

Reads coll-perf's -J files (<coll config>-np<N>-<repeat>.json, through coll_json.py) and parses
nccl-tests-style rows (size count type redop root time algbw busbw #wrong ...) from the other
libraries' <library>-np<N>-<repeat>.txt files (and coll's, in result folders older than the JSON), takes the out-of-place columns, and writes summary.md (per
rank count: median time and busbw per size and library, with coll's ratios against Open MPI,
MPICH and Gloo) and allreduce.png (busbw and time against size, one row of plots per rank count).
"""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import coll_json  # noqa: E402

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)")
LIBS = ["coll-shm", "coll-tcp", "openmpi", "mpich", "gloo"]
RATIOS = [("coll-shm", "openmpi"), ("coll-shm", "mpich"), ("coll-tcp", "gloo")]


def parse(path):
    if path.suffix == ".json":
        return {s: (r["time"], r["busbw"], max(r["wrong"], 0)) for s, r in coll_json.rows(path).items()}
    rows = {}
    for line in path.read_text().splitlines():
        m = ROW.match(line)
        if m:
            size, _, time, _, bus, wrong = m.groups()
            rows[int(size)] = (float(time), float(bus), int(wrong))
    return rows


def main(folder):
    folder = Path(folder)
    runs = defaultdict(list)  # (library, np) -> [rows]
    for f in sorted(folder.glob("*-np*-[0-9]*.*")):
        if f.suffix not in (".txt", ".json") or (f.suffix == ".txt" and f.with_suffix(".json").exists()):
            continue
        m = re.match(r"(.+)-np(\d+)-\d+$", f.stem)
        if m:
            runs[(m.group(1), int(m.group(2)))].append(parse(f))
    nps = sorted({np for _, np in runs})
    med, wrong = {}, defaultdict(int)
    for (lib, np), rs in runs.items():
        for s in set().union(*[set(r) for r in rs]):
            vals = [r[s] for r in rs if s in r]
            med[(lib, np, s)] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
            wrong[lib] += sum(v[2] for v in vals)
    lines = []
    for np in nps:
        libs = [l for l in LIBS if (l, np) in runs]
        sizes = sorted({s for (l, n, s) in med if n == np})
        lines += [f"### {np} ranks (median of repeats; time in us, busbw in GB/s)", "",
                  "| size (B) | " + " | ".join(f"{l} time | {l} busbw" for l in libs) + " | "
                  + " | ".join(f"{a}/{b}" for a, b in RATIOS) + " |",
                  "|---:|" + "---:|" * (2 * len(libs) + len(RATIOS))]
        for s in sizes:
            cells = []
            for l in libs:
                t, b = med.get((l, np, s), (float("nan"), float("nan")))
                cells += [f"{t:.2f}", f"{b:.2f}"]

            def ratio(a, b):
                x, y = med.get((a, np, s)), med.get((b, np, s))
                return f"{x[1] / y[1]:.2f}x" if x and y and y[1] > 0 else "-"
            lines.append(f"| {s} | " + " | ".join(cells) + " | " + " | ".join(ratio(a, b) for a, b in RATIOS) + " |")
        lines.append("")
    lines.append("busbw ratios; at sizes where busbw rounds to 0.00 compare the times. Wrong elements summed over "
                 "all runs: " + ", ".join(f"{l} {wrong[l]}" for l in LIBS if l in wrong))
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, axes = plt.subplots(len(nps), 2, figsize=(12, 4.5 * len(nps)), squeeze=False)
    for row, np in enumerate(nps):
        ax1, ax2 = axes[row]
        for l in LIBS:
            xs = sorted(s for (ll, n, s) in med if ll == l and n == np)
            if not xs:
                continue
            ax1.plot(xs, [med[(l, np, s)][1] for s in xs], marker="o", ms=3, label=l)
            ax2.plot(xs, [med[(l, np, s)][0] for s in xs], marker="o", ms=3, label=l)
        for ax, title in ((ax1, "bus bandwidth (GB/s), higher is better"), (ax2, "time (us), lower is better")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_title(f"{np} ranks: {title}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        ax2.set_yscale("log")
    fig.suptitle(f"all-reduce float32 sum, host memory, {folder.name} (median of repeats)")
    fig.tight_layout()
    fig.savefig(folder / "allreduce.png", dpi=100)


if __name__ == "__main__":
    main(sys.argv[1])
