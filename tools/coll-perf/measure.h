// The timed part of coll-perf: one placement of one size, as nccl-tests' BenchTime does it (checks,
// warm-up, the timed loop with -z's waits and barriers, -C's issue time, -I's per-iteration samples),
// each rank's numbers combined across ranks with -a. Public API only.
#pragma once

#include <vector>

#include "collectives.h"
#include "device_memory.h"
#include "options.h"
#include "report.h"

namespace collperf {

/// One rank's measuring state for a whole run.
struct Runner {
  const Options& o;
  collComm_t comm;
  int rank, n;
  Buffers buf;
  bool failed = false;
  /// --mem device: buf is device memory on device->stream(), -u elements into the allocations
  /// at deviceStart; inputs are written and outputs checked in host mirrors of them (hostStart,
  /// the same offsets), copied over before and after.
  DeviceMemory* device = nullptr;
  Buffers deviceStart, hostStart;

  /// Times `c` (every rank calls it with the same arguments); *iters gets the timed iteration count.
  /// On a failure, prints it once (rank and cause), sets `failed` and returns what it has.
  Measure measure(const Call& c, bool inPlace, int* iters);

 private:
  collResult_t iteration(const Call& c, bool inPlace);
  collResult_t sync(const Call& c);
  collResult_t barrier();
  void fail(collResult_t rc);
  void failDevice(const std::string& why);
  int itersFor(const Call& c, bool inPlace);
  bool prepareAndRun(const Call& c, bool inPlace, int64_t* wrong);
  Measure measureGraph(const Call& c, bool inPlace, int iters, Measure m);
  Measure finish(const Call& c, Measure m);
};

}  // namespace collperf
