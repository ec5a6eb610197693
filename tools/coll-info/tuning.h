// coll-info --tuning: the tuner's decision table.
#pragma once

namespace collinfo {

/// Prints, for each collective (or the one given with -c), the predicted time of every algorithm
/// per size from 8 B to 256 MiB and the algorithm chosen under COLL_ALGO. Options: -n ranks per
/// host (default: COLL_LOCAL_SIZE under a launcher, else 8), --hosts H (default 1), -c name.
/// Returns the exit status.
int printTuning(int argc, char** argv);

}  // namespace collinfo
