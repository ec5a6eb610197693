// coll-perf's outputs: the nccl-tests table, JSON and CSV files, and --compare between two JSON
// results. Rank 0 only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace collperf {

/// Per-iteration statistics of one measurement (-I), in microseconds.
struct IterStats {
  double min = 0, max = 0, p99 = 0, cvPercent = 0;
};

/// One placement (out-of-place or in-place) of one row.
struct Measure {
  double timeUs = 0, algbw = 0, busbw = 0;
  int64_t wrong = -1;  // -1: not checked (printed N/A, as nccl-tests)
  IterStats stats;
};

struct Row {
  size_t bytes = 0, count = 0;
  std::string type, redop;
  int root = -1;
  std::string algorithm;
  Measure oop, ip;
};

/// Statistics of a set of per-iteration times (sorted copy; p99 by nearest rank).
IterStats statsOf(std::vector<double> times);

/// The nccl-tests table header (two comment lines of column names and units).
void printTableHeader(FILE* out);
/// One row in nccl-tests' columns.
void printRow(FILE* out, const Row& r);

/// Run-level facts written at the top of JSON and CSV files.
struct RunInfo {
  std::string collective, transports, args;
  int version = 0, nranks = 0;
};

/// Writes every row as JSON: an object with the run facts and "results", one row per line.
bool writeJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
/// Writes every row as CSV with a header line.
bool writeCsv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

/// Reads rows back from a file written by writeJson; false with *error when it cannot.
bool readJson(const std::string& path, RunInfo* info, std::vector<Row>* rows, std::string* error);

/// Prints, for every row of `base` with a match in `next` (same collective, type, redop, root,
/// size), next/base of out-of-place busbw and time. Returns the number of matched rows.
int printComparison(FILE* out, const RunInfo& baseInfo, const std::vector<Row>& base, const RunInfo& nextInfo,
                    const std::vector<Row>& next);

}  // namespace collperf
