// coll-perf's command line: nccl-tests' flags (src/common.cu of nccl-tests 2.19: the same short and
// long names, values and defaults) parsed with getopt_long as nccl-tests does, plus coll's extensions
// as long options (--coll, --mem, --algo, --proto, --host-stream, --np/-np, --max-seconds, --compare,
// --progress, -F/--csv). Kept apart from main.cc so that the tests can parse command lines without
// running anything.
#pragma once

#include <string>
#include <vector>

#include "coll/coll.h"

namespace collperf {

struct Options {
  std::string collective = "all_reduce";              // first positional argument, or --coll
  size_t minBytes = 32u << 20, maxBytes = 32u << 20;  // -b -e
  size_t step = 1u << 20;                             // -i
  double factor = 0;                                  // -f (0: use -i)
  int iters = 20, warmup = 5;                         // -n -w
  int aggIters = 1;                                   // -m: operations per group
  int cycles = 1;                                     // -N: 0 = forever
  int check = 1;                                      // -c: checked iterations per size (0: none)
  int average = 1;                                    // -a: 0 rank 0, 1 mean, 2 min, 3 max
  int root = 0;                                       // -r; -1 = all roots
  int blocking = 0;                                   // -z: 0 none, 1 wait+barrier, 2 wait, 3 wait+barrier untimed
  int parallelInit = 0;                               // -p: accepted (ranks are processes: init is parallel)
  int streamNull = 0;                                 // -y: accepted (host memory has no CUDA stream)
  int hostStream = 0;                                 // --host-stream: calls queued on a host stream
  int graphs = 0;                                     // -G (device buffers only)
  int reportCputime = 0;                              // -C: report the time to issue the calls
  int reportTimestamps = 0;                           // -S: a timestamp at the end of every row
  int unalign = 0;                                    // -u: buffers start this many elements late
  int registerMode = 0;                               // -R: 1 collCommRegister, 2 symmetric windows
  double timeoutS = 0;                                // -T: per-operation timeout (COLL_TIMEOUT_MS), 0 none
  int iterStats = 0;                                  // -I: per-iteration statistics
  int iterSkip = 0;                                   // -K: leading samples left out of them
  std::string jsonFile, csvFile;                      // -J, -F
  std::string mem = "host";                           // --mem
  std::string algo, proto;                            // --algo, --proto: COLL_ALGO, COLL_PROTO
  int np = 0;                                         // -np: spawn this many local ranks
  int nthreads = 1, ngpus = 1;                        // -t -g: ranks as threads of this process (t x g)
  double maxSeconds = 0;                              // --max-seconds: fewer iterations for slow sizes
  double progressS = 2;                               // --progress[=s]: stderr line after sizes slower than s
  std::vector<collDataType_t> types{collFloat32};     // -d
  std::vector<collRedOp_t> ops{collSum};              // -o
  std::vector<std::string> compare;                   // --compare A B
  std::vector<std::string> warnings;                  // options nccl-tests ignores with a warning
};

enum class Parsed { kRun, kHelp, kError };

/// Parses argv (argv[0] is the program). argv is not modified (getopt works on a copy). On kError,
/// *error is one sentence naming the option and what it accepts; the caller prints usage() after it.
Parsed parseOptions(int argc, const char* const* argv, Options* out, std::string* error);

/// The usage text: every option, short and long, as nccl-tests lists them, then coll's extensions.
const char* usage();

/// The collectives coll-perf runs, by their nccl-tests names.
const std::vector<std::string>& collectiveNames();

/// nccl-tests' bus bandwidth factor: busbw = algbw x factor(collective, nranks).
double busFactor(const std::string& collective, int nranks);

}  // namespace collperf
