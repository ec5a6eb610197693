#include "report.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "coll/coll.h"
#include "tools_common.h"

namespace collflight {
namespace {

struct Op {
  uint64_t seq = 0;
  std::string name;
  uint64_t count = 0;
  int type = 0, op = 0, root = -1;
  std::string state;
  double seconds = 0;  // how long it ran (until the dump, if still running)
};

// "collAllReduce(count 1024, float32, sum)": what must be equal on every rank.
std::string signature(const Op& o) {
  std::string s = fmt::format("{}(count {}", o.name, o.count);
  if (o.type >= 0 && o.type < collNumTypes)
    s += fmt::format(", {}", colltools::typeName(static_cast<collDataType_t>(o.type)));
  bool reduces = o.name == "collAllReduce" || o.name == "collReduce" || o.name == "collReduceScatter";
  if (reduces)
    s += o.op >= 0 && o.op < collNumOps ? fmt::format(", {}", colltools::opName(static_cast<collRedOp_t>(o.op)))
                                        : fmt::format(", op {}", o.op);
  if (o.name == "collBroadcast" || o.name == "collReduce") s += fmt::format(", root {}", o.root);
  if (o.name == "collSend" || o.name == "collRecv") s += fmt::format(", peer {}", o.root);
  return s + ")";
}

// Send and receive name different peers on each rank: only their kinds and counts are compared.
bool pointToPoint(const Op& o) { return o.name == "collSend" || o.name == "collRecv"; }

}  // namespace

std::string analyze(std::vector<nlohmann::json> files) {
  if (files.empty()) return "";
  std::sort(files.begin(), files.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a.value("rank", -1) < b.value("rank", -1); });
  int nranks = files[0].value("nranks", 0);
  std::string out = fmt::format("communicator {} ({} ranks)\n", files[0].value("comm", "?"), nranks);
  std::map<int, std::map<uint64_t, Op>> ops;  // rank -> seq -> op
  std::map<int, uint64_t> started;            // rank -> operations started
  for (const auto& f : files) {
    int rank = f.value("rank", -1);
    started[rank] = f.value("next_seq", uint64_t(1)) - 1;
    int64_t dumped = f.value("dumped_us", int64_t(0));
    for (const auto& j : f.value("ops", nlohmann::json::array())) {
      Op o;
      o.seq = j.value("seq", uint64_t(0));
      o.name = j.value("name", "");
      o.count = j.value("count", uint64_t(0));
      o.type = j.value("type", 0);
      o.op = j.value("op", 0);
      o.root = j.value("root", -1);
      o.state = j.value("state", "");
      int64_t end = j.value("end_us", int64_t(0));
      o.seconds = ((end > 0 ? end : dumped) - j.value("start_us", int64_t(0))) / 1e6;
      ops[rank][o.seq] = o;
    }
    out += fmt::format("  rank {} (pid {}): {} operations started; dumped because: {}\n", rank, f.value("pid", 0),
                       started[rank], f.value("reason", ""));
    for (auto it = ops[rank].rbegin(); it != ops[rank].rend(); ++it)
      if (it->second.state != "completed") {
        out += fmt::format("    #{} {} {} after {:.3f} s\n", it->second.seq, signature(it->second), it->second.state,
                           it->second.seconds);
        break;
      }
  }
  std::vector<int> missing;
  for (int r = 0; r < nranks; ++r)
    if (!ops.count(r)) missing.push_back(r);
  if (!missing.empty())
    out += fmt::format(
        "  no file from rank(s) {}: they died or were stopped before writing one, or were not run "
        "with COLL_FLIGHT_RECORDER_DIR\n",
        fmt::join(missing, ", "));

  // The first operation, by sequence number, that the ranks did not all call the same way.
  uint64_t lo = ~uint64_t(0), hi = 0;
  for (const auto& [rank, m] : ops)
    if (!m.empty()) lo = std::min(lo, m.begin()->first), hi = std::max(hi, m.rbegin()->first);
  for (uint64_t seq = lo; seq <= hi && lo != ~uint64_t(0); ++seq) {
    std::map<std::string, std::vector<int>> bySignature;
    std::vector<int> notYet;
    for (const auto& [rank, m] : ops) {
      auto it = m.find(seq);
      if (it != m.end()) {
        const Op& o = it->second;
        bySignature[pointToPoint(o) ? fmt::format("{}(count {})", o.name, o.count) : signature(o)].push_back(rank);
      } else if (started[rank] < seq) {
        notYet.push_back(rank);
      }
    }
    if (bySignature.size() > 1) {
      out += fmt::format("  ranks diverge at operation #{}:\n", seq);
      for (const auto& [sig, ranks] : bySignature)
        out += fmt::format("    rank(s) {}: {}\n", fmt::join(ranks, ", "), sig);
      return out;
    }
    if (!notYet.empty() && !bySignature.empty()) {
      out += fmt::format("  operation #{} ({}) was started by rank(s) {} but never by rank(s) {}\n", seq,
                         bySignature.begin()->first, fmt::join(bySignature.begin()->second, ", "),
                         fmt::join(notYet, ", "));
      return out;
    }
  }
  out += fmt::format("  the ranks' recorded operations agree (up to #{})\n", hi);
  return out;
}

}  // namespace collflight
