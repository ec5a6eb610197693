// Test-only fault injection: COLL_FAULT_INJECT="<point>[:<rank>]" kills this process with SIGKILL
// when it reaches <point> (as rank <rank>, or as any rank). This is how the failure tests make a
// rank die at a precise moment of a real protocol run; it costs one getenv per point passed.
// The point "corrupt" does not kill: it makes collectives of that rank flip one output element
// (see faultWanted), which is how tools that check results (coll-perf) are tested to notice.
#pragma once

namespace coll {

/// Kills the process if COLL_FAULT_INJECT names this point (and this rank, when one is given).
void faultPoint(const char* point, int rank);

/// True when COLL_FAULT_INJECT names this point (and this rank, when one is given).
bool faultWanted(const char* point, int rank);

}  // namespace coll
