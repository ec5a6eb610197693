// The one parser of byte sizes with K/M/G suffixes for every tool (coll-perf's -b/-e/-i, coll-sim's
// -b/-e and its topology files), so that "64K" means the same everywhere. No coll dependency.
#pragma once

#include <cstddef>

namespace colltools {

/// Parses "8", "1.5K", "64k", "128M", "1G", "4 M" as nccl-tests' parsesize does (binary units:
/// K = 1024). Surrounding spaces are ignored; anything else after the suffix, a negative or non-finite
/// number is refused. Returns false and leaves *out alone on a refusal.
bool parseSizeValue(const char* text, double* out);

/// parseSizeValue rounded down to whole bytes; false also when the value does not fit a size_t.
bool parseSize(const char* text, size_t* out);

}  // namespace colltools
