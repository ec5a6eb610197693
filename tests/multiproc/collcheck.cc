#include "multiproc/collcheck.h"

#include <memory>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "tools_common.h"

namespace colltest {
namespace {

using coll::kernels::typeSize;

// Rank r's input element j, as an exact integer.
bool isFloat8(collDataType_t t) { return t == collFloat8e4m3 || t == collFloat8e5m2; }

int64_t value(int r, size_t j, collRedOp_t op, collDataType_t t) {
  bool isSigned = t != collUint8 && t != collUint32 && t != collUint64;
  if (isFloat8(t) && op != collProd) {
    // float8 e5m2 is exact only to 8: a quarter of the ranks give each element one of -2, -1, 1,
    // 2 and the rest 0, so that every partial sum of up to 16 ranks is exact in any order.
    static const int64_t kSmall[] = {-2, -1, 1, 2};
    return (static_cast<size_t>(r) + j) % 4 == 0 ? kSmall[(static_cast<size_t>(r) * 7 + j * 13) % 4] : 0;
  }
  if (op == collProd) {
    int64_t v = 1 + static_cast<int64_t>((r + j) % 2);
    return (isSigned && (r * 3 + j) % 5 == 0) ? -v : v;
  }
  int64_t v = static_cast<int64_t>((static_cast<size_t>(r) * 7 + j * 13) % 16);
  return isSigned ? v - 7 : v;
}

bool isFloat(collDataType_t t) {
  return t == collFloat16 || t == collFloat32 || t == collFloat64 || t == collBfloat16 || isFloat8(t);
}

// Writes x (an integer, or for collAvg on floats the exact quotient) into element i of buf: the
// same encoder coll-perf uses.
void store(void* buf, size_t i, collDataType_t t, double x) { colltools::storeValue(buf, i, t, x); }

// The reduction of element j over all ranks, as the library must produce it.
void expectReduced(void* out, size_t i, collDataType_t t, collRedOp_t op, int n, size_t j) {
  int64_t acc = value(0, j, op, t);
  uint64_t prod = static_cast<uint64_t>(acc);
  for (int r = 1; r < n; ++r) {
    int64_t v = value(r, j, op, t);
    if (op == collMax)
      acc = std::max(acc, v);
    else if (op == collMin)
      acc = std::min(acc, v);
    else if (op == collProd)
      prod *= static_cast<uint64_t>(v);  // wraps like the integer kernels
    else
      acc += v;
  }
  if (op == collProd) acc = static_cast<int64_t>(prod);
  if (op != collAvg) return store(out, i, t, static_cast<double>(acc));
  if (!isFloat(t)) {
    // Integer average: the wrapped sum in the type, then C division, as NCCL.
    std::vector<char> tmp(8);
    store(tmp.data(), 0, t, static_cast<double>(acc));
    std::memcpy(static_cast<char*>(out) + i * typeSize(t), tmp.data(), typeSize(t));
    coll::kernels::finishAverage(static_cast<char*>(out) + i * typeSize(t), 1, t, n);
    return;
  }
  if (t == collFloat64) return store(out, i, t, static_cast<double>(acc) / n);
  // float32, float16, bfloat16 and float8 divide in float32, then round once.
  float q = static_cast<float>(acc) / static_cast<float>(n);
  store(out, i, t, q);
}

}  // namespace

const char* collName(Coll c) {
  const char* names[] = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                         "alltoall",   "sendrecv",  "gather", "scatter"};
  return names[static_cast<int>(c)];
}

Memory arenaMemory(char* base, size_t bytes, std::function<void(void*, const void*, size_t)> copy, collStream_t stream,
                   std::function<std::string()> sync) {
  struct Arena {
    char* base;
    size_t bytes;
    size_t used = 0;
    int outstanding = 0;
  };
  auto arena = std::make_shared<Arena>(Arena{base, bytes});
  Memory m;
  m.alloc = [arena](size_t n) -> void* {
    size_t at = (arena->used + 255) & ~size_t(255);
    if (at + n > arena->bytes) return nullptr;
    arena->used = at + n;
    ++arena->outstanding;
    return arena->base + at;
  };
  m.release = [arena](void* p) {
    if (p && --arena->outstanding == 0) arena->used = 0;
  };
  m.copy = std::move(copy);
  m.stream = stream;
  m.sync = std::move(sync);
  return m;
}

