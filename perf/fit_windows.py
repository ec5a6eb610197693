#!/usr/bin/env python3
"""Fits the tuner's constants of the windows path (CostModel::windowAlphaUs, windowStepWeight, and
windowBwWeight per collective) to perf/windows.sh results folders that have the windows-forced and
windows-off configurations, and shows what the tuner then chooses against what was fastest.

The tuner compares the windows path's predicted time with the prediction of the FIFO algorithm it
would run (coll-info --tuning gives those), so the fit minimises the regret of that choice: the
time lost against the faster path, summed over every measured (collective, ranks, size), with the
squared log error of the windows path's own prediction as the tie-breaker.

    python3 perf/fit_windows.py perf/results/<stamp>-windows [more folders ...] [--build build]

Every folder's medians are points of their own (a size measured in two folders counts twice). The
arrival constants are shared; the bandwidth weight is per collective, since the FIFO algorithm the
path competes with differs per collective (a reduce's tree, an all-gather's ring): found by a grid
over the shared constants with each collective's weight at its best, twice round.
"""
import glob, itertools, math, os, re, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(__file__))
import coll_json

args = sys.argv[1:]
build = "build"
if "--build" in args:
    i = args.index("--build")
    build = args[i + 1]
    del args[i:i + 2]
folders = args
COLLS = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall"]  # catalog order
cores = os.cpu_count()
TUNING_NAMES = {"all_reduce": "allreduce", "reduce_scatter": "reducescatter", "all_gather": "allgather",
                "broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall"}


def medians(folder, label):
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
predictions = {}
for folder in folders:
    for js in glob.glob(f"{folder}/windows-forced-*-np*-1.json"):
        m = re.search(r"windows-forced-(.+)-np(\d+)(-sweep)?-1\.json", os.path.basename(js))
        coll, n = m.group(1), int(m.group(2))
        win, fifo = medians(folder, f"windows-forced-{coll}-np{n}"), medians(folder, f"windows-off-{coll}-np{n}")
        if (coll, n) not in predictions:
            predictions[(coll, n)] = fifo_predictions(coll, n)
        pred, consts = predictions[(coll, n)]
        for b in sorted(set(win) & set(fifo)):
            if b in pred:
                points.append((coll, n, b, win[b], fifo[b], pred[b], consts))
if not points:
    sys.exit(f"{folders}: no windows-forced and windows-off results")


def score(A, S, W, only=None):
    """Time lost where the path is taken and more than 5% slower than the FIFOs (the issue's
    target: the tuner never picks a worse path), the regret, and the squared log error; W:
    {collective: weight}; only: one collective's points."""
    worse = regret = err = 0.0
    for coll, n, b, tw, tf, pf, m in points:
        if only and coll != only:
            continue
        pw = window_us(coll, n, b, m, A, S, W[coll])
        chosen = tw if pw < pf else tf
        if pw < pf and tw > 1.05 * tf:
            worse += tw / tf - 1
        regret += chosen / min(tw, tf) - 1
        err += math.log(pw / tw) ** 2
    return worse, regret, err


def key(r):
    return (round(r[0], 3), round(r[1], 3), r[2])


grid_a = [0.05 * i for i in range(1, 31)]
grid_s = [0.25 * i for i in range(0, 41)]
grid_w = [0.05 * i for i in range(1, 41)]
present = sorted({p[0] for p in points}, key=COLLS.index)
W = {c: 0.1 for c in COLLS}


def best_weights(A, S):
    return {c: min(grid_w, key=lambda w: key(score(A, S, dict(W, **{c: w}), only=c))) if c in present else W[c]
            for c in COLLS}


A, S = 0.85, 5.25
for _ in range(2):
    A, S = min(itertools.product(grid_a, grid_s), key=lambda p: key(score(p[0], p[1], best_weights(*p))))
    W = best_weights(A, S)
worse, regret, err = score(A, S, W)
always = sum(tw / min(tw, tf) - 1 for _, _, _, tw, tf, _, _ in points)
never = sum(tf / min(tw, tf) - 1 for _, _, _, tw, tf, _, _ in points)
print(f"windowAlphaUs {A:.3f}  windowStepWeight {S:.2f}  windowBwWeight " +
      " ".join(f"{c} {W[c]:.2f}" for c in COLLS) +
      f"\n(taken and more than 5% slower: {worse:.3f} summed; regret {regret:.3f} summed over {len(points)} points, always {always:.1f}, never {never:.1f}; "
      f"rms log error {math.sqrt(err / len(points)):.2f}; folders: {' '.join(folders)})")
print("| collective | ranks | bytes | windows us | FIFO us | predicted windows | predicted FIFO | choice | lost |")
print("|---|---|---|---|---|---|---|---|---|")
for coll, n, b, tw, tf, pf, m in sorted(points):
    pw = window_us(coll, n, b, m, A, S, W[coll])
    chosen = "window" if pw < pf else "fifo"
    lost = (tw if chosen == "window" else tf) / min(tw, tf) - 1
    print(f"| {coll} | {n} | {b} | {tw:.2f} | {tf:.2f} | {pw:.2f} | {pf:.2f} | {chosen} | {lost * 100:.0f}% |")
