#include "core/residency.h"

#include <algorithm>
#include <map>
#include <utility>

#include "algorithms/channels.h"
#include "base/status.h"
#include "device/runtime.h"
#include "exec/cuda/launch.h"

namespace coll {

CtaBudget ctaBudget(const std::vector<bootstrap::RankInfo>& ranks) {
  struct Gpu {
    int ctas = 0;
    int ranks = 0;
    int first = -1;
  };
  std::map<std::pair<uint64_t, int>, Gpu> gpus;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const bootstrap::RankInfo& info = ranks[r];
    if (info.cudaDev < 0 || info.gpuCtas <= 0) continue;
    Gpu& g = gpus[{info.hostHash, info.cudaDev}];
    g.ctas = g.ctas == 0 ? info.gpuCtas : std::min(g.ctas, info.gpuCtas);
    ++g.ranks;
    if (g.first < 0) g.first = static_cast<int>(r);
  }
  CtaBudget b;
  for (const auto& [key, g] : gpus) {
    int per = g.ctas / g.ranks;
    if (!b.known || per < b.perRank) {
      b.known = true;
      b.perRank = per;
      b.gpuCtas = g.ctas;
      b.ranksOnGpu = g.ranks;
      b.rank = g.first;
    }
  }
  return b;
}

int p2pChannels(size_t bytes, int nranks, int maxChannels, size_t minBytes, const CtaBudget& b) {
  int most = maxChannels;
  if (b.known) most = std::min(most, std::max(1, b.perRank / std::max(1, 2 * nranks)));
  return algorithms::channelsFor(bytes, std::max(1, most), minBytes);
}

std::string residencyProblem(const char* opName, int ctas, const CtaBudget& b) {
  if (!b.known || ctas <= b.perRank) return "";
  std::string where = fmt::format(
      "the GPU of rank {}, which {} rank{} of this communicator share{}, holds {} CTAs of "
      "coll's kernel at once (SMs x occupancy)",
      b.rank, b.ranksOnGpu, b.ranksOnGpu == 1 ? "" : "s", b.ranksOnGpu == 1 ? "s" : "", b.gpuCtas);
  if (b.perRank == 0)
    return fmt::format(
        "{}: {}: fewer than one per rank, so their kernels cannot all run at once; put at most {} "
        "ranks on one GPU",
        opName, where, b.gpuCtas);
  return fmt::format(
      "{}: this rank's launch needs {} CTAs at once (one per peer, direction and channel), and {}, "
      "{} per rank: their kernels could not all run at once and would wait for each other until the "
      "timeout. Split the group (at most {} peers and directions per rank), or share the GPU among "
      "fewer ranks",
      opName, ctas, where, b.perRank, b.perRank);
}

int gpuCtas(int device, int threads, std::string* why) {
  if (device < 0) return 0;
  device::Runtime* rt = device::runtime();
  if (!rt) return 0;
  int sms = rt->multiprocessors(device);
  if (sms <= 0) {
    if (why) *why = "the number of multiprocessors is unknown";
    return 0;
  }
  if (rt->emulated()) return sms;  // one emulated CTA per "SM"
  int perSm = 0;
  device::DeviceGuard onDevice(*rt, device);  // occupancy is the current device's
  std::string e =
      onDevice.status().isOk() ? exec::dev::interpreterCtasPerSm(threads, &perSm) : onDevice.status().message();
  if (!e.empty()) {
    if (why) *why = "the kernel's occupancy is unknown: " + e;
    return 0;
  }
  return sms * perSm;
}

}  // namespace coll
