// coll-perf's command line: nccl-tests' flags with their meanings and defaults, plus extensions
// (--mem, --algo, --proto, --host-stream, -np, -I, -J, -F, --compare, --max-seconds). Kept apart from main.cc
// so that the tests can parse command lines without running anything.
#pragma once

#include <string>
#include <vector>

#include "coll/coll.h"

namespace collperf {

struct Options {
  std::string collective = "all_reduce";
  size_t minBytes = 32u << 20, maxBytes = 32u << 20;  // -b -e
  size_t step = 1u << 20;                             // -i
  double factor = 0;                                  // -f (0: use -i)
  int iters = 20, warmup = 5;                         // -n -w
  int aggIters = 1;                                   // -m: operations per group
  int cycles = 1;                                     // -N: 0 = forever
  int check = 1;                                      // -c: checked iterations per size (0: none)
  int average = 1;                                    // -a: 0 rank 0, 1 mean, 2 min, 3 max
  int root = 0;                                       // -r; -1 = all roots
  int blocking = 0;                                   // -z: with --host-stream, synchronize every iteration
  int hostStream = 0;                                 // --host-stream: calls queued on a host stream
  int graphs = 0;                                     // -G (device buffers only)
  double timeoutS = 0;                                // -T: per-operation timeout (COLL_TIMEOUT_MS)
  bool iterStats = false;                             // -I
  std::string jsonFile, csvFile;                      // -J, -F
  std::string mem = "host";                           // --mem
  std::string algo, proto;                            // --algo, --proto: COLL_ALGO, COLL_PROTO
  int np = 0;                                         // -np: spawn this many local ranks
  double maxSeconds = 0;                              // --max-seconds: fewer iterations for slow sizes
  std::vector<collDataType_t> types{collFloat32};     // -d
  std::vector<collRedOp_t> ops{collSum};              // -o
  std::vector<std::string> compare;                   // --compare A B
};

enum class Parsed { kRun, kHelp, kError };

/// Parses argv (argv[0] is the program; argv[1] may be a collective name as a subcommand).
Parsed parseOptions(int argc, const char* const* argv, Options* out, std::string* error);

/// The usage text.
const char* usage();

/// The collectives coll-perf runs, by their nccl-tests names.
const std::vector<std::string>& collectiveNames();

/// nccl-tests' bus bandwidth factor: busbw = algbw x factor(collective, nranks).
double busFactor(const std::string& collective, int nranks);

}  // namespace collperf
