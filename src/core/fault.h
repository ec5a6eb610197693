// Test-only fault injection: COLL_FAULT_INJECT="<point>[:<rank>]" kills this process with SIGKILL
// when it reaches <point> (as rank <rank>, or as any rank). This is how the failure tests make a
// rank die at a precise moment of a real protocol run; it costs one getenv per point passed.
#pragma once

namespace coll {

/// Kills the process if COLL_FAULT_INJECT names this point (and this rank, when one is given).
void faultPoint(const char* point, int rank);

}  // namespace coll
