#!/usr/bin/env python3
"""Fits the tuner's constants of the windows path (CostModel::windowAlphaUs, windowStepWeight,
windowBwWeight) to a perf/windows.sh results folder that has the windows-forced and windows-off
configurations, and shows what the tuner then chooses against what was fastest.

The tuner compares the windows path's predicted time with the prediction of the FIFO algorithm it
would run (coll-info --tuning gives those), so the fit minimises the regret of that choice: the
time lost against the faster path, summed over every measured (collective, ranks, size), with the
squared log error of the windows path's own prediction as the tie-breaker.

    python3 perf/fit_windows.py perf/results/<stamp>-windows [build]
"""
import glob, itertools, math, os, re, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(__file__))
import coll_json

folder = sys.argv[1]
build = sys.argv[2] if len(sys.argv) > 2 else "build"
cores = os.cpu_count()
TUNING_NAMES = {"all_reduce": "allreduce", "reduce_scatter": "reducescatter", "all_gather": "allgather",
                "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall"}


def medians(label):
    per = {}
    # perf/windows.sh names its sweeps LABEL-sweep-ROUND.json (LABEL-ROUND.json before the steady runs)
    for js in glob.glob(f"{folder}/{label}-[0-9]*.json") + glob.glob(f"{folder}/{label}-sweep-[0-9]*.json"):
        for b, r in coll_json.rows(js).items():
            per.setdefault(b, []).append(r["time"])
    return {b: statistics.median(v) for b, v in per.items()}


def fifo_predictions(coll, n):
    """{bytes: predicted us of the tuner's FIFO choice} and the model's constants."""
    text = subprocess.run([f"{build}/bin/coll-info", "--tuning", "-n", str(n), "-c", TUNING_NAMES[coll]],
                          env=dict(os.environ, COLL_ALGO="^window"), capture_output=True, text=True).stdout
    head = re.search(r"alpha ([\d.]+) us, switch ([\d.]+) us, beta ([\d.]+) GB/s, gamma ([\d.]+) GB/s, "
                     r"contention ([\d.]+)", text)
    consts = dict(zip(("alpha", "switch", "beta", "gamma", "contention"), map(float, head.groups())))
    pred = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) > 4 and f[0].isdigit():
            nums = [float(x) for x in f[4:] if re.fullmatch(r"[\d.]+", x)]
            if nums:
                pred[int(f[0])] = min(nums)
    return pred, consts


def window_us(coll, n, b, m, A, S, W):
    copied = reduced = 0.0
    if coll == "all_reduce":
        copied, reduced = b, (n - 1) / n * b
    elif coll == "reduce_scatter":
        copied, reduced = b, (n - 1) * b
    elif coll in ("all_gather", "alltoall"):
        copied = n * b
    elif coll == "broadcast":
        copied = b
    elif coll == "reduce":
        copied, reduced = b / n, (n - 1) / n * b
    over = max(1.0, n / cores)
    alpha = A + m["switch"] * (over - 1) * S
    work = copied / m["beta"] / 1e3 + reduced / m["gamma"] / 1e3
    return 2 * alpha + work * W * over ** m["contention"]


points = []  # (coll, n, bytes, window us, fifo us, fifo predicted us, model constants)
for js in glob.glob(f"{folder}/windows-forced-*-np*-1.json"):
    m = re.search(r"windows-forced-(.+)-np(\d+)(-sweep)?-1\.json", os.path.basename(js))
    coll, n = m.group(1), int(m.group(2))
    win, fifo = medians(f"windows-forced-{coll}-np{n}"), medians(f"windows-off-{coll}-np{n}")
    pred, consts = fifo_predictions(coll, n)
    for b in sorted(set(win) & set(fifo)):
        if b in pred:
            points.append((coll, n, b, win[b], fifo[b], pred[b], consts))
if not points:
    sys.exit(f"{folder}: no windows-forced and windows-off results")


def score(A, S, W):
    regret = err = 0.0
    for coll, n, b, tw, tf, pf, m in points:
        pw = window_us(coll, n, b, m, A, S, W)
        chosen = tw if pw < pf else tf
        regret += chosen / min(tw, tf) - 1
        err += math.log(pw / tw) ** 2
    return regret, err


grid_a = [0.05 * i for i in range(1, 31)]
grid_s = [0.25 * i for i in range(0, 41)]
grid_w = [0.05 * i for i in range(1, 41)]
best = min(itertools.product(grid_a, grid_s, grid_w), key=lambda p: (round(score(*p)[0], 3), score(*p)[1]))
A, S, W = best
regret, err = score(A, S, W)
print(f"windowAlphaUs {A:.3f}  windowStepWeight {S:.2f}  windowBwWeight {W:.2f}  "
      f"(regret {regret:.3f} summed over {len(points)} points, rms log error {math.sqrt(err / len(points)):.2f})")
print("| collective | ranks | bytes | windows us | FIFO us | predicted windows | predicted FIFO | choice | lost |")
print("|---|---|---|---|---|---|---|---|---|")
for coll, n, b, tw, tf, pf, m in sorted(points):
    pw = window_us(coll, n, b, m, A, S, W)
    chosen = "window" if pw < pf else "fifo"
    lost = (tw if chosen == "window" else tf) / min(tw, tf) - 1
    print(f"| {coll} | {n} | {b} | {tw:.2f} | {tf:.2f} | {pw:.2f} | {pf:.2f} | {chosen} | {lost * 100:.0f}% |")
