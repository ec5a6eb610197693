#include "core/tuning.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "topo/paths.h"

namespace coll {
namespace {

// COLL_TUNER_MODEL: "key=value,..." over the model's constants.
Status applyOverrides(const std::string& spec, algorithms::CostModel* m) {
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    start = end + 1;
    size_t eq = item.find('=');
    char* stop = nullptr;
    double v = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &stop);
    if (eq == std::string::npos || !stop || *stop || !(v > 0))
      return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_TUNER_MODEL={}: '{}' is not key=positive-number"), spec,
                        item);
    std::string key = item.substr(0, eq);
    algorithms::Algorithm a;
    if (key == "alpha")
      m->alphaUs = v;
    else if (key == "beta")
      m->betaGBs = v;
    else if (key == "gamma")
      m->gammaGBs = v;
    else if (key == "switch")
      m->switchUs = v;
    else if (key == "contention")
      m->contention = v;
    else if (key == "hier_chunk")
      m->hierChunkBytes = static_cast<size_t>(v);
    else if (algorithms::algorithmFromName(key, &a))
      m->stepWeight[static_cast<int>(a)] = v;
    else if (key.size() > 3 && key.compare(key.size() - 3, 3, "_bw") == 0 &&
             algorithms::algorithmFromName(key.substr(0, key.size() - 3), &a))
      m->bwWeight[static_cast<int>(a)] = v;
    else
      return COLL_ERROR(
          collInvalidArgument,
          FMT_STRING("COLL_TUNER_MODEL={}: unknown constant '{}' (alpha, beta, gamma, switch, contention, "
                     "hier_chunk, an algorithm's step weight, or <algorithm>_bw)"),
          spec, key);
  }
  return Status::ok();
}

// How many times a ring over `order` passes from one host to another.
int hostCrossings(const std::vector<bootstrap::RankInfo>& peers, const std::vector<int>& order) {
  int n = static_cast<int>(order.size()), crossings = 0;
  for (int p = 0; p < n; ++p) crossings += peers[order[p]].hostHash != peers[order[(p + 1) % n]].hostHash;
  return crossings;
}

// COLL_RING_ORDER: position -> rank, from what every rank told at init (so equal on all ranks).
Result<std::vector<int>> ringOrderFor(const collComm* comm) {
  std::string how = params::kRingOrder.get();
  if (how != "topo" && how != "rank")
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_RING_ORDER={}: expected 'topo' or 'rank'"), how);
  const auto& peers = comm->bootstrap->peers();
  std::vector<int> order(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) order[r] = r;
  if (how == "topo") {
    std::vector<topo::RankPlace> places;
    for (const auto& p : peers) places.push_back({std::to_string(p.hostHash), p.package, p.numa, p.cudaDev});
    order = topo::ringOrder(places);
  }
  if (comm->rank == 0 && log::enabled(log::Level::INFO, log::TOPO)) {
    std::vector<int> byRank(comm->nranks);
    for (int r = 0; r < comm->nranks; ++r) byRank[r] = r;
    COLL_LOG(INFO, TOPO, "ring ({}): {}; it crosses between hosts {} time(s), rank order would {}", how,
             fmt::join(order, " "), hostCrossings(peers, order), hostCrossings(peers, byRank));
  }
  return order;
}

// NCCL-style tree lines at INFO: "rank 5 trees: [0] 4->5->6/7 [1] ..." (parent->rank->children, in
// ranks, over the ring order: the trees are built on positions like the rings).
void logTrees(const collComm* comm, const std::vector<int>& order) {
  if (!log::enabled(log::Level::INFO, log::TOPO) || comm->nranks < 2) return;
  int n = comm->nranks;
  int pos = static_cast<int>(std::find(order.begin(), order.end(), comm->rank) - order.begin());
  auto name = [&](int p) { return p < 0 ? std::string("-1") : std::to_string(order[p]); };
  std::string text;
  for (int which = 0; which < 2; ++which) {
    algorithms::TreeNode t = algorithms::doubleBinaryTree(n, pos, which);
    text += fmt::format(" [{}] {}->{}->{}/{}", which, name(t.parent), comm->rank, name(t.child0), name(t.child1));
  }
  COLL_LOG(INFO, TOPO, "rank {} trees:{}", comm->rank, text);
}

}  // namespace

double netBetaByLinks(double modelGBs, const std::vector<int>& linkMbps) {
  if (linkMbps.empty()) return modelGBs;
  int slowest = *std::min_element(linkMbps.begin(), linkMbps.end());
  return slowest > 0 ? std::min(modelGBs, slowest / 8000.0) : modelGBs;  // Mb/s -> GB/s
}

