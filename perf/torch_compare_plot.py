"""results.md and plot.png for a perf/results/<stamp>-torch folder written by torch_compare.sh."""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def human(b):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f:
            return f"{b // f} {unit}"
    return f"{b} B"


def main(folder):
    md = ["# torch.distributed: backend coll vs Gloo", ""]
    runs = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            runs[name[:-5]] = json.load(open(os.path.join(folder, name)))
    m = next(iter(runs.values()))["machine"]
    md += [f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}; Python {m['python']}, torch {m['torch']}, "
           f"coll {m['coll']}; {m['date']}.", ""]
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, r in runs.items():
        if not name.startswith("allreduce"):
            continue
        w = r["world"]
        md += [f"## all_reduce float32, {w} ranks (`{r['machine']['command']}`)", "",
               "| size | coll us | gloo us | coll async+wait us | coll busbw GB/s | gloo busbw GB/s | coll/gloo busbw |",
               "|---:|---:|---:|---:|---:|---:|---:|"]
        for row in r["rows"]:
            md.append(f"| {human(row['bytes'])} | {row['coll_us']:.1f} | {row['gloo_us']:.1f} | "
                      f"{row['coll_async_us']:.1f} | {row['coll_busbw']:.3f} | {row['gloo_busbw']:.3f} | "
                      f"{row['busbw_ratio']:.2f}x |")
        md.append("")
        xs = [row["bytes"] for row in r["rows"]]
        ax.plot(xs, [row["coll_busbw"] for row in r["rows"]], "o-", label=f"coll, {w} ranks")
        ax.plot(xs, [row["gloo_busbw"] for row in r["rows"]], "s--", label=f"gloo, {w} ranks")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per rank")
    ax.set_ylabel("busbw GB/s")
    ax.set_title(f"torch.distributed.all_reduce float32: coll vs Gloo ({m['cores']}-core VM)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "plot.png"), dpi=110)
    for name, r in runs.items():
        if name.startswith("ddp"):
            med = r["median_s"]
            md += [f"## DDP step, {r['world']} ranks, batch {r.get('batch', 8)} (`{r['machine']['command']}`)", "",
                   f"{r['params'] / 1e6:.1f} M parameters: coll {med['coll'] * 1e3:.1f} ms, gloo {med['gloo'] * 1e3:.1f} ms "
                   f"per step (median over rounds), coll/gloo {med['coll'] / med['gloo']:.2f}x"
                   + (f"; DDP with no communication {med['ddp_no_comm'] * 1e3:.1f} ms" if "ddp_no_comm" in med else "")
                   + (f"; the same step with no DDP {med['none'] * 1e3:.1f} ms" if "none" in med else "")
                   + (f"; rounds (coll/gloo ms): " + ", ".join(
                       f"{c * 1e3:.0f}/{g * 1e3:.0f}" for c, g in zip(r["round_medians"]["coll"], r["round_medians"]["gloo"]))
                      if "round_medians" in r else "")
                   + f"; max parameter difference after the "
                   f"steps {r['max_param_diff']:.1e}.", ""]
    if "overhead" in runs:
        o = dict(runs["overhead"]["per_world"])
        o = {"torch_fake_backend_us": o.pop("torch_fake_backend_us"), "per_world": o}
        md += ["## Per-call cost of the binding, 8 B all_reduce", "",
               f"torch's own cost per call (its fake backend): {o['torch_fake_backend_us']:.2f} us.", "",
               "| ranks | torch+coll blocking us | async+wait us | coll-perf us | coll_torch's own part us |",
               "|---:|---:|---:|---:|---:|"]
        for w, t in o["per_world"].items():
            md.append(f"| {w} | {t['blocking']:.2f} | {t['async_wait']:.2f} | {t['coll_perf']:.2f} | "
                      f"{t['blocking'] - t['coll_perf'] - o['torch_fake_backend_us']:.2f} |")
        md.append("")
    open(os.path.join(folder, "results.md"), "w").write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main(sys.argv[1])
