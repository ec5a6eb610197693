#include "core/tuning.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "core/comm.h"
#include "core/params.h"
#include "transport/transport.h"

namespace coll {
namespace {

// COLL_PROTO in NCCL's list syntax over LL, Simple and Direct.
Status parseProto(const std::string& spec, bool* ll, bool* direct) {
  std::string body = spec;
  bool exclude = !body.empty() && body[0] == '^';
  if (exclude) body = body.substr(1);
  bool seenLL = false, seenSimple = false, seenDirect = false;
  size_t start = 0;
  for (size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] != ',') continue;
    std::string name = body.substr(start, i - start);
    start = i + 1;
    std::string lower;
    for (char c : name)
      if (!std::isspace(static_cast<unsigned char>(c))) lower += static_cast<char>(std::tolower(c));
    if (lower == "ll")
      seenLL = true;
    else if (lower == "simple")
      seenSimple = true;
    else if (lower == "direct")
      seenDirect = true;
    else
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("COLL_PROTO={}: unknown protocol '{}' (known: LL, Simple, "
                                   "Direct)"),
                        spec, name);
  }
  if (exclude && seenSimple)
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("COLL_PROTO={}: Simple cannot be excluded (every piece that is neither small nor "
                                 "direct travels through the slots)"),
                      spec);
  *ll = exclude ? !seenLL : seenLL;
  *direct = exclude ? !seenDirect : seenDirect;
  return Status::ok();
}

int usableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

}  // namespace

Status setupTuning(collComm* comm) {
  std::string error;
  std::string algo = params::kAlgo.get();
  if (!algorithms::parseAlgoSpec(algo, &comm->algoFilter, &error))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_ALGO={}: {}"), algo, error);
  std::string proto = params::kProto.get();
  if (!proto.empty()) COLL_TRY(parseProto(proto, &comm->protoLL, &comm->protoDirect));

  // Constants of the slowest transport the comm may use: TCP as soon as two hosts (or no shm).
  bool network = comm->nHosts > 1 || params::kShmDisable.get();
  const transport::Transport* t = transport::transportByName(network ? "tcp" : "shm");
  algorithms::CostModel& m = comm->costModel;
  if (t) {
    transport::Caps caps = t->caps();
    m.alphaUs = caps.latencyUs;
    m.betaGBs = caps.bandwidthGBs;
  }
  m.oversubscription = static_cast<double>(comm->localSize) / usableCores();
  size_t fifo = comm->conns->fifoBytes();
  m.chunkBytes = fifo / 2;
  m.pieceBytes = fifo / static_cast<size_t>(std::max<int64_t>(1, params::kNSlots.get()));
  return Status::ok();
}

}  // namespace coll
