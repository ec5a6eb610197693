#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>

#include "base/log.h"
#include "base/params.h"
#include "topo/cpu_place.h"
#include "topo/ib_probe.h"
#include "transport/net/net.h"
#include "transport/net/nic_locality.h"
#include "transport/net/plugin/plugin_net.h"
#include "transport/transport.h"

namespace coll::transport {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The UCX transport's and the plugin transport's detail lines.
std::string pluginDetail() {
  auto net = net::plugin::loadedPlugin();
  if (!net.isOk() || !*net) return {};
  const auto& devs = (*net)->devices();
  std::string text = fmt::format("'{}' v{} from {}, device{}", (*net)->name(), (*net)->version(), (*net)->path(),
                                 devs.size() == 1 ? "" : "s");
  for (size_t i = 0; i < devs.size(); ++i)
    text += fmt::format("{} {}{}", i ? "," : "", devs[i].name,
                        devs[i].speedMbps > 0 ? fmt::format(" {:g} Gb/s", devs[i].speedMbps / 1000.0) : "");
  return text;
}

// The network chosen once per process (COLL_NET, COLL_NET_PLUGIN); see params.cc.
struct Network {
  Status status;
  const Transport* transport = nullptr;
};

const Network& network() {
  static std::once_flag once;
  static Network chosen;
  std::call_once(once, [] {
    std::string want = lower(params::kNet.get());
    if (want == "tcp" || want == "socket") {  // "Socket": NCCL's name for its sockets
      chosen.transport = &tcpTransport();
      return;
    }
    if (want == "ucx") {
      std::string why = ucxUnavailable();
      if (why.empty())
        chosen.transport = ucxTransport();
      else
        chosen.status = Status(collInvalidArgument, "COLL_NET=ucx, but " + why);
      return;
    }
    auto plugin = net::plugin::loadedPlugin();
    if (!plugin.isOk()) {
      chosen.status = plugin.status();
      return;
    }
    if (want.empty()) {
      // As NCCL: a loaded plugin first; then RDMA hardware through UCX; then sockets.
      if (*plugin)
        chosen.transport = pluginTransport();
      else if (!topo::ibInfo().ports.empty() && ucxUnavailable().empty())
        chosen.transport = ucxTransport();
      else
        chosen.transport = &tcpTransport();
    } else if (*plugin && lower((*plugin)->name()) == want) {
      chosen.transport = pluginTransport();
    } else if (want == "ib") {
      // NCCL's name for its InfiniBand network: a loaded plugin that serves IB (named "IB...", as
      // nccl-rdma-sharp-plugins' "IBext" is), else coll's UCX provider on this host's RDMA devices.
      // UCX is loaded (its memory hooks with it) only when no IB plugin is there to take it.
      bool ibPlugin = *plugin && lower((*plugin)->name()).rfind("ib", 0) == 0;
      bool rdma = !topo::ibInfo().ports.empty();
      std::string ucx = ibPlugin ? std::string() : ucxUnavailable();
      if (ibPlugin)
        chosen.transport = pluginTransport();
      else if (ucx.empty() && rdma)
        chosen.transport = ucxTransport();
      else
        chosen.status = Status(
            collInvalidArgument,
            fmt::format(
                "COLL_NET={} (NCCL's InfiniBand network): {}, and UCX cannot serve it here ({})", params::kNet.get(),
                *plugin ? "the loaded net plugin '" + (*plugin)->name() + "' is not an IB plugin"
                        : std::string("no net plugin is loaded"),
                !ucx.empty() ? ucx
                             : "no InfiniBand or RoCE port here: " +
                                   (topo::ibInfo().why.empty() ? std::string("none is active") : topo::ibInfo().why)));
    } else {
      chosen.status =
          Status(collInvalidArgument, fmt::format("COLL_NET={}: no network of that name here (tcp{}{})",
                                                  params::kNet.get(), ucxTransport() ? ", ucx" : "",
                                                  *plugin ? ", '" + (*plugin)->name() + "' from the net plugin"
                                                          : std::string(", and no net plugin is loaded")));
    }
    if (chosen.transport) COLL_LOG(INFO, NET, "network: {} {}", chosen.transport->name(), chosen.transport->detail());
  });
  return chosen;
}

const Transport& networkOrSockets() {
  const Network& n = network();
  return n.transport ? *n.transport : tcpTransport();  // an error is reported by checkNetwork at init
}

}  // namespace

// The network transports: FIFO slots over a network provider (net/net.h), one per provider.
// Never freed, like a static: communicators destroyed at exit may still use them.
const Transport& tcpTransport() {
  static const Transport* t =
      net::newNetTransport("tcp", Caps{20.0, 1.5, size_t(64) << 20}, &net::openSocketProvider).release();
  return *t;
}

const Transport* pluginTransport() {
  static const Transport* t = []() -> const Transport* {
    auto net = net::plugin::loadedPlugin();
    if (!net.isOk() || !*net) return nullptr;
    // The tuner's view: the NICs' own latency and speed, slots within their message limit. A
    // connection may use any of the devices nearest its rank (nic_locality.h), so the slowest
    // device's figures, where the plugin gives them.
    double latency = 0, gbs = 0;
    size_t maxSlot = size_t(64) << 20;
    for (const auto& d : (*net)->devices()) {
      if (d.latencyUs > 0) latency = std::max<double>(latency, d.latencyUs);
      if (d.speedMbps > 0) gbs = gbs > 0 ? std::min(gbs, d.speedMbps / 8000.0) : d.speedMbps / 8000.0;
      maxSlot = std::min<size_t>(maxSlot, d.maxP2pBytes ? d.maxP2pBytes : size_t(1) << 30);
    }
    if (latency <= 0) latency = 10.0;
    if (gbs <= 0) gbs = 1.5;
    return net::newNetTransport("ncclnet", Caps{latency, gbs, maxSlot}, &net::openPluginProvider, &pluginDetail)
        .release();
  }();
  return t;
}

