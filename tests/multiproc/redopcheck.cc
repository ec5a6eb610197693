#include "multiproc/redopcheck.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/reduce.h"

namespace colltest {
namespace {

using coll::kernels::typeSize;

enum class RColl { kAllReduce, kReduce, kReduceScatter };
const char* rcollName(RColl c) {
  return c == RColl::kAllReduce ? "all_reduce" : (c == RColl::kReduce ? "reduce" : "reduce_scatter");
}

bool isFloat8(collDataType_t t) { return t == collFloat8e4m3 || t == collFloat8e5m2; }
bool isFloat(collDataType_t t) {
  return t == collFloat16 || t == collFloat32 || t == collFloat64 || t == collBfloat16 || isFloat8(t);
}

// Element i of buf: integers as the low bytes of a two's complement value (so they wrap as the
// type does), floating types from an exactly representable double.
void putInt(void* buf, size_t i, collDataType_t t, uint64_t v) {
  std::memcpy(static_cast<char*>(buf) + i * typeSize(t), &v, typeSize(t));  // little-endian: the low bytes
}

void putReal(void* buf, size_t i, collDataType_t t, double x) {
  char* p = static_cast<char*>(buf) + i * typeSize(t);
  if (t == collFloat64) {
    std::memcpy(p, &x, 8);
  } else if (t == collFloat32) {
    float f = static_cast<float>(x);
    std::memcpy(p, &f, 4);
  } else if (isFloat8(t)) {
    uint8_t q = t == collFloat8e4m3 ? coll::kernels::floatToFloat8e4m3(static_cast<float>(x))
                                    : coll::kernels::floatToFloat8e5m2(static_cast<float>(x));
    std::memcpy(p, &q, 1);
  } else {
    uint16_t h = t == collFloat16 ? coll::kernels::floatToHalf(static_cast<float>(x))
                                  : coll::kernels::floatToBfloat16(static_cast<float>(x));
    std::memcpy(p, &h, 2);
  }
}

// Rank r's input element j for a PreMulSum: a small integer (unsigned types: 0..15, others -7..8;
// float8, exact only to 8 in e5m2: -2..2 on a quarter of the ranks, 0 elsewhere, so that scaled
// partial sums of up to 8 ranks stay exact).
int64_t smallValue(int r, size_t j, collDataType_t t) {
  if (isFloat8(t)) {
    static const int64_t kSmall[] = {-2, -1, 1, 2};
    return (static_cast<size_t>(r) + j) % 4 == 0 ? kSmall[(static_cast<size_t>(r) * 7 + j * 13) % 4] : 0;
  }
  int64_t v = static_cast<int64_t>((static_cast<size_t>(r) * 7 + j * 13) % 16);
  return (t == collUint8 || t == collUint32 || t == collUint64) ? v : v - 7;
}

// Rank r's scalar in phase p (0 or 1): integers r + 2 + p; floating types 0.5, 1 or 2, so that
// every product and partial sum of up to 4 ranks is exact even in bfloat16 (8 significant bits).
double scalarOf(int r, int p, collDataType_t t) {
  if (!isFloat(t)) return r + 2 + p;
  const double kPhase0[] = {0.5, 2, 1, 0.5}, kPhase1[] = {2, 0.5, 0.5, 1};
  return (p == 0 ? kPhase0 : kPhase1)[r % 4];
}

void putNumber(void* buf, size_t i, collDataType_t t, double x) {
  if (isFloat(t))
    putReal(buf, i, t, x);
  else
    putInt(buf, i, t, static_cast<uint64_t>(static_cast<int64_t>(x)));
}

// Rank r's input element j for a bitwise op: every bit of the type used (splitmix64).
uint64_t bits(int r, size_t j) {
  uint64_t z = static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ull + j * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// What element j of the reduction over n ranks must be, written into want[i].
struct Expect {
  collDataType_t type;
  int op;  // collBand..collBxor, or -1: a PreMulSum with scalars of `phase`
  int phase;
  int n;
  void operator()(void* want, size_t i, size_t j) const {
    if (op >= 0) {
      uint64_t acc = bits(0, j);
      for (int r = 1; r < n; ++r) {
        uint64_t v = bits(r, j);
        acc = op == collBand ? (acc & v) : (op == collBor ? (acc | v) : (acc ^ v));
      }
      return putInt(want, i, type, acc);
    }
    if (isFloat(type)) {
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += scalarOf(r, phase, type) * static_cast<double>(smallValue(r, j, type));
      return putReal(want, i, type, sum);
    }
    uint64_t sum = 0;  // wraps as the integer kernels do
    for (int r = 0; r < n; ++r)
      sum += static_cast<uint64_t>(static_cast<int64_t>(scalarOf(r, phase, type))) *
             static_cast<uint64_t>(smallValue(r, j, type));
    putInt(want, i, type, sum);
  }
};

class Checker {
 public:
  explicit Checker(collComm_t comm) : comm_(comm) {
    collCommCount(comm, &n_);
    collCommUserRank(comm, &r_);
  }

  int rank() const { return r_; }

  // One collective with op on this rank; `bitwise` says how the inputs are made; e computes the
  // expected values.
  std::string run(RColl c, collDataType_t t, collRedOp_t op, size_t count, bool inPlace, const Expect& e,
                  const std::string& label) {
    size_t es = typeSize(t);
    size_t sendCount = c == RColl::kReduceScatter ? count * n_ : count;
    int root = static_cast<int>((count + t) % n_);
    std::vector<char> sendStore(std::max<size_t>(1, sendCount * es)), recvStore(std::max<size_t>(1, count * es));
    std::memset(recvStore.data(), 0xa5, recvStore.size());  // poison
    char* send = sendStore.data();
    char* recv = recvStore.data();
    if (inPlace) {
      if (c == RColl::kReduceScatter)
        recv = send + static_cast<size_t>(r_) * count * es;
      else
        send = recv;
    }
    for (size_t j = 0; j < sendCount; ++j) {
      if (e.op >= 0)
        putInt(send, j, t, bits(r_, j));
      else
        putNumber(send, j, t, static_cast<double>(smallValue(r_, j, t)));
    }
    std::vector<char> sendCopy(send, send + sendCount * es);
    collResult_t rc = collSuccess;
    if (c == RColl::kAllReduce)
      rc = collAllReduce(send, recv, count, t, op, comm_, nullptr);
    else if (c == RColl::kReduce)
      rc = collReduce(send, recv, count, t, op, root, comm_, nullptr);
    else
      rc = collReduceScatter(send, recv, count, t, op, comm_, nullptr);
    std::string what =
        fmt::format("{} {} type {} op {} count {} {} root {} rank {}/{}", label, rcollName(c), static_cast<int>(t),
                    static_cast<int>(op), count, inPlace ? "in-place" : "out-of-place", root, r_, n_);
    if (rc != collSuccess) return what + ": " + collGetErrorString(rc) + ": " + collGetLastError(comm_);
    if (!inPlace && !sendCopy.empty() && std::memcmp(send, sendCopy.data(), sendCopy.size()) != 0)
      return what + ": the send buffer changed";
    if (c == RColl::kReduce && r_ != root) return "";
    std::vector<char> want(std::max<size_t>(1, count * es));
    size_t base = c == RColl::kReduceScatter ? static_cast<size_t>(r_) * count : 0;
    for (size_t i = 0; i < count; ++i) e(want.data(), i, base + i);
    for (size_t i = 0; i < count; ++i)
      if (std::memcmp(recv + i * es, want.data() + i * es, es) != 0)
        return fmt::format("{}: element {} of {} is wrong", what, i, count);
    return "";
  }

  // PreMulSum on type t: a HostImmediate op and a Device op (on a host variable changed between
  // its two runs), every collective and placement, each count.
  std::string preMulSum(collDataType_t t, const std::vector<size_t>& counts) {
    alignas(8) unsigned char immediate[8], device[8];
    putNumber(immediate, 0, t, scalarOf(r_, 0, t));
    collRedOp_t hostOp, devOp;
    if (collRedOpCreatePreMulSum(&hostOp, immediate, t, collScalarHostImmediate, comm_) != collSuccess)
      return std::string("create (immediate): ") + collGetLastError(comm_);
    putNumber(immediate, 0, t, 99);  // read at create: this value must never be used
    if (collRedOpCreatePreMulSum(&devOp, device, t, collScalarDevice, comm_) != collSuccess)
      return std::string("create (device): ") + collGetLastError(comm_);
    if (static_cast<int>(hostOp) < collNumOps || static_cast<int>(devOp) < collNumOps || hostOp == devOp)
      return fmt::format("ops {} and {} are not distinct dynamic ops", static_cast<int>(hostOp),
                         static_cast<int>(devOp));
    std::string err;
    for (RColl c : {RColl::kAllReduce, RColl::kReduce, RColl::kReduceScatter})
      for (size_t count : counts)
        for (bool inPlace : {false, true}) {
          if (err.empty()) err = run(c, t, hostOp, count, inPlace, Expect{t, -1, 0, n_}, "premulsum immediate");
          for (int phase : {1, 0}) {
            putNumber(device, 0, t, scalarOf(r_, phase, t));
            if (err.empty())
              err =
                  run(c, t, devOp, count, inPlace, Expect{t, -1, phase, n_}, fmt::format("premulsum device {}", phase));
          }
        }
    if (collRedOpDestroy(hostOp, comm_) != collSuccess || collRedOpDestroy(devOp, comm_) != collSuccess)
      return err.empty() ? std::string("destroy: ") + collGetLastError(comm_) : err;
    return err;
  }

  std::string bitwise(collDataType_t t, const std::vector<size_t>& counts) {
    for (collRedOp_t op : {collBand, collBor, collBxor})
      for (RColl c : {RColl::kAllReduce, RColl::kReduce, RColl::kReduceScatter})
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            std::string err = run(c, t, op, count, inPlace, Expect{t, static_cast<int>(op), 0, n_}, "bitwise");
            if (!err.empty()) return err;
          }
    return "";
  }

  // Each refusal: collInvalidArgument, a sentence containing `words` on `on`.
  std::string refused(collResult_t rc, collComm_t on, const std::string& words, const char* what) {
    if (rc != collInvalidArgument)
      return fmt::format("rank {}: {}: got {} instead of collInvalidArgument", r_, what, collGetErrorString(rc));
    std::string text = collGetLastError(on);
    if (text.empty() || text.find(words) == std::string::npos)
      return fmt::format("rank {}: {}: the last error '{}' does not say '{}'", r_, what, text, words);
    return "";
  }

  std::string refusals() {
    float f[4] = {1, 2, 3, 4}, fout[4];
    int32_t i32[4] = {1, 2, 3, 4}, iout[4];
    float two = 2;
    collRedOp_t op;
    std::string e;
    auto keep = [&](std::string s) {
      if (e.empty()) e = std::move(s);
    };
    if (collRedOpCreatePreMulSum(&op, &two, collFloat32, collScalarHostImmediate, comm_) != collSuccess)
      return std::string("create: ") + collGetLastError(comm_);

    // Another communicator (a split with the same ranks), which holds no op.
    collComm_t other = nullptr;
    if (collCommSplit(comm_, 0, r_, &other, nullptr) != collSuccess)
      return std::string("split: ") + collGetLastError(comm_);
    keep(refused(collAllReduce(f, fout, 4, collFloat32, op, other, nullptr), other, "collRedOpCreatePreMulSum",
                 "a PreMulSum op on another communicator"));
    keep(refused(collRedOpDestroy(op, other), other, "not made by collRedOpCreatePreMulSum on this communicator",
                 "destroying an op on another communicator"));
    // Another type: reduce and reduce-scatter too.
    keep(refused(collAllReduce(i32, iout, 4, collInt32, op, comm_, nullptr), comm_,
                 "for collFloat32 and cannot reduce collInt32", "a float32 PreMulSum op on int32 (all-reduce)"));
    keep(refused(collReduce(i32, iout, 4, collInt32, op, 0, comm_, nullptr), comm_, "cannot reduce collInt32",
                 "a float32 PreMulSum op on int32 (reduce)"));
    keep(refused(collReduceScatter(i32, iout, 1, collInt32, op, comm_, nullptr), comm_, "cannot reduce collInt32",
                 "a float32 PreMulSum op on int32 (reduce-scatter)"));
    // Destroyed.
    if (collRedOpDestroy(op, comm_) != collSuccess) keep(std::string("destroy: ") + collGetLastError(comm_));
    keep(refused(collAllReduce(f, fout, 4, collFloat32, op, comm_, nullptr), comm_, "destroyed",
                 "a destroyed PreMulSum op"));
    keep(refused(collRedOpDestroy(op, comm_), comm_, "destroyed already", "destroying an op twice"));
    // Bitwise on every floating type.
    for (collDataType_t t : {collFloat16, collFloat32, collFloat64, collBfloat16, collFloat8e4m3, collFloat8e5m2})
      for (collRedOp_t b : {collBand, collBor, collBxor}) {
        std::string words = fmt::format("{} is a bitwise op, for the integer types only", b == collBand  ? "collBand"
                                                                                          : b == collBor ? "collBor"
                                                                                                         : "collBxor");
        keep(refused(collAllReduce(f, fout, 1, t, b, comm_, nullptr), comm_, words, "a bitwise op on a floating type"));
      }
    keep(refused(collReduceScatter(f, fout, 1, collFloat32, collBxor, comm_, nullptr), comm_, "not collFloat32",
                 "collBxor on float32 (reduce-scatter)"));
    keep(refused(collReduce(f, fout, 1, collFloat64, collBor, 0, comm_, nullptr), comm_, "not collFloat64",
                 "collBor on float64 (reduce)"));
    // Bad create and destroy arguments.
    keep(refused(collRedOpCreatePreMulSum(nullptr, &two, collFloat32, collScalarHostImmediate, comm_), comm_,
                 "op is NULL", "create with op NULL"));
    keep(refused(collRedOpCreatePreMulSum(&op, nullptr, collFloat32, collScalarDevice, comm_), comm_, "scalar is NULL",
                 "create with scalar NULL"));
    keep(refused(collRedOpCreatePreMulSum(&op, &two, static_cast<collDataType_t>(12), collScalarHostImmediate, comm_),
                 comm_, "datatype 12", "create with datatype 12"));
    keep(refused(collRedOpCreatePreMulSum(&op, &two, collFloat32, static_cast<collScalarResidence_t>(2), comm_), comm_,
                 "residence 2", "create with residence 2"));
    keep(refused(collRedOpDestroy(collSum, comm_), comm_, "collSum is a built-in op", "destroying collSum"));
    keep(refused(collRedOpDestroy(collBxor, comm_), comm_, "collBxor is a built-in op", "destroying collBxor"));

    // Nothing above sent anything or broke a communicator: both still reduce.
    for (collComm_t c : {comm_, other}) {
      float x = static_cast<float>(r_ + 1), sum = -1;
      if (collAllReduce(&x, &sum, 1, collFloat32, collSum, c, nullptr) != collSuccess)
        keep(std::string("an all-reduce after the refusals: ") + collGetLastError(c));
      else if (sum != static_cast<float>(n_ * (n_ + 1) / 2))
        keep(fmt::format("an all-reduce after the refusals gave {}", sum));
    }
    // Ops still held when a communicator is destroyed are freed with it.
    for (int k = 0; k < 3; ++k) collRedOpCreatePreMulSum(&op, &two, collFloat32, collScalarHostImmediate, other);
    // Finalized first: destroy alone is local, and a rank that finished its all-reduce on the split
    // would close connections a peer may still be reading its last slots from (coll.h).
    if (collCommFinalize(other) != collSuccess) keep(std::string("finalize the split: ") + collGetLastError(other));
    if (collCommDestroy(other) != collSuccess) keep(std::string("destroy the split: ") + collGetLastError(nullptr));
    return e;
  }

 private:
  collComm_t comm_;
  int n_ = 0, r_ = 0;
};

}  // namespace

std::string runRedOpChecks(collComm_t comm, const std::vector<size_t>& counts, size_t bigCount) {
  Checker k(comm);
  for (int t = 0; t < collNumTypes; ++t) {
    std::string e = k.preMulSum(static_cast<collDataType_t>(t), counts);
    if (e.empty() && !isFloat(static_cast<collDataType_t>(t))) e = k.bitwise(static_cast<collDataType_t>(t), counts);
    if (!e.empty()) return e;
  }
  if (bigCount) {
    for (collDataType_t t : {collFloat32, collBfloat16, collInt64}) {
      std::string e = k.preMulSum(t, {bigCount});
      if (!e.empty()) return e;
    }
    for (collDataType_t t : {collUint8, collInt32}) {
      std::string e = k.bitwise(t, {bigCount});
      if (!e.empty()) return e;
    }
  }
  return k.refusals();
}

}  // namespace colltest
