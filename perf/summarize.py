#!/usr/bin/env python3
"""Median-per-size table and plot for a perf/compare_allreduce.sh results folder.

Parses nccl-tests-style rows (size count type redop root time algbw busbw #wrong ...) from
<name>-<repeat>.txt files, takes the out-of-place columns, and writes summary.md (median time and
busbw per size and library, with coll's ratios) and allreduce.png (busbw and time against size).
"""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)")


def parse(path):
    rows = {}
    for line in path.read_text().splitlines():
        m = ROW.match(line)
        if m:
            size, _, time, _, bus, wrong = m.groups()
            rows[int(size)] = (float(time), float(bus), int(wrong))
    return rows


def main(folder):
    folder = Path(folder)
    runs = defaultdict(list)
    for f in sorted(folder.glob("*-[0-9]*.txt")):
        runs[f.stem.rsplit("-", 1)[0]].append(parse(f))
    names = [n for n in ["coll-shm", "coll-tcp", "openmpi", "gloo"] if n in runs]
    sizes = sorted(set().union(*[set(r) for n in names for r in runs[n]]))
    med = {}
    wrong = defaultdict(int)
    for n in names:
        for s in sizes:
            vals = [r[s] for r in runs[n] if s in r]
            if vals:
                med[(n, s)] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
                wrong[n] += sum(v[2] for v in vals)
    lines = ["| size (B) | " + " | ".join(f"{n} time (us) | {n} busbw (GB/s)" for n in names)
             + " | shm/openmpi busbw | tcp/gloo busbw |",
             "|---:|" + "---:|" * (2 * len(names) + 2)]
    for s in sizes:
        cells = []
        for n in names:
            t, b = med.get((n, s), (float("nan"), float("nan")))
            cells += [f"{t:.2f}", f"{b:.2f}"]
        def ratio(a, b):
            x, y = med.get((a, s)), med.get((b, s))
            return f"{x[1] / y[1]:.2f}x" if x and y and y[1] > 0 else "-"
        lines.append(f"| {s} | " + " | ".join(cells) + f" | {ratio('coll-shm', 'openmpi')} | {ratio('coll-tcp', 'gloo')} |")
    lines.append("")
    lines.append("Wrong elements summed over all runs: " + ", ".join(f"{n} {wrong[n]}" for n in names))
    (folder / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for n in names:
        xs = [s for s in sizes if (n, s) in med]
        ax1.plot(xs, [med[(n, s)][1] for s in xs], marker="o", ms=3, label=n)
        ax2.plot(xs, [med[(n, s)][0] for s in xs], marker="o", ms=3, label=n)
    for ax, title in ((ax1, "bus bandwidth (GB/s), higher is better"), (ax2, "time (us), lower is better")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    ax2.set_yscale("log")
    fig.suptitle(f"all-reduce float32 sum, {folder.name} (median of repeats)")
    fig.tight_layout()
    fig.savefig(folder / "allreduce.png", dpi=110)


if __name__ == "__main__":
    main(sys.argv[1])