Status checkNetwork() { return network().status; }

Result<std::string> describeNetwork() {
  const Network& n = network();
  if (!n.transport) return n.status;
  std::string detail = n.transport->detail();
  return detail.empty() ? std::string(n.transport->name()) : fmt::format("{} [{}]", n.transport->name(), detail);
}

std::vector<std::string> describeNetworkDevices() {
  const Network& n = network();
  std::vector<std::string> out;
  if (!n.transport) return out;
  std::string name = n.transport->name();
  if (name == "ncclnet") {
    auto net = net::plugin::loadedPlugin();
    if (!net.isOk() || !*net) return out;
    const auto& devs = (*net)->devices();
    std::vector<net::DeviceSpot> spots;
    for (const auto& d : devs) spots.push_back({d.name, d.pciPath});
    net::Config here;
    here.numa = topo::cpuPlace().numa;
    std::string why;
    std::vector<int> near = net::nearestDevices(spots, here, &why);
    for (size_t i = 0; i < devs.size(); ++i) {
      const auto& d = devs[i];
      bool used = std::find(near.begin(), near.end(), static_cast<int>(i)) != near.end();
      out.push_back(fmt::format("{} dev {}: {} ({}), {}, {:g} us, port {}", used ? "*" : " ", d.index, d.name,
                                d.pciPath.empty() ? "no PCI path" : d.pciPath,
                                d.speedMbps > 0 ? fmt::format("{:g} Gb/s", d.speedMbps / 1000.0) : "speed unknown",
                                d.latencyUs, d.port));
    }
    out.push_back(devs.size() > 1 ? "(* = nearest this process: " + why + "; a rank spreads its connections over them)"
                                  : "(* = used)");
  } else if (name == "ucx") {
    const auto& ports = topo::ibInfo().ports;
    net::Config here;
    here.numa = topo::cpuPlace().numa;
    std::string why;
    const char* set = std::getenv("UCX_NET_DEVICES");
    std::string chosen = set ? std::string() : net::ucxNetDevices(ports, here, &net::sysfsPciPath, &why);
    for (const auto& p : ports) {
      std::string spelled = fmt::format("{}:{}", p.device, p.port);
      bool used = !chosen.empty() && ("," + chosen + ",").find("," + spelled + ",") != std::string::npos;
      out.push_back(fmt::format("{} {} port {} ({}, {:g} Gb/s{})", used ? "*" : " ", p.device, p.port, p.linkLayer,
                                p.gbps, p.active ? "" : ", not active"));
    }
    if (set)
      out.push_back(fmt::format("(UCX_NET_DEVICES={}, as set)", set));
    else if (!chosen.empty())
      out.push_back("(* = nearest this process: " + why + "; a rank sets UCX_NET_DEVICES=" + chosen +
                    " from its GPU or NUMA node, unless UCX_TLS names no RDMA transport)");
    else
      out.push_back(ports.empty() ? "UCX picks its devices itself (UCX_NET_DEVICES narrows them; no verbs port here)"
                                  : "(UCX picks among these: " + why + "; UCX_NET_DEVICES narrows them)");
  } else {
    out.push_back("coll's sockets, on the interface marked * above");
  }
  return out;
}

std::vector<const Transport*> registeredTransports() {
  std::vector<const Transport*> out;
  if (!params::kShmDisable.get()) out.push_back(&shmTransport());
  out.push_back(&networkOrSockets());
  return out;
}

const Transport* transportByName(const std::string& name) {
  // Every transport this process can run, chosen or not: the receiving rank names the one it set
  // up, and the sender follows it if it can.
  if (name == "shm") return &shmTransport();
  if (name == "tcp") return &tcpTransport();
  if (name == "p2p") return &p2pTransport();
  if (name == "ucx") return ucxTransport();
  if (name == "ncclnet") return pluginTransport();
  return nullptr;
}

std::vector<const Transport*> deviceTransports() {
  std::vector<const Transport*> out;
  if (!params::kP2PDisable.get()) out.push_back(&p2pTransport());
  if (!params::kShmDisable.get()) out.push_back(&shmTransport());
  out.push_back(&networkOrSockets());
  return out;
}

const Transport* selectDeviceTransport(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) {
  for (const Transport* t : deviceTransports())
    if (t->canConnect(me, peer)) return t;
  return nullptr;
}

bool deviceLLEverywhere(const std::vector<bootstrap::RankInfo>& ranks) {
  for (const auto& a : ranks)
    for (const auto& b : ranks) {  // a rank's connection to itself too (a send to itself)
      const Transport* t = selectDeviceTransport(a, b);
      if (!t || !t->carriesLL()) return false;
    }
  return true;
}

const Transport* selectTransport(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) {
  for (const Transport* t : registeredTransports())
    if (t->canConnect(me, peer)) return t;
  return nullptr;
}

}  // namespace coll::transport
