// Correctness checks of the collectives, run by every rank of a communicator at once (threads or
// processes). Inputs are small integers (or 1/2/-1 for products), so that every order of
// reduction gives the same bits in every type; outputs are poisoned first and compared in full.
#pragma once

#include <functional>
#include <string>

#include "coll/coll.h"

namespace colltest {

enum class Coll {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kGather,
  kScatter
};
const char* collName(Coll c);

struct Case {
  Coll coll;
  collDataType_t type;
  collRedOp_t op;
  size_t count;
  bool inPlace;
  int root;
};

/// Where a case's buffers live and which stream its calls use, for device tests (the emulated
/// device in CI, a GPU on the device machine). Without it: host memory and the NULL stream.
struct Memory {
  std::function<void*(size_t)> alloc;  // device memory of this rank's device
  std::function<void(void*)> release;
  std::function<void(void*, const void*, size_t)> copy;  // any direction; done when it returns
  collStream_t stream = nullptr;
  std::function<std::string()> sync;  // waits for the stream; "" or what failed
};

/// A Memory whose alloc hands out pieces of one region [base, base + bytes) made once by the
/// caller, and whose release frees them all when the last is released. Device tests use it so
/// that no cudaMalloc or cudaFree runs between cases: on one GPU shared by ranks as threads, such
/// a call can wait forever for a peer's kernel that waits for this rank (NCCL's rule too).
Memory arenaMemory(char* base, size_t bytes, std::function<void(void*, const void*, size_t)> copy, collStream_t stream,
                   std::function<std::string()> sync);

/// Runs one case on this rank and checks every output element. "" when correct. With mem, the
/// inputs and the poisoned outputs are copied into its memory, the calls go on its stream, and
/// the outputs are copied back after mem->sync() and collCommGetAsyncError.
std::string runCase(collComm_t comm, const Case& c, const Memory* mem = nullptr);

}  // namespace colltest
