// Helpers for coll-perf: parsing nccl-tests' flag values, writing exact values of every type, and
// combining times across ranks. Public API only.
#pragma once

#include <string>

#include "coll/coll.h"

namespace colltools {

/// "8", "64K", "128M", "1G" (powers of 1024).
bool parseSize(const char* text, size_t* out);
bool parseType(const char* text, collDataType_t* out);
bool parseOp(const char* text, collRedOp_t* out);
const char* typeName(collDataType_t t);
const char* opName(collRedOp_t op);
size_t typeBytes(collDataType_t t);
/// Writes the (small, exact) value x as element i of a buffer of type t.
void storeValue(void* buf, size_t i, collDataType_t t, double x);
/// What collAvg gives for an exact sum over n ranks in type t.
double averageOf(double sum, int n, collDataType_t t);
double nowUs();
/// Combines each rank's time: 0 = rank 0's, 1 = mean, 2 = min, 3 = max (nccl-tests' -a).
double acrossRanks(collComm_t comm, double mine, int mode, int nranks);
/// nccl-tests' time format: %7.2f below 10 ms... as all_reduce_perf prints it.
std::string formatTime(double us);

}  // namespace colltools
