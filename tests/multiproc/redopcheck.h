// Checks of collRedOpCreatePreMulSum ops and the bitwise ops (collBand, collBor, collBxor), run by
// every rank of a communicator at once (threads or processes). Every result is compared with a
// value computed here from the ranks' inputs, never with another run of the library: inputs and
// scalars are small integers (floating types: scalars 0.5, 1 and 2), so that the exact result is
// representable in every type and any order of summation gives the same bits.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coll/coll.h"

namespace colltest {

/// On this rank of comm: all-reduce, reduce and reduce-scatter, in place and out of place, for
/// every count of `counts`, with
///  - a PreMulSum op with collScalarHostImmediate (every type), whose scalar variable is changed
///    after create and must not matter;
///  - a PreMulSum op with collScalarDevice on a host variable (every type), run twice with the
///    variable changed in between: each run must use the value of its own time;
///  - collBand, collBor and collBxor (every integer type);
/// and for bigCount (if not 0) the same for a few types. Outputs are poisoned before each run and
/// out-of-place inputs must come back unchanged. Then the refusals (collInvalidArgument with a
/// sentence from collGetLastError): an op on another communicator, with another type, after
/// collRedOpDestroy, a bitwise op on a floating type, bad create and destroy arguments; and a
/// plain all-reduce after them, which must still work. "" when all is correct.
std::string runRedOpChecks(collComm_t comm, const std::vector<size_t>& counts, size_t bigCount);

}  // namespace colltest
