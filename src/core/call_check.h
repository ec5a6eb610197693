// COLL_CHECK_CALLS=1: before each collective, the ranks all-gather a 32-byte fingerprint of the
// call (its number among the communicator's collectives, kind, count, type, op, root) over the
// data path and compare them, so that ranks calling different collectives, ops, types, counts or
// roots fail at once, every rank with the same error naming both calls, instead of returning
// divergent results (equal sizes) or timing out. This is PyTorch's collective fingerprint check
// (TORCH_DISTRIBUTED_DEBUG=DETAIL): one extra small all-gather per collective, hence opt-in.
#pragma once

#include <cstdint>
#include <string>

namespace coll {

struct OpArgs;

/// The fingerprint of a call, and the sentence describing one.
struct CallPrint {
  uint64_t seq;
  int32_t kind, type, op, root;
  uint64_t count;
};
static_assert(sizeof(CallPrint) == 32, "a fixed wire size");

CallPrint callPrint(const OpArgs& a, uint64_t seq);
std::string describeCall(const CallPrint& p);
/// "" when all prints are equal; else the sentence naming the first rank that differs from rank 0.
std::string comparePrints(const CallPrint* prints, int nranks);

}  // namespace coll
