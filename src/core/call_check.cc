#include "core/call_check.h"

#include <cstring>

#include <fmt/format.h>

#include "core/enqueue.h"
#include "core/redop.h"

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
