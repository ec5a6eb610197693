#!/usr/bin/env python3
"""A MODEL, not a measurement: the speed the device interpreter's code should reach on one H100,
predicted from what its SASS and its source say (bytes in flight per thread, synchronisations per
piece and per step, descriptor reads), before any GPU has run it. The first GPU run
(tests/gpu/run_on_device.sh, steps 1 and 6) checks it; every assumption below is one the run
measures or can refute.

    python3 perf/device_model.py [--sass-summary FILE]   (prints a Markdown table)

Ranks are threads of one process on one GPU (the single-GPU yardstick of ../shared/anchors/gpu):
all their traffic goes through the one GPU's HBM, so the bound of a ring all-reduce of S bytes over
n ranks is its HBM traffic, 6 (n - 1) S bytes (each of the 2 (n - 1) steps of each rank reads two
blocks of S / n and writes one), at the device-to-device copy bandwidth.
"""
import argparse

# --- Assumptions (H100 SXM, CUDA 13); the device run measures the first one. ---
HBM_COPY_GBS = 2900.0  # device-to-device copy, bytes read + written per second (nominal HBM3: 3350)
HBM_LATENCY_US = 0.7  # a global load's latency under load
SMS = 132
FLAG_US = 0.8  # a release store by one CTA seen by another CTA's polling load (L2 round trip)
BARRIER_US = 0.05  # __syncthreads of 512 threads
PCIE_RTT_US = 1.0  # a read of the launch's pinned descriptors
LAUNCH_US = 2.5  # back-to-back kernel launches on one stream, per launch

# --- What the code does (src/exec/cuda; scripts/check_sass.sh shows the SASS side). ---
THREADS = 512  # COLL_DEVICE_THREADS
CHANNELS = 8  # COLL_DEVICE_NCHANNELS: CTAs per rank for a large operation
SLOT_BYTES = (4 << 20) // 8  # COLL_BUFFSIZE / COLL_NSLOTS: one piece
REDUCE_PACKS = {"float32": 4, "bfloat16": 4}  # kUnrollOf<T>: 16-byte packs in flight per thread and source
COPY_PACKS = 8  # kCopyUnroll
BARRIERS_PER_PIECE = 2  # movePiece: syncOr after the waits, sync after the copy
DESCRIPTOR_ROUNDS = 1 + 1 + 2  # per launch: the channel, the work, a batch of steps then their ports


def cta_gbs(packs, sources):
    """HBM traffic one CTA sustains: loads in flight over the latency (Little's law), plus the
    stores that follow them (posted, not waited for)."""
    inflight = THREADS * packs * 16 * sources
    reads = inflight / (HBM_LATENCY_US * 1e-6) / 1e9
    return reads * (sources + 1) / sources  # two reads and a write per element (reduce), one and two (copy)


def allreduce_large(n, size, dtype, channels):
    per_cta_bytes = 2 * (n - 1) / n * size / channels * 3  # HBM bytes each CTA moves
    ctas = n * channels
    reduce_gbs, copy_gbs = cta_gbs(REDUCE_PACKS[dtype], 2), cta_gbs(COPY_PACKS, 1)
    cta = (reduce_gbs + copy_gbs) / 2  # half the steps reduce, half copy
    aggregate = min(ctas * cta, HBM_COPY_GBS)
    if ctas > SMS:
        return None  # not all CTAs resident at once: the ranks' kernels would wait for each other forever
    pieces = 2 * (n - 1) * max(1, -(-size // (n * channels * SLOT_BYTES)))
    t = ctas * per_cta_bytes / (aggregate * 1e9) + pieces * BARRIERS_PER_PIECE * BARRIER_US * 1e-6
    t += (LAUNCH_US + DESCRIPTOR_ROUNDS * PCIE_RTT_US + 2 * (n - 1) * FLAG_US) * 1e-6  # fill the pipeline
    bound = 6 * (n - 1) * size / (HBM_COPY_GBS * 1e9)
    busbw = 2 * (n - 1) / n * size / t / 1e9
    return t, busbw, bound / t, cta, ctas


def allreduce_small(n):
    """8 bytes: LL, one line per step, a ring of 2 (n - 1) steps (each waits for the flag of the
    one before it on the previous rank), after the launch and its descriptor reads."""
    per_step = FLAG_US + BARRIERS_PER_PIECE * BARRIER_US + BARRIER_US  # the step's end sync
    return LAUNCH_US + DESCRIPTOR_ROUNDS * PCIE_RTT_US + 2 * (n - 1) * per_step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=CHANNELS)
    args = ap.parse_args()
    size = 256 << 20
    print("MODEL (not measured): all-reduce on one H100, ranks as threads, coll's device kernels as built")
    print()
    print(f"assumptions: d2d copy {HBM_COPY_GBS:.0f} GB/s, load latency {HBM_LATENCY_US} us, flag {FLAG_US} us, "
          f"PCIe read {PCIE_RTT_US} us, launch {LAUNCH_US} us; code: {THREADS} threads/CTA, "
          f"{args.channels} channels/rank, {SLOT_BYTES >> 10} KiB pieces, packs in flight per thread and source: "
          f"reduce {REDUCE_PACKS}, copy {COPY_PACKS}")
    print()
    print("| ranks | type | CTAs | GB/s per CTA | 256 MiB time (ms) | busbw (GB/s) | of HBM bound | 8 B time (us) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for n in (2, 4, 8):
        for dtype in ("float32", "bfloat16"):
            r = allreduce_large(n, size, dtype, args.channels)
            small = allreduce_small(n)
            if r is None:
                print(f"| {n} | {dtype} | {n * args.channels} | - | not resident | - | - | {small:.1f} |")
                continue
            t, busbw, frac, cta, ctas = r
            print(f"| {n} | {dtype} | {ctas} | {cta:.0f} | {t * 1e3:.2f} | {busbw:.0f} | {frac * 100:.0f}% | {small:.1f} |")


if __name__ == "__main__":
    main()