Status setupTuning(collComm* comm) {
  std::string error, notes;
  std::string algo = params::kAlgo.get();
  if (!algorithms::parseAlgoSpec(algo, &comm->algoFilter, &error, &notes))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_ALGO={}: {}"), algo, error);
  if (!notes.empty() && comm->rank == 0) COLL_LOG(INFO, TOPO, "COLL_ALGO={}: {}", algo, notes);
  std::string proto = params::kProto.get();
  if (!algorithms::parseProtoSpec(proto, &comm->proto, &error, &notes))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_PROTO={}: {}"), proto, error);
  if (!notes.empty() && comm->rank == 0) COLL_LOG(INFO, TOPO, "COLL_PROTO={}: {}", proto, notes);

  std::vector<int> order;
  COLL_ASSIGN_OR_RETURN(order, ringOrderFor(comm));
  logTrees(comm, order);
  comm->ringOrder.clear();
  for (int p = 0; p < comm->nranks; ++p)
    if (order[p] != p) comm->ringOrder = order;

  // The hierarchical algorithm needs positions numbered host by host, the same number on each host.
  const auto& peers = comm->bootstrap->peers();
  auto host = [&](int position) { return peers[order[position]].hostHash; };
  int perHost = comm->nranks % comm->nHosts == 0 ? comm->nranks / comm->nHosts : 0;
  for (int p = 0; p < comm->nranks && perHost > 0; ++p)
    if (host(p) != host(p - p % perHost)) perHost = 0;
  if (comm->rank == 0 && comm->nHosts > 1 && log::enabled(log::Level::INFO, log::TOPO)) {
    if (perHost > 0)
      COLL_LOG(INFO, TOPO, "hierarchical all-reduce: {} hosts x {} ranks along the ring", comm->nHosts, perHost);
    else
      COLL_LOG(INFO, TOPO, "hierarchical all-reduce unavailable: hosts hold different numbers of ranks{}",
               params::kRingOrder.get() == "rank" ? " or are not contiguous in rank order" : "");
  }
  // From the rank table, not this rank's own view (its host's rank count, its affinity): every
  // rank must reach the same decisions, or their schedules would not match.
  CoreSharing sharing = coreSharing(peers);
  COLL_ASSIGN_OR_RETURN(comm->costModel, costModelFor(perHost, comm->nHosts, sharing));
  if (comm->rank == 0 && sharing.hostsPerMachine > 1)
    COLL_LOG(INFO, TOPO, "tuner: up to {} hosts share one machine's cores ({:.2f} ranks per core)",
             sharing.hostsPerMachine, sharing.ranksPerCore);
  // Between hosts, no faster than the slowest rank's link (the NET path's bandwidth), when every
  // rank's link reports a speed; from the table all ranks hold, so all decide alike.
  std::vector<int> mbps;
  for (const auto& p : peers) mbps.push_back(p.netMbps);
  double capped = netBetaByLinks(comm->costModel.netBetaGBs, mbps);
  if (comm->nHosts > 1 && capped < comm->costModel.netBetaGBs) {
    comm->costModel.netBetaGBs = capped;
    if (comm->rank == 0)
      COLL_LOG(INFO, TOPO, "tuner: links between hosts taken at {:.3f} GB/s (the slowest rank's interface)", capped);
  }
  return Status::ok();
}

CoreSharing coreSharing(const std::vector<bootstrap::RankInfo>& peers) {
  struct Machine {
    int ranks = 0, online = 1;
    long affinity = 0;
    std::set<uint64_t> hosts;
  };
  std::map<uint64_t, Machine> machines;
  for (const auto& p : peers) {
    Machine& m = machines[p.machineHash];
    ++m.ranks;
    m.online = std::max(m.online, static_cast<int>(p.onlineCpus));
    m.affinity += std::max(1, static_cast<int>(p.cores));
    m.hosts.insert(p.hostHash);
  }
  CoreSharing s;
  s.ranksPerCore = 0;
  for (const auto& [hash, m] : machines) {
    double cores = static_cast<double>(std::min<long>(m.online, m.affinity));
    s.ranksPerCore = std::max(s.ranksPerCore, m.ranks / cores);
    s.hostsPerMachine = std::max(s.hostsPerMachine, static_cast<int>(m.hosts.size()));
  }
  return s;
}

Result<algorithms::CostModel> costModelFor(int ranksPerHost, int nHosts, const CoreSharing& sharing) {
  // Inside a host: shm's constants (TCP's with COLL_SHM_DISABLE); between hosts: TCP's.
  bool network = params::kShmDisable.get();
  algorithms::CostModel m = network ? algorithms::tcpModel() : algorithms::shmModel();
  m.oversubscription = sharing.ranksPerCore;
  m.hostsPerMachine = sharing.hostsPerMachine;
  m.hosts = nHosts;
  m.ranksPerHost = ranksPerHost;
  algorithms::CostModel tcp = algorithms::tcpModel();
  m.netAlphaUs = tcp.alphaUs;
  m.netBetaGBs = tcp.betaGBs;
  size_t fifo = static_cast<size_t>(params::kBuffSize.get());
  m.chunkBytes = fifo / 2;
  m.pieceBytes = fifo / static_cast<size_t>(std::max<int64_t>(1, params::kNSlots.get()));
  COLL_TRY(applyOverrides(params::kTunerModel.get(), &m));
  return m;
}

}  // namespace coll
