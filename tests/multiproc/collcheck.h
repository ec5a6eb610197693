// Correctness checks of the collectives, run by every rank of a communicator at once (threads or
// processes). Inputs are small integers (or 1/2/-1 for products), so that every order of
// reduction gives the same bits in every type; outputs are poisoned first and compared in full.
#pragma once

#include <string>

#include "coll/coll.h"

namespace colltest {

enum class Coll { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
const char* collName(Coll c);

struct Case {
  Coll coll;
  collDataType_t type;
  collRedOp_t op;
  size_t count;
  bool inPlace;
  int root;
};

/// Runs one case on this rank and checks every output element. "" when correct.
std::string runCase(collComm_t comm, const Case& c);

}  // namespace colltest
