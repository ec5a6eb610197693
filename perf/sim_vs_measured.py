#!/usr/bin/python3
"""coll-sim's prediction for this machine (the `vm` preset: the tuner's fitted shm constants)
beside coll-perf's measurement, all-reduce with each algorithm forced, in one run; plus the
predicted tables for a modeled 8xH100 node and 4 such nodes, which no machine here can measure.

    /usr/bin/python3 perf/sim_vs_measured.py          # 2 ranks, 3 repeats, 8 B .. 64 MiB

Method: coll-perf (out-of-place float sum, -c 1) with COLL_ALGO=allreduce:<name>, REPEAT times
interleaved, median per size; coll-sim -t vm --set ranks_per_node=NP for the same sizes. The vm
preset holds one rank per core; with more ranks than cores the model does not apply (it has no
scheduling term), so NP defaults to 2 on the 2-core VM.
Writes perf/results/<stamp>-sim/: raw JSON, the coll-sim tables, env.txt, summary.md.
"""
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
NP = int(os.environ.get("NP", "2"))
REPEAT = int(os.environ.get("REPEAT", "3"))
MAXB = os.environ.get("MAXB", "64M")
ALGOS = ["ring", "tree", "rhd", "rd"]


def run(cmd, env=None):
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return r.stdout


def measure(algo, out):
    env = dict(os.environ, COLL_ALGO="allreduce:" + algo)
    run([os.path.join(BUILD, "bin", "coll-perf"), "all_reduce", "-np", str(NP), "-b", "8", "-e", MAXB, "-f", "4",
         "-c", "1", "--max-seconds", "0.2", "-J", out], env)
    return {size: r["time"] for size, r in coll_json.rows(out).items()}


def simulate(args, out=None):
    text = run([os.path.join(BUILD, "bin", "coll-sim"), "all_reduce"] + args)
    if out:
        with open(out, "w") as f:
            f.write(text)
    return text


def parse_sim(text):
    """{algo: {size: us}} from a coll-sim table."""
    header, rows = None, {}
    for line in text.splitlines():
        if line.startswith("#") and " us " in line and "size" in line:
            header = [w for w in line[1:].split() if w not in ("us", "busbw")]
            continue
        if line.startswith("#") or not line.strip() or header is None:
            continue
        cells = line.split()
        size = int(cells[0])
        algos = header[3:-1]
        for i, a in enumerate(algos):
            t = cells[3 + 2 * i]
            rows.setdefault(a, {})[size] = float(t) if t != "failed" else None
    return rows


def main():
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = os.path.join(ROOT, "perf", "results", stamp + "-sim")
    os.makedirs(out)
    with open(os.path.join(out, "env.txt"), "w") as f:
        f.write(run(["uname", "-a"]) + run(["nproc"]) + run(["git", "-C", ROOT, "log", "-1", "--oneline"]))
    measured = {a: [] for a in ALGOS}
    for rep in range(REPEAT):
        for a in ALGOS:
            measured[a].append(measure(a, os.path.join(out, f"{a}-np{NP}-{rep + 1}.json")))
    sim = parse_sim(simulate(["-t", "vm", "--set", f"ranks_per_node={NP}", "-b", "8", "-e", MAXB, "-f", "4"],
                             os.path.join(out, f"coll-sim-vm-np{NP}.txt")))
    simulate(["-t", "dgx-h100", "-b", "8", "-e", "8G", "-f", "4"], os.path.join(out, "coll-sim-dgx-h100.txt"))
    simulate(["-t", "dgx-h100", "--nodes", "4", "-b", "8", "-e", "8G", "-f", "4"],
             os.path.join(out, "coll-sim-dgx-h100-4nodes.txt"))
    lines = [f"# coll-sim (vm preset) vs coll-perf, all-reduce, {NP} ranks, median of {REPEAT}", "",
             "Commands: `NP=%d REPEAT=%d MAXB=%s /usr/bin/python3 perf/sim_vs_measured.py`" % (NP, REPEAT, MAXB), "",
             "| size | " + " | ".join(f"{a} measured us | {a} predicted us | ratio" for a in ALGOS) + " |",
             "|---:|" + "---:|---:|---:|" * len(ALGOS)]
    ratios = {a: [] for a in ALGOS}
    for size in sorted(measured[ALGOS[0]][0]):
        cells = [str(size)]
        for a in ALGOS:
            m = statistics.median(run_[size] for run_ in measured[a])
            p = sim.get(a, {}).get(size)
            r = p / m if p and m else None
            if r:
                ratios[a].append(r)
            cells += [f"{m:.2f}", f"{p:.2f}" if p else "-", f"{r:.2f}" if r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Predicted / measured, median over sizes (min .. max):", ""]
    for a in ALGOS:
        if ratios[a]:
            lines.append(f"- {a}: {statistics.median(ratios[a]):.2f} ({min(ratios[a]):.2f} .. {max(ratios[a]):.2f})")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("results in", out)


if __name__ == "__main__":
    main()
