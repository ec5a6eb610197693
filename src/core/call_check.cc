#include "core/call_check.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "core/enqueue.h"
#include "core/redop.h"
#include "transport/fifo.h"

namespace coll {
namespace {

const char* kindName(int kind) {
  static const char* names[] = {"collAllReduce",     "collBroadcast", "collReduce", "collAllGather",
                                "collReduceScatter", "collAllToAll",  "collSend",   "collRecv"};
  return kind >= 0 && kind < 8 ? names[kind] : "?";
}

bool reduces(int kind) {
  auto k = static_cast<OpKind>(kind);
  return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter;
}

bool rooted(int kind) {
  auto k = static_cast<OpKind>(kind);
  return k == OpKind::kBroadcast || k == OpKind::kReduce;
}

}  // namespace

CallPrint callPrint(const OpArgs& a, uint64_t seq) {
  CallPrint p;
  std::memset(&p, 0, sizeof(p));
  p.seq = seq;
  p.kind = static_cast<int32_t>(a.kind);
  p.type = a.type;
  p.op = reduces(p.kind) ? a.op : -1;  // what a call does not use may differ between ranks
  p.root = rooted(p.kind) ? a.root : -1;
  p.count = a.count;
  return p;
}

std::string describeCall(const CallPrint& p) {
  std::string s = fmt::format("{}(count {}, {}", kindName(p.kind), p.count, typeName(p.type));
  if (p.op >= 0) s += fmt::format(", {}", opName(p.op));
  if (p.root >= 0) s += fmt::format(", root {}", p.root);
  return s + fmt::format(") as collective #{}", p.seq);
}

bool parseCallChecks(const std::string& text, CallChecks* out) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t.empty() || t == "inband" || t == "in-band") {
    *out = CallChecks::kInBand;
  } else if (t == "0" || t == "off" || t == "false" || t == "no") {
    *out = CallChecks::kOff;
  } else if (t == "1" || t == "full" || t == "true" || t == "yes") {
    *out = CallChecks::kFull;
  } else {
    return false;
  }
  return true;
}

namespace {

constexpr uint64_t kCountMax = (uint64_t(1) << 40) - 1;

struct Decoded {
  int kind, type, op, root, pos;
  uint64_t count, seq;
};

Decoded decode(const WirePrint& w) {
  Decoded d;
  d.kind = static_cast<int>((w.a >> 8) & 0xf);
  d.type = static_cast<int>((w.a >> 12) & 0x1f);
  d.op = static_cast<int>((w.a >> 17) & 0xff);
  d.root = static_cast<int>((w.a >> 25) & 0xffff);
  d.pos = static_cast<int>((w.a >> 57) & 0x7f);
  d.count = w.b & kCountMax;
  d.seq = w.b >> 40;
  return d;
}

// "allreduce(collSum, float32, count 1024)": the call as a print describes it.
std::string describe(const Decoded& d) {
  std::string name = kindName(d.kind);
  if (name.rfind("coll", 0) == 0) name = name.substr(4);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string s = name + "(";
  if (reduces(d.kind)) s += opName(d.op) + ", ";
  s += typeName(d.type);
  s += d.count == kCountMax ? fmt::format(", count {} or more", kCountMax) : fmt::format(", count {}", d.count);
  if (rooted(d.kind)) s += fmt::format(", root {}", d.root);
  return s + ")";
}

}  // namespace

WirePrint wirePrint(const OpArgs& a, uint64_t seq, int pos) {
  int kind = static_cast<int>(a.kind);
  uint64_t op = reduces(kind) ? static_cast<uint64_t>(a.op) & 0xff : 0xff;
  uint64_t root = rooted(kind) ? static_cast<uint64_t>(a.root) & 0xffff : 0xffff;
  WirePrint w;
  w.a = uint64_t(transport::kPrintMagic) | (uint64_t(kind & 0xf) << 8) | (uint64_t(a.type & 0x1f) << 12) | (op << 17) |
        (root << 25) | (uint64_t(pos & 0x7f) << 57);
  w.b = std::min<uint64_t>(a.count, kCountMax) | ((seq & 0xffffff) << 40);
  return w;
}

