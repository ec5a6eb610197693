// coll-perf's -J file in nccl-tests' JSON layout (src/util.cu of nccl-tests 2.19, file version 3),
// written and read with nlohmann-json. What nccl-tests has no field for (the collective's name,
// transports, coll's algorithm per size) is under a "coll" key, at the top and in each result.
#pragma once

#include <string>
#include <vector>

#include "options.h"
#include "report.h"

namespace collperf {

/// One rank, as nccl-tests' "devices" list names it.
struct Device {
  int rank = 0, pid = 0;
  std::string host;
  int device = -1;  // the CUDA device of --mem device; -1: host memory
};

/// The run-level facts of a result file.
struct RunInfo {
  std::string collective, transports;
  std::vector<std::string> args;  // argv, argv[0] included (nccl-tests' "args")
  std::vector<std::string> env;   // COLL_* and NCCL_* variables only (see writeJson)
  std::string startTime, endTime;
  int version = 0, nranks = 0;
  std::vector<Device> devices;
  int64_t wrong = 0;     // out-of-bounds values over every row
  double avgBusbw = 0;   // nccl-tests' "Avg bus bandwidth"
  bool threads = false;  // the ranks were threads of this process (-t/-g)
};

/// "YYYY-mm-dd HH:MM:SS" now, local time: nccl-tests' timestamp format.
std::string nowString();

/// The environment variables a result file records: the ones that steer coll (COLL_*, NCCL_*).
std::vector<std::string> relevantEnv();

/// Writes the file; false when it cannot be written.
bool writeJson(const std::string& path, const Options& o, const RunInfo& info, const std::vector<Row>& rows);

/// What --compare needs from one result file.
struct Result {
  std::string collective, args;
  int nranks = 0;
  bool perIter = false;  // the rows carry per-iteration statistics (-I 1)
  std::vector<Row> rows;
};

/// Reads a file written by -J: nccl-tests' layout (coll-perf's or nccl-tests' own), or the layout of
/// coll-perf before it followed nccl-tests (perf/results holds such files). False with *error naming
/// the file and the problem.
bool readJson(const std::string& path, Result* out, std::string* error);

}  // namespace collperf
