#include "collectives.h"

#include <algorithm>
#include <cstring>

#include "options.h"
#include "tools_common.h"

namespace collperf {
namespace {

bool isUnsigned(collDataType_t t) { return t == collUint8 || t == collUint32 || t == collUint64; }

// Rank p's input element j. Small integers, so every partial sum is exact in every type (bfloat16
// has 8 significant bits: a narrower range; float8 e5m2 has 3, exact to 8: a quarter of the ranks
// give each element one of -2, -1, 1, 2 and the rest 0, so that up to 16 ranks sum exactly);
// products are of 1, -1 and 2, so every partial product is a power of two in magnitude: exact
// (float8 saturates past 2^15 or 448: the products stay below at the rank counts tests run), and
// integer wrap-around agrees in any order.
double value(int p, size_t j, collDataType_t t, collRedOp_t op) {
  size_t k = static_cast<size_t>(p) * 7 + j * 13;
  if (op == collProd) {
    if ((static_cast<size_t>(p) + j) % 8 == 0) return 2;
    return !isUnsigned(t) && (static_cast<size_t>(p) * 3 + j) % 5 == 0 ? -1 : 1;
  }
  if (isUnsigned(t)) return static_cast<double>(k % 16);
  if (t == collBfloat16) return static_cast<double>(k % 8) - 3;
  if (t == collFloat8e4m3 || t == collFloat8e5m2) {
    static const double kSmall[] = {-2, -1, 1, 2};
    return (static_cast<size_t>(p) + j) % 4 == 0 ? kSmall[k % 4] : 0;
  }
  return static_cast<double>(k % 16) - 7;
}

double reduceAll(size_t j, const Call& c) {
  double acc = value(0, j, c.type, c.op);
  for (int p = 1; p < c.nranks; ++p) {
    double v = value(p, j, c.type, c.op);
    switch (c.op) {
      case collProd:
        acc *= v;
        break;
      case collMax:
        acc = std::max(acc, v);
        break;
      case collMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
    }
  }
  return c.op == collAvg ? colltools::averageOf(acc, c.nranks, c.type) : acc;
}

// Where the call reads and writes, by NCCL's in-place rules.
struct Layout {
  char* in;
  char* out;
};

Layout layout(const Call& c, const Buffers& b, bool inPlace) {
  size_t e = colltools::typeBytes(c.type);
  if (!inPlace) return {b.send, b.recv};
  if (c.coll == Coll::kAllGather) return {b.recv + c.rank * c.shape.paramCount * e, b.recv};
  if (c.coll == Coll::kReduceScatter) return {b.recv, b.recv + c.rank * c.shape.paramCount * e};
  return {b.recv, b.recv};
}

// The exact value of output element i on this rank.
double expected(const Call& c, size_t i) {
  size_t pc = c.shape.paramCount;
  int n = c.nranks;
  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      return reduceAll(i, c);
    case Coll::kBroadcast:
      return value(c.root, i, c.type, c.op);
    case Coll::kAllGather:
      return value(static_cast<int>(i / pc), i % pc, c.type, c.op);
    case Coll::kReduceScatter:
      return reduceAll(c.rank * pc + i, c);
    case Coll::kAllToAll:
      return value(static_cast<int>(i / pc), c.rank * pc + i % pc, c.type, c.op);
    case Coll::kSendRecv:
      break;
  }
  return value((c.rank - 1 + n) % n, i, c.type, c.op);
}

bool receives(const Call& c) { return c.coll != Coll::kReduce || c.rank == c.root; }
bool sends(const Call& c) { return c.coll != Coll::kBroadcast || c.rank == c.root; }

}  // namespace

Coll collFromName(const std::string& name) {
  const auto& names = collectiveNames();  // in Coll's order
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Coll>(i);
  return Coll::kSendRecv;
}

Shape shapeFor(const std::string& coll, size_t bytes, size_t e, int n) {
  Shape s;
  size_t count = bytes / e;
  bool split = coll == "all_gather" || coll == "reduce_scatter" || coll == "alltoall";
  if (split) count = count / n * n;
  s.count = count;
  s.bytes = count * e;
  s.paramCount = split ? count / n : count;
  s.sendElems = coll == "all_gather" ? s.paramCount : count;
  s.recvElems = coll == "reduce_scatter" ? s.paramCount : count;
  return s;
}

collResult_t runOnce(const Call& c, const Buffers& b, bool inPlace) {
  Layout l = layout(c, b, inPlace);
  size_t n = c.shape.paramCount;
  switch (c.coll) {
    case Coll::kAllReduce:
      return collAllReduce(l.in, l.out, n, c.type, c.op, c.comm, c.stream);
    case Coll::kAllGather:
      return collAllGather(l.in, l.out, n, c.type, c.comm, c.stream);
    case Coll::kReduceScatter:
      return collReduceScatter(l.in, l.out, n, c.type, c.op, c.comm, c.stream);
    case Coll::kBroadcast:
      return collBroadcast(l.in, l.out, n, c.type, c.root, c.comm, c.stream);
    case Coll::kReduce:
      return collReduce(l.in, l.out, n, c.type, c.op, c.root, c.comm, c.stream);
    case Coll::kAllToAll:
      return collAllToAll(l.in, l.out, n, c.type, c.comm, c.stream);
    case Coll::kSendRecv:
      break;
  }
  // sendrecv: ring shift by one.
  collResult_t rc = collGroupStart();
  if (rc != collSuccess) return rc;
  collResult_t s = collSend(l.in, n, c.type, (c.rank + 1) % c.nranks, c.comm, c.stream);
  collResult_t r = collRecv(l.out, n, c.type, (c.rank - 1 + c.nranks) % c.nranks, c.comm, c.stream);
  rc = collGroupEnd();
  return s != collSuccess ? s : (r != collSuccess ? r : rc);
}

void prepare(const Call& c, const Buffers& b, bool inPlace) {
  size_t e = colltools::typeBytes(c.type);
  Layout l = layout(c, b, inPlace);
  // Poison first: in place, the input is then written over its part of the poisoned buffer.
  std::memset(l.out, 0xa5, c.shape.recvElems * e);
  if (!sends(c)) return;
  for (size_t j = 0; j < c.shape.sendElems; ++j) colltools::storeValue(l.in, j, c.type, value(c.rank, j, c.type, c.op));
}

int64_t countWrong(const Call& c, const Buffers& b, bool inPlace) {
  if (!receives(c)) return 0;
  size_t e = colltools::typeBytes(c.type);
  const char* out = layout(c, b, inPlace).out;
  char want[8];
  int64_t wrong = 0;
  for (size_t i = 0; i < c.shape.recvElems; ++i) {
    colltools::storeValue(want, 0, c.type, expected(c, i));
    wrong += std::memcmp(out + i * e, want, e) != 0;
  }
  return wrong;
}

}  // namespace collperf
