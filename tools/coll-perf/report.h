// coll-perf's text output in nccl-tests' layout (src/util.cu of nccl-tests 2.19): the table header,
// one row per size with per-iteration columns under -I 1, and per-iteration statistics. Rank 0 only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace collperf {

/// Per-iteration statistics of one measurement (-I), in microseconds; nccl-tests' IterStats and cv%.
struct IterStats {
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0, cvPercent = 0;
};

/// One placement (out-of-place or in-place) of one row.
struct Measure {
  double timeUs = 0, algbw = 0, busbw = 0;
  int64_t wrong = -1;         // -1: not checked (printed N/A, as nccl-tests)
  bool hasStats = false;      // -I 1 was on
  IterStats stats;            // over the samples after the skipped ones (-K)
  std::vector<double> times;  // every per-iteration sample (us), skipped ones included
  int skipped = 0;
  // --mem device: this rank's kernels as they timed themselves over the timed loop
  // (collCommGetDeviceTimings), means per launch; JSON only. Not for -G (replays are not counted).
  bool hasDevice = false;
  double launches = 0, channels = 0, kernelUs = 0, firstPieceUs = 0, lastPieceUs = 0;
  double recvPollUs = 0, sendPollUs = 0, fenceUs = 0;
};

/// One line of the table.
struct Row {
  size_t bytes = 0, count = 0;
  std::string type, redop;
  int root = -1;
  std::string algorithm;  // coll's choice for this size (JSON only)
  int iters = 0;          // timed iterations (fewer than -n under --max-seconds)
  Measure oop, ip;
  std::string timestamp;  // -S 1
};

/// nccl-tests' computeIterStats on a copy of `times` (us): nearest-rank percentiles, population stdev.
IterStats statsOf(std::vector<double> times);

/// Order-preserving combination across ranks, as -a does for times: 0 rank 0's, 1 mean, 2 min, 3 max.
enum class Across { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

/// The statistics of several ranks combined field by field with `mode` (what main.cc does with
/// collectives, here on values in hand so the tests can check it). Because every rank's own min <= avg
/// <= its total time / iterations, and every mode is monotone, the combined min <= avg <= the reported
/// time as well: combining samples per iteration first (the slowest rank of each iteration) does not
/// keep that, since the ranks' waits move between iterations.
IterStats combineStats(const std::vector<IterStats>& perRank, Across mode);

/// IterStats as a flat array (for a collective across ranks) and back.
std::vector<double> packStats(const IterStats& s);
IterStats unpackStats(const std::vector<double>& v);

/// nccl-tests' getFloatStr: `value` in `width` characters with 2, 1 or 0 decimals, or exponent form.
std::string floatStr(double value, int width);

/// The table header (nccl-tests' three comment lines, with the per-iteration columns under -I).
void printTableHeader(FILE* out, bool cputime, bool timestamps, bool perIter);
/// One row in nccl-tests' columns.
void printRow(FILE* out, const Row& r, bool perIter);

/// Writes every row as CSV with a header line.
bool writeCsv(const std::string& path, const std::string& collective, int nranks, const std::vector<Row>& rows);

}  // namespace collperf