WirePrint p2pPrint(uint64_t bytes, uint64_t ordinal) {
  // Kind collSend on both ends, bytes as the count; the type does not matter (NCCL matches bytes).
  WirePrint w;
  w.a = uint64_t(transport::kPrintMagic) | (uint64_t(static_cast<int>(OpKind::kSend) & 0xf) << 8) | (0xffull << 17) |
        (0xffffull << 25);
  w.b = std::min<uint64_t>(bytes, kCountMax) | ((ordinal & 0xffffff) << 40);
  return w;
}

bool sameCollective(const void* a, const void* b) {
  WirePrint x, y;
  std::memcpy(&x, a, sizeof(x));
  std::memcpy(&y, b, sizeof(y));
  return decode(x).seq == decode(y).seq;
}

std::string describeMismatch(const void* mine, const void* theirs, int rank, int peer, const char* opName) {
  WirePrint m, t;
  std::memcpy(&m, mine, sizeof(m));
  std::memcpy(&t, theirs, sizeof(t));
  Decoded a = decode(m), b = decode(t);
  // The peer's number of collectives, from its low 24 bits, nearest to this rank's.
  int64_t diff = static_cast<int64_t>((b.seq - a.seq) & 0xffffff);
  if (diff >= (1 << 23)) diff -= 1 << 24;
  uint64_t mySeq = a.seq, theirSeq = a.seq + static_cast<uint64_t>(diff);
  const bool mineP2P = a.kind == static_cast<int>(OpKind::kSend), theirsP2P = b.kind == static_cast<int>(OpKind::kSend);
  if (mineP2P && theirsP2P) {
    // This rank receives (only receivers compare), the peer sends.
    if (diff != 0)
      return fmt::format(
          "{}: rank {}'s receive #{} from rank {} met that rank's send #{} to it: a rank skipped a send or a "
          "receive, or made one more (COLL_CHECK_CALLS)",
          opName, rank, mySeq, peer, theirSeq);
    return fmt::format(
        "{}: rank {}'s receive #{} from rank {} expects {} bytes while that rank's send #{} has {} bytes: the ranks "
        "called them with different counts or types (COLL_CHECK_CALLS)",
        opName, rank, mySeq, peer, a.count, theirSeq, b.count);
  }
  if (mineP2P != theirsP2P)
    return fmt::format("{}: rank {} {} while rank {} {} (COLL_CHECK_CALLS)", opName, rank,
                       mineP2P ? fmt::format("receives (#{} from rank {}, {} bytes)", mySeq, peer, a.count)
                               : fmt::format("called {} as collective #{}", describe(a), mySeq),
                       peer,
                       theirsP2P ? fmt::format("sends (#{} to it, {} bytes)", theirSeq, b.count)
                                 : fmt::format("called {} as collective #{}", describe(b), theirSeq));
  if (diff != 0)
    return fmt::format(
        "{}: rank {} is at collective #{} of this communicator ({}) while rank {} is at collective #{} ({}): a rank "
        "skipped a collective or made one more (COLL_CHECK_CALLS)",
        opName, rank, mySeq, describe(a), peer, theirSeq, describe(b));
  std::string where = a.pos != b.pos ? fmt::format(" (positions {} and {} in their groups)", a.pos, b.pos) : "";
  return fmt::format(
      "{}: rank {} called {} while rank {} called {}, collective #{} of this communicator{} "
      "(COLL_CHECK_CALLS)",
      opName, rank, describe(a), peer, describe(b), mySeq, where);
}

std::string comparePrints(const CallPrint* prints, int nranks) {
  for (int r = 1; r < nranks; ++r)
    if (std::memcmp(&prints[r], &prints[0], sizeof(CallPrint)) != 0)
      return fmt::format(
          "the ranks called different collectives (COLL_CHECK_CALLS): rank 0 called {}, rank {} "
          "called {}",
          describeCall(prints[0]), r, describeCall(prints[r]));
  return "";
}

}  // namespace coll
