#!/usr/bin/python3
"""All-reduce with every algorithm forced, and with the tuner's choice, in one run; optionally
fits the tuner's cost-model constants to the measurements.

    /usr/bin/python3 perf/tune_allreduce.py                     # 8 ranks, 3 repeats, 8 B .. 256 MiB
    NPS="2 4 8" /usr/bin/python3 perf/tune_allreduce.py --fit   # fit COLL_TUNER_MODEL constants too
    NPS="2 4 8" /usr/bin/python3 perf/tune_allreduce.py --fit --refit DIR[,DIR...]  # fit recorded runs

Method: coll-perf (out-of-place float sum, -c 1 so every size is checked once) runs each
algorithm through COLL_ALGO=allreduce:<name>, then with no COLL_ALGO (the tuner's choice), REPEAT
times each, interleaved; medians per size. rd and exchange send the whole vector log2(n) and n-1
times: they stop at 16 MiB, where they are already several times slower than ring.
--fit: least squares (Powell) on log(time) of the fixed algorithms' medians against the model's
prediction, which comes from the library itself (coll-info --tuning with COLL_TUNER_MODEL), so
the fit and the runtime use one implementation of the model.
Writes perf/results/<stamp>-tuner/: raw JSON, env.txt, summary.md, tuner.png.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("COLL_BUILD_DIR", os.path.join(ROOT, "build"))
NPS = [int(x) for x in os.environ.get("NPS", "8").split()]
REPEAT = int(os.environ.get("REPEAT", "3"))
MAXB = os.environ.get("MAXB", "256M")
T = os.environ.get("T", "0.2")
ALGOS = ["ring", "tree", "rhd", "rd", "exchange"]
CAPPED = {"rd": "16M", "exchange": "16M"}
PARAMS = ["alpha", "switch", "beta", "gamma", "contention"] + ALGOS + [a + "_bw" for a in ALGOS]


def run_perf(n, algo, out):
    env = dict(os.environ)
    env.pop("COLL_ALGO", None)
    if algo != "tuned":
        env["COLL_ALGO"] = "allreduce:" + algo
    maxb = CAPPED.get(algo, MAXB)
    cmd = [os.path.join(BUILD, "bin", "coll-perf"), "all_reduce", "-np", str(n), "-b", "8", "-e", maxb, "-f", "2",
           "-c", "1", "--max-seconds", T, "-J", out]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return load(out, algo)


def load(out, algo):
    return {size: (r["time"], r["algorithm"] or algo, r["wrong"]) for size, r in coll_json.rows(out).items()}


def predict(n, model):
    env = dict(os.environ)
    env.pop("COLL_ALGO", None)
    if model:
        env["COLL_TUNER_MODEL"] = ",".join(f"{k}={v:.6g}" for k, v in model.items())
    out = subprocess.run([os.path.join(BUILD, "bin", "coll-info"), "--tuning", "-n", str(n), "-c", "allreduce"],
                         env=env, stdout=subprocess.PIPE, text=True, check=True).stdout
    table = {}
    header = None
    for line in out.splitlines():
        if line.startswith("#") and "size (B)" in line:
            header = [h for h in line[1:].replace(" (us)", "").replace("size (B)", "size").split()]
        elif header and line.strip() and not line.startswith("#"):
            # size, choice, protocol, chunk, then one predicted time per algorithm
            row = dict(zip(header, line.split()))
            table[int(row["size"])] = {"choice": row["choice"],
                                       **{a: float(v) for a, v in row.items() if a in ALGOS + ["chain", "pairwise",
                                                                                               "hier"] and v != "-"}}
    return table


def fit(medians):
    import numpy as np
    from scipy.optimize import minimize

    x0 = np.log([0.25, 1.0, 9.0, 9.0, 1.0] + [1.0] * (2 * len(ALGOS)))

    def residuals(logx):
        model = dict(zip(PARAMS, np.exp(logx)))
        res = []
        for n, per in medians.items():
            pred = predict(n, model)
            for algo in ALGOS:
                for size, t in per.get(algo, {}).items():
                    if size in pred and algo in pred[size] and t > 0:
                        res.append(np.log(pred[size][algo]) - np.log(t))
        return np.array(res)

    # Powell: derivative-free, since the predictions come printed with two decimals.
    r = minimize(lambda x: float(np.sum(residuals(x) ** 2)), x0, method="Powell",
                 bounds=[(np.log(1e-3), np.log(1e3))] * len(x0), options={"maxfev": 4000, "xtol": 1e-3})
    print(f"fit: {r.nfev} evaluations, {r.message}", flush=True)
    return dict(zip(PARAMS, np.exp(r.x))), float(np.sqrt(np.mean(residuals(r.x) ** 2)))


def main():
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = os.path.join(ROOT, "perf", "results", stamp + "-tuner")
    os.makedirs(out)
    git = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s"], stdout=subprocess.PIPE, text=True).stdout
    with open(os.path.join(out, "env.txt"), "w") as f:
        f.write(f"date: {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC\n")
        f.write(f"host: {os.uname().nodename}; {os.cpu_count()} cores; kernel {os.uname().release}\n")
        f.write(f"coll: {git[:80]}\n")
        f.write(f"ranks: {NPS}; repeats: {REPEAT}; sizes 8 B .. {MAXB} (rd, exchange to 16M); --max-seconds {T}\n")
        f.write("command per algorithm: COLL_ALGO=allreduce:<algo> build/bin/coll-perf all_reduce -np N -b 8 "
                f"-e {MAXB} -f 2 -c 1 --max-seconds {T} -J file; tuned: the same without COLL_ALGO\n")
        f.write(f"COLL_TUNER_MODEL: {os.environ.get('COLL_TUNER_MODEL', '(unset: the recorded constants)')}\n")
    raw = {}
    if "--refit" in sys.argv:  # reuse the JSON files of an earlier run
        srcs = sys.argv[sys.argv.index("--refit") + 1].split(",")  # one or more earlier runs
        for path in sorted(p for src in srcs for p in glob.glob(os.path.join(src, "*-np*-*.json"))):
            algo, n, _ = os.path.basename(path)[:-5].rsplit("-", 2)
            if int(n[2:]) in NPS:
                raw.setdefault(int(n[2:]), {}).setdefault(algo, []).append(load(path, algo))
    for rep in range(0 if raw else REPEAT):
        for n in NPS:
            for algo in ALGOS + ["tuned"]:
                print(f"repeat {rep + 1}/{REPEAT}, {n} ranks, {algo}", flush=True)
                raw.setdefault(n, {}).setdefault(algo, []).append(
                    run_perf(n, algo, os.path.join(out, f"{algo}-np{n}-{rep + 1}.json")))
    medians, chosen, wrong = {}, {}, 0
    for n, per in raw.items():
        for algo, reps in per.items():
            for size in reps[0]:
                times = [r[size][0] for r in reps if size in r]
                medians.setdefault(n, {}).setdefault(algo, {})[size] = statistics.median(times)
                wrong += sum(max(0, r[size][2]) for r in reps if size in r)
                if algo == "tuned":
                    chosen.setdefault(n, {})[size] = reps[0][size][1]
    lines = []
    if "--fit" in sys.argv:
        model, rms = fit({n: {a: v for a, v in per.items() if a != "tuned"} for n, per in medians.items()})
        spec = ",".join(f"{k}={v:.3g}" for k, v in model.items())
        lines += [f"Fitted constants (rms log error {rms:.3f}): COLL_TUNER_MODEL={spec}", ""]
        print(lines[0])
    worst = {}
    for n in NPS:
        pred = predict(n, None)
        per = medians[n]
        lines += [f"### {n} ranks: median time (us) per algorithm, the tuner's choice, and the model's prediction", "",
                  "| size (B) | " + " | ".join(ALGOS) + " | best fixed | tuned (choice) | tuned / best | predicted "
                  "(choice) |", "|---:|" + "---:|" * len(ALGOS) + "---|---:|---:|---:|"]
        for size in sorted(per["ring"]):
            fixed = {a: per[a][size] for a in ALGOS if size in per.get(a, {})}
            best = min(fixed, key=fixed.get)
            tuned = per["tuned"].get(size)
            ratio = tuned / fixed[best] if tuned else float("nan")
            worst[n] = max(worst.get(n, 0), ratio)
            p = pred.get(size, {})
            lines.append(f"| {size} | " + " | ".join(f"{fixed[a]:.2f}" if a in fixed else "-" for a in ALGOS) +
                         f" | {best} | {tuned:.2f} ({chosen[n][size]}) | {ratio:.2f} | "
                         f"{p.get(p.get('choice', ''), float('nan')):.2f} ({p.get('choice', '?')}) |")
        lines += ["", f"Worst tuned/best over all sizes at {n} ranks: {worst[n]:.2f}", ""]
    lines.append(f"Wrong elements over all runs: {wrong}")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(NPS), figsize=(6 * len(NPS), 4.5), squeeze=False)
        for ax, n in zip(axes[0], NPS):
            pred = predict(n, None)
            for algo in ALGOS + ["tuned"]:
                xs = sorted(medians[n][algo])
                ax.loglog(xs, [medians[n][algo][x] for x in xs], marker="o", ms=3, label=f"{algo} measured",
                          lw=2.5 if algo == "tuned" else 1)
            for algo in ALGOS:
                xs = sorted(s for s in pred if algo in pred[s])
                ax.loglog(xs, [pred[s][algo] for s in xs], ls=":", lw=1, label=f"{algo} model")
            ax.set_title(f"all-reduce, {n} ranks (shm)")
            ax.set_xlabel("bytes")
            ax.set_ylabel("time (us)")
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].legend(fontsize=6, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "tuner.png"), dpi=110)
    except ImportError:
        pass
    print(f"results in {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