std::string runCase(collComm_t comm, const Case& c, const Memory* mem) {
  int n = 0, r = 0;
  collCommCount(comm, &n);
  collCommUserRank(comm, &r);
  size_t es = typeSize(c.type), count = c.count;
  const bool sendsBlocks = c.coll == Coll::kReduceScatter || c.coll == Coll::kAllToAll || c.coll == Coll::kScatter;
  const bool receivesBlocks = c.coll == Coll::kAllGather || c.coll == Coll::kAllToAll || c.coll == Coll::kGather;
  size_t sendCount = sendsBlocks ? count * n : count;
  size_t recvCount = receivesBlocks ? count * n : count;
  std::vector<char> sendStore(std::max<size_t>(1, sendCount * es)), recvStore(std::max<size_t>(1, recvCount * es));
  std::memset(recvStore.data(), 0xa5, recvStore.size());  // poison
  char* send = sendStore.data();
  char* recv = recvStore.data();
  if (c.inPlace) {
    if (c.coll == Coll::kAllGather || c.coll == Coll::kGather)
      send = recv + static_cast<size_t>(r) * count * es;
    else if (c.coll == Coll::kReduceScatter || c.coll == Coll::kScatter)
      recv = send + static_cast<size_t>(r) * count * es;  // the result lands inside the input
    else
      send = recv;
  }
  for (size_t j = 0; j < sendCount; ++j) store(send, j, c.type, static_cast<double>(value(r, j, c.op, c.type)));
  // Device memory mirrors both stores; the call's pointers keep their offsets into them.
  char* hostSend = send;
  char* hostRecv = recv;
  char *devSend = nullptr, *devRecv = nullptr;
  collStream_t stream = nullptr;
  if (mem) {
    devSend = static_cast<char*>(mem->alloc(sendStore.size()));
    devRecv = static_cast<char*>(mem->alloc(recvStore.size()));
    if (!devSend || !devRecv) return "device memory could not be allocated";
    mem->copy(devSend, sendStore.data(), sendStore.size());
    mem->copy(devRecv, recvStore.data(), recvStore.size());
    auto onDevice = [&](char* p) {
      bool inSend = p >= sendStore.data() && p < sendStore.data() + sendStore.size();
      return inSend ? devSend + (p - sendStore.data()) : devRecv + (p - recvStore.data());
    };
    send = onDevice(send);
    recv = onDevice(recv);
    stream = mem->stream;
  }

  collResult_t rc = collSuccess;
  switch (c.coll) {
    case Coll::kAllReduce:
      rc = collAllReduce(send, recv, count, c.type, c.op, comm, stream);
      break;
    case Coll::kBroadcast:
      rc = collBroadcast(send, recv, count, c.type, c.root, comm, stream);
      break;
    case Coll::kReduce:
      rc = collReduce(send, recv, count, c.type, c.op, c.root, comm, stream);
      break;
    case Coll::kAllGather:
      rc = collAllGather(send, recv, count, c.type, comm, stream);
      break;
    case Coll::kReduceScatter:
      rc = collReduceScatter(send, recv, count, c.type, c.op, comm, stream);
      break;
    case Coll::kAllToAll:
      rc = collAllToAll(send, recv, count, c.type, comm, stream);
      break;
    case Coll::kSendRecv:
      collGroupStart();
      collSend(send, count, c.type, (r + 1) % n, comm, stream);
      collRecv(recv, count, c.type, (r + n - 1) % n, comm, stream);
      rc = collGroupEnd();
      break;
    case Coll::kGather:
      rc = collGather(send, recv, count, c.type, c.root, comm, stream);
      break;
    case Coll::kScatter:
      rc = collScatter(send, recv, count, c.type, c.root, comm, stream);
      break;
  }
  std::string what = fmt::format("{} type {} op {} count {} {} root {} rank {}/{}", collName(c.coll), c.type, c.op,
                                 count, c.inPlace ? "in-place" : "out-of-place", c.root, r, n);
  if (rc != collSuccess) {
    if (mem) mem->release(devSend), mem->release(devRecv);
    return what + ": " + collGetErrorString(rc) + ": " + collGetLastError(comm);
  }
  if (mem) {
    // The call returned once enqueued: its result exists after the stream has passed it.
    std::string failed = mem->sync();
    collResult_t async = collSuccess;
    collCommGetAsyncError(comm, &async);
    if (failed.empty() && async != collSuccess)
      failed = std::string(collGetErrorString(async)) + ": " + collGetLastError(comm);
    if (failed.empty()) {
      mem->copy(sendStore.data(), devSend, sendStore.size());
      mem->copy(recvStore.data(), devRecv, recvStore.size());
    }
    mem->release(devSend);
    mem->release(devRecv);
    if (!failed.empty()) return what + ": " + failed;
    recv = hostRecv;
  }
  (void)hostSend;
  if ((c.coll == Coll::kReduce || c.coll == Coll::kGather) && r != c.root) return "";

  std::vector<char> want(std::max<size_t>(1, recvCount * es));
  for (size_t i = 0; i < recvCount; ++i) {
    switch (c.coll) {
      case Coll::kAllReduce:
      case Coll::kReduce:
        expectReduced(want.data(), i, c.type, c.op, n, i);
        break;
      case Coll::kReduceScatter:
        expectReduced(want.data(), i, c.type, c.op, n, static_cast<size_t>(r) * count + i);
        break;
      case Coll::kBroadcast:
        store(want.data(), i, c.type, static_cast<double>(value(c.root, i, c.op, c.type)));
        break;
      case Coll::kAllGather:
        store(want.data(), i, c.type, static_cast<double>(value(static_cast<int>(i / count), i % count, c.op, c.type)));
        break;
      case Coll::kAllToAll:
        store(want.data(), i, c.type,
              static_cast<double>(
                  value(static_cast<int>(i / count), static_cast<size_t>(r) * count + i % count, c.op, c.type)));
        break;
      case Coll::kSendRecv:
        store(want.data(), i, c.type, static_cast<double>(value((r + n - 1) % n, i, c.op, c.type)));
        break;
      case Coll::kGather:
        store(want.data(), i, c.type, static_cast<double>(value(static_cast<int>(i / count), i % count, c.op, c.type)));
        break;
      case Coll::kScatter:
        store(want.data(), i, c.type,
              static_cast<double>(value(c.root, static_cast<size_t>(r) * count + i, c.op, c.type)));
        break;
    }
  }
  for (size_t i = 0; i < recvCount; ++i) {
    if (std::memcmp(recv + i * es, want.data() + i * es, es) != 0)
      return fmt::format("{}: element {} of {} is wrong", what, i, recvCount);
  }
  return "";
}

}  // namespace colltest
