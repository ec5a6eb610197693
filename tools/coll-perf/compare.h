// coll-perf --compare A.json B.json: B/A per size from two -J files, with a warning where the ratio
// is likely noise (a single run's numbers without per-iteration statistics, or with a high spread).
#pragma once

#include <cstdio>

#include "json_report.h"

namespace collperf {

/// Above this per-iteration coefficient of variation (%), a row's ratio is flagged as noise-prone.
constexpr double kNoisyCvPercent = 10.0;

/// Prints, for every row of `a` with a match in `b` (same size, type, redop, root), B/A of the
/// out-of-place busbw and time, and the warnings. Returns the number of matched rows.
int printComparison(FILE* out, const Result& a, const Result& b);

}  // namespace collperf
