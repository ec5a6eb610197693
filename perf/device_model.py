#!/usr/bin/env python3
"""A MODEL, not a measurement: what coll's device all-reduce should take on one GPU with several
ranks as threads (the layout of ../shared/anchors/gpu), from the traffic its ring schedule really
moves and two limits, each given as a range because neither is known well:

  - HBM: the device-to-device copy bandwidth (bytes read + written per second);
  - one CTA's own bandwidth: a CTA runs on one SM, and an SM moves only so much (loads in flight
    over their latency). coll runs one CTA per channel, so a rank's operation is capped by
    channels x per-CTA bandwidth, however fast HBM is.

Traffic of a ring all-reduce of S bytes per rank over n ranks, every rank on the same HBM, summed
over ranks: each rank's first reduce-scatter step reads its block and writes the peer's slot (2
blocks of S/n), the n - 2 middle ones read a slot and a block and write a slot (3), the last one
also writes the output (4); the all-gather's n - 2 steps read a slot and write the output and a slot
(3), the last one reads a slot and writes the output (2): (6n - 4) S / n per rank, (6n - 4) S in all.
(An earlier version of this model counted 6 (n - 1) S and took the per-CTA limit as always met.)

    python3 perf/device_model.py [--channels 8] [--measured]

--measured prints, beside the model, the first GPU run's figures (perf/results/20261127-gpu: an
H200, 2026-11-27), and the per-CTA bandwidth they imply.
"""
import argparse

# Ranges (low, high). HBM: the H100 SXM's copy bound as measured elsewhere (~3.0 TB/s) to the
# H200's as measured here (4.26 TB/s). Per CTA: the low end is about the least the H200 run implies
# (--measured: float32 67-71 GB/s where HBM did not bind, bfloat16 35-46); the high end is Little's law for 512 threads with 4
# 16-byte packs in flight each per source at a 0.7 us load latency (about 190 GB/s).
HBM_GBS = (3000.0, 4264.0)
CTA_GBS = {"float32": (65.0, 190.0), "bfloat16": (35.0, 190.0)}
LAUNCH_US = (2.5, 6.0)  # a launch and its descriptor reads over PCIe, before the first piece
SMS = 132

# The H200 run (perf/results/20261127-gpu/part1.log), all-reduce at 256 MiB, time in us.
MEASURED_256M_US = {
    (2, "float32"): 1879.51,
    (4, "float32"): 2520.66,
    (8, "float32"): 3530.25,
    (2, "bfloat16"): 2919.22,
    (4, "bfloat16"): 4190.35,
    (8, "bfloat16"): 5315.60,
}
MEASURED_HBM_GBS = 4264.0


def traffic(n, size):
    """HBM bytes a ring all-reduce of `size` bytes per rank moves, summed over the n ranks."""
    return (6 * n - 4) * size


def time_range(n, size, dtype, channels):
    """(fastest, slowest) seconds: traffic over the smaller of HBM and the CTAs' sum, plus a launch."""
    ctas = n * channels
    if ctas > SMS:
        return None  # not co-resident: core/residency.h caps the channels instead
    out = []
    for hbm, cta, launch in ((HBM_GBS[1], CTA_GBS[dtype][1], LAUNCH_US[0]),
                             (HBM_GBS[0], CTA_GBS[dtype][0], LAUNCH_US[1])):
        rate = min(hbm, ctas * cta) * 1e9
        out.append(traffic(n, size) / rate + launch * 1e-6)
    return tuple(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--measured", action="store_true")
    args = ap.parse_args()
    size = 256 << 20
    print("MODEL (not measured): ring all-reduce of 256 MiB per rank, ranks as threads on one GPU")
    print(f"ranges: HBM {HBM_GBS[0]:.0f}-{HBM_GBS[1]:.0f} GB/s, per CTA {CTA_GBS}, launch {LAUNCH_US} us, "
          f"{args.channels} channels (CTAs) per rank")
    print()
    head = "| ranks | type | CTAs | HBM traffic (GB) | time (ms) | busbw (GB/s) | limited by |"
    if args.measured:
        head += " H200 run (ms) | its busbw | per CTA implied (GB/s) | of HBM |"
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))
    for n in (2, 4, 8):
        for dtype in ("float32", "bfloat16"):
            r = time_range(n, size, dtype, args.channels)
            ctas = n * args.channels
            if r is None:
                print(f"| {n} | {dtype} | {ctas} | - | not co-resident | - | - |")
                continue
            lo, hi = r
            bus = 2 * (n - 1) / n * size / 1e9
            limit = "CTAs" if ctas * CTA_GBS[dtype][1] < HBM_GBS[1] else (
                "HBM" if ctas * CTA_GBS[dtype][0] > HBM_GBS[0] else "CTAs or HBM")
            row = (f"| {n} | {dtype} | {ctas} | {traffic(n, size) / 1e9:.1f} | {lo * 1e3:.2f}-{hi * 1e3:.2f} | "
                   f"{bus / hi:.0f}-{bus / lo:.0f} | {limit} |")
            if args.measured:
                us = MEASURED_256M_US[(n, dtype)]
                rate = traffic(n, size) / (us * 1e-6) / 1e9
                row += (f" {us / 1e3:.2f} | {bus / (us * 1e-6):.0f} | {rate / ctas:.0f} | "
                        f"{rate / MEASURED_HBM_GBS * 100:.0f}% |")
            print(row)
    print()
    print("What the SASS shows (cuobjdump -sass -arch sm_90 of libcoll, 58 kernels, 2026-11-27): no local")
    print("memory and no spills (scripts/check_sass.sh); 232 system-scope fences (MEMBAR...SYS), one before each")
    print("release store of head and tail, so one per piece and direction even where both ranks share the GPU")
    print("(a .gpu scope would do); and 1188 calls (CALL.REL), to the compiler's integer division routines")
    print("(slot indices modulo the slot count, pieces per step).")


if __name__ == "__main__":
    main()
