#!/usr/bin/env python3
"""Rows of a coll-perf -J file, for the perf/ scripts (instead of scraping the text table).

coll-perf writes nccl-tests' JSON layout (results[].size, out_of_place.time or cpu_time, bus_bw,
nwrong, coll.algorithm); files from before that (perf/results/2026112*) used time_us, busbw_GBs,
wrong and a top-level algorithm. Both read the same here.

    rows(path) -> {size: {"time": us, "busbw": GB/s, "algbw": GB/s, "wrong": int (-1: unchecked),
                          "algorithm": str, "cv": per-iteration cv% or None}}   (out-of-place)
"""
import json


def _placement(row, key="out_of_place"):
    p = row.get(key) or {}
    time = p.get("time_us", p.get("time", p.get("cpu_time")))
    wrong = p.get("nwrong", p.get("wrong"))
    stats = row.get(key + "_per_iter") or {}
    return {"time": float(time), "busbw": float(p.get("bus_bw", p.get("busbw_GBs", 0))),
            "algbw": float(p.get("alg_bw", p.get("algbw_GBs", 0))),
            "wrong": -1 if wrong is None else int(wrong), "cv": stats.get("cv_pct")}


def rows(path, placement="out_of_place"):
    """{size: fields} of one -J file (the last row wins when -N repeats a size)."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc["results"]:
        fields = _placement(r, placement)
        fields["algorithm"] = (r.get("coll") or {}).get("algorithm", r.get("algorithm", ""))
        out[int(r["size"])] = fields
    return out
