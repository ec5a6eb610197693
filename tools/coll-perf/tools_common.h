// Helpers for coll-perf: parsing nccl-tests' flag values, writing exact values of every type, and
// combining times across ranks. Public API only.
#pragma once

#include <string>
#include <vector>

#include "coll/coll.h"
#include "size_arg.h"  // parseSize: the tools' one K/M/G parser

namespace colltools {

/// A type by its nccl-tests name (int8 ... bfloat16) or an alias (float32, float16, float64, bf16).
bool parseType(const char* text, collDataType_t* out);
/// A reduction by its nccl-tests name: sum, prod, max, min, avg.
bool parseOp(const char* text, collRedOp_t* out);
/// nccl-tests' name of a type / an op.
const char* typeName(collDataType_t t);
const char* opName(collRedOp_t op);
/// Bytes per element of t.
size_t typeBytes(collDataType_t t);
/// Writes the (small, exact) value x as element i of a buffer of type t.
void storeValue(void* buf, size_t i, collDataType_t t, double x);
/// What collAvg gives for an exact sum over n ranks in type t.
double averageOf(double sum, int n, collDataType_t t);
/// Monotonic time in microseconds.
double nowUs();
/// Combines each rank's time: 0 = rank 0's, 1 = mean, 2 = min, 3 = max (nccl-tests' -a).
double acrossRanks(collComm_t comm, double mine, int mode, int nranks);
/// acrossRanks element by element, in place (every rank gets the result).
void acrossRanks(collComm_t comm, std::vector<double>* values, int mode, int nranks);
/// nccl-tests' time format: %7.2f below 10 ms... as all_reduce_perf prints it.
std::string formatTime(double us);

}  // namespace colltools
