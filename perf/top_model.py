#!/usr/bin/env python3
"""The cost of a coll-top view by job shape, and at 4096 ranks (issue 47 item 3).

Input: raw.txt of perf/top_scale.sh, a line per view: shape ranks hosts per_host seconds
bytes_received answered. Output (markdown on stdout):
  - per shape, the median view time and the bytes the tool received, with the bytes the
    protocol predicts (they must agree exactly: the model's byte half is the wire layout);
  - a least-squares fit of the median time to a + b*ranks + c*hosts + d*per_host (the table's
    size, the tool's questions to the leaders, a leader's questions to its host), and its figures
    for 4096 ranks at 8, 64 and 4096 ranks per host, beside the bytes of the old design, where
    every rank's answer carried the whole inbox table.

    python3 perf/top_model.py perf/results/<stamp>-top/raw.txt
"""
import collections
import statistics
import sys

HEADER = 40  # MsgHeader
QUESTION = HEADER + 8  # header + StatusQuestion
JOB_STATUS = 344  # JobStatus (bootstrap_wire.h)
HOST_ENTRY = 8 + JOB_STATUS  # HostEntry (status_wire.h)
TABLE_ENTRY = 32  # TableEntry
PACKED_ADDRESS = 24


def tool_bytes(n, hosts, per):
    """What coll-top receives: the table, then each leader's host answer."""
    return HEADER + TABLE_ENTRY * n + hosts * (HEADER + per * HOST_ENTRY)


def all_bytes(n, hosts, per):
    """Every byte of a view: the tool's questions and answers, and the leaders' with their hosts."""
    tool = QUESTION * (1 + hosts) + tool_bytes(n, hosts, per)
    inside = (n - hosts) * (QUESTION + HEADER + JOB_STATUS)
    return tool + inside


def old_bytes(n):
    """The design before the tree: the tool asked every rank, and each answered with its status and
    every rank's inbox address."""
    return QUESTION * (n + 1) + HEADER + 264 * n + n * (HEADER + JOB_STATUS + PACKED_ADDRESS * n)


def solve(a, b):
    """Solves a x = b (small, dense) by Gaussian elimination with partial pivoting."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-30:
            raise ValueError("singular fit: the shapes do not separate the terms")
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def human(b):
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return "%.2f %s" % (b / size, unit)
    return "%d B" % b


def main():
    rows = collections.defaultdict(list)
    for line in open(sys.argv[1]):
        f = line.split()
        if len(f) != 7:
            continue
        shape, n, hosts, per = f[0], int(f[1]), int(f[2]), int(f[3])
        rows[(shape, n, hosts, per)].append((float(f[4]), int(f[5]), int(f[6])))
    print("# coll-top views by shape\n")
    print("| shape (hosts x ranks) | ranks | views | all answered | median s | bytes received | predicted | old design |")
    print("|---|---|---|---|---|---|---|---|")
    fit_rows = []
    mismatch = False
    for (shape, n, hosts, per), views in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        secs = statistics.median(v[0] for v in views)
        got = sorted(set(v[1] for v in views))
        whole = all(v[2] == n for v in views)
        want = tool_bytes(n, hosts, per)
        mismatch |= got != [want]
        print("| %s | %d | %d | %s | %.4f | %s | %d | %s |" % (shape, n, len(views), "yes" if whole else "NO", secs,
                                                          ",".join(map(str, got)), want, human(old_bytes(n))))
        fit_rows.append((n, hosts, per, secs))
    print()
    print("Bytes received agree with the wire layout's prediction: %s.\n" % ("NO" if mismatch else "yes, every view"))
    if len(fit_rows) < 4:
        print("(fewer than 4 shapes: no fit)")
        return
    # Least squares: normal equations for t = a + b n + c H + d L.
    xs = [[1.0, n, h, l] for n, h, l, _ in fit_rows]
    ys = [t for *_, t in fit_rows]
    ata = [[sum(x[i] * x[j] for x in xs) for j in range(4)] for i in range(4)]
    aty = [sum(x[i] * y for x, y in zip(xs, ys)) for i in range(4)]
    a, b, c, d = solve(ata, aty)
    print("Fit of the median time (s): %.5f + %.3g x ranks + %.3g x hosts + %.3g x ranks per host" % (a, b, c, d))
    worst = max(abs((a + b * n + c * h + d * l) - t) / t for n, h, l, t in fit_rows)
    print("(largest relative error over the measured shapes: %.0f%%)\n" % (100 * worst))
    print("| at 4096 ranks | hosts | view time, healthy (model) | + a stopped rank | bytes to the tool | bytes in all | old design |")
    print("|---|---|---|---|---|---|---|")
    for per in (8, 64, 4096):
        hosts = 4096 // per
        t = a + b * 4096 + c * hosts + d * per
        print("| %d per host | %d | %.3f s | + the timeout (1 s; 1.5 s for a leader) | %s | %s | %s |" % (
            per, hosts, t, human(tool_bytes(4096, hosts, per)), human(all_bytes(4096, hosts, per)),
            human(old_bytes(4096))))


if __name__ == "__main__":
    main()
