// coll-run's process supervision: spawn the local ranks, watch them, tear them down together.
#pragma once

#include <string>
#include <vector>

namespace collrun {

struct Options {
  int nproc = 0;       // ranks on this node (-n)
  int nnodes = 1;      // --nnodes
  int nodeRank = 0;    // --node-rank
  std::string master;  // --master HOST:PORT; empty: 127.0.0.1 and a free port (single node only)
  bool tagOutput = false;
  double timeoutSec = 0;  // 0: none
  double killGraceSec = 3;
  std::vector<std::string> command;
};

/// Parses argv; on a usage error returns false with the reason in *error.
bool parseArgs(int argc, char** argv, Options* out, std::string* error, bool* help);
/// The usage text.
std::string usage();
/// Runs the job and returns coll-run's exit status: 0 when every rank exited 0; otherwise the
/// first failing rank's status (128+signal when it was killed), 124 on --timeout.
int run(const Options& options);

}  // namespace collrun
