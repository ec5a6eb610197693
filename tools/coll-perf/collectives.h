// What coll-perf runs for each collective: buffer shapes as nccl-tests defines them, NCCL's
// in-place layouts, the call itself, inputs whose exact result is known in any reduction order,
// and the per-element check. Public API only.
#pragma once

#include <cstdint>
#include <string>

#include "coll/coll.h"

namespace collperf {

/// Sizes of one test point, in elements unless named bytes.
struct Shape {
  size_t bytes = 0;       // the "size" column: the larger of the per-rank buffers
  size_t count = 0;       // the "count" column: bytes / type size
  size_t paramCount = 0;  // the count argument of the call (per rank, or per peer)
  size_t sendElems = 0;   // elements the call reads on each rank
  size_t recvElems = 0;   // elements it writes
};

/// nccl-tests' shape for `bytes` of the collective: all_gather, reduce_scatter and alltoall
/// split the size across ranks (rounded down to a multiple of nranks).
Shape shapeFor(const std::string& coll, size_t bytes, size_t elemBytes, int nranks);

/// The collectives, resolved once from their names so the timed loop compares no strings.
enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll, kSendRecv };

/// The Coll named `name` (one of collectiveNames(); sendrecv for anything else).
Coll collFromName(const std::string& name);

/// Everything one call needs.
struct Call {
  Coll coll;
  Shape shape;
  collDataType_t type = collFloat32;
  collRedOp_t op = collSum;
  int root = 0;
  int rank = 0, nranks = 1;
  collComm_t comm = nullptr;
  collStream_t stream = nullptr;  // NULL: blocking; else a host stream (--host-stream)
};

/// Buffers of one rank: `send` for out-of-place inputs, `recv` for outputs and in-place runs.
struct Buffers {
  char* send = nullptr;
  char* recv = nullptr;
};

/// The collective once (sendrecv: a group of one send to rank+1 and one receive from rank-1).
collResult_t runOnce(const Call& c, const Buffers& b, bool inPlace);

/// Writes this rank's inputs where the call reads them and poisons everything it writes.
void prepare(const Call& c, const Buffers& b, bool inPlace);

/// Elements of the output that differ from the exact result (0 on ranks that receive nothing).
int64_t countWrong(const Call& c, const Buffers& b, bool inPlace);

}  // namespace collperf
