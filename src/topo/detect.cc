#include "topo/detect.h"

#include <dirent.h>
#include <hwloc.h>
#include <strings.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "topo/cuda_probe.h"
#include "topo/ib_probe.h"
#include "topo/nvml_probe.h"

namespace coll::topo {
namespace {

std::string readLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string busIdOf(hwloc_obj_t o) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", o->attr->pcidev.domain, o->attr->pcidev.bus, o->attr->pcidev.dev,
                     o->attr->pcidev.func);
}

// The NUMA node nearest a PCI object: the first node of its first non-I/O ancestor.
int numaOfObj(hwloc_topology_t t, hwloc_obj_t o) {
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t, o);
  if (!a || !a->nodeset) return -1;
  int first = hwloc_bitmap_first(a->nodeset);
  return first < 0 ? -1 : first;
}

PciPlace placeOf(hwloc_topology_t t, hwloc_obj_t dev) {
  PciPlace p;
  p.busId = busIdOf(dev);
  p.numa = numaOfObj(t, dev);
  p.linkGBs = dev->attr->pcidev.linkspeed;  // hwloc reports GB/s
  for (hwloc_obj_t b = dev->parent; b && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
    if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
      p.chain.push_back(fmt::format("hb{}", b->logical_index));
    else
      p.chain.push_back(fmt::format("sw{}", busIdOf(b)));
  }
  std::reverse(p.chain.begin(), p.chain.end());
  return p;
}

double netSpeedGBs(const std::string& netdev) {
  std::string s = readLine("/sys/class/net/" + netdev + "/speed");  // Mb/s; -1 or unreadable when virtual
  long mbps = s.empty() ? -1 : std::strtol(s.c_str(), nullptr, 10);
  return mbps > 0 ? static_cast<double>(mbps) / 8000.0 : 0;
}

void addVerbsPort(const std::string& dev, Nic* n) {
  // libibverbs' answer when it is there (the first active port, else the first), else sysfs's.
  const IbPort* best = nullptr;
  for (const IbPort& p : ibInfo().ports)
    if (p.device == dev && (!best || (!best->active && p.active))) best = &p;
  if (best) {
    n->port = best->port;
    n->kind = best->linkLayer == "Ethernet" ? "roce" : "ib";
    if (best->gbps > 0) n->speedGBs = best->gbps / 8;
    n->gid = best->gid;
    return;
  }
  std::string port = "/sys/class/infiniband/" + dev + "/ports/1/";
  n->port = 1;
  std::string layer = readLine(port + "link_layer");
  n->kind = strcasecmp(layer.c_str(), "Ethernet") == 0 ? "roce" : "ib";
  // "400 Gb/sec (4X NDR)"
  double gbps = std::strtod(readLine(port + "rate").c_str(), nullptr);
  if (gbps > 0) n->speedGBs = gbps / 8;
  n->gid = readLine(port + "gids/0");
}

void addNumaNodes(hwloc_topology_t t, System* s) {
  s->packages = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
  int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    NumaNode node;
    node.id = static_cast<int>(o->os_index);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
    node.package = pkg ? static_cast<int>(pkg->logical_index) : 0;
    node.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t, o->cpuset, HWLOC_OBJ_CORE);
    node.memoryBytes = o->attr ? o->attr->numanode.local_memory : 0;
    s->numa.push_back(node);
  }
  if (s->numa.empty()) s->numa.push_back(NumaNode{});
}

// NICs hwloc sees under PCI devices (network and verbs OS devices), then every other interface
// in /sys/class/net (veth, bridges, loopback) as virtual.
void addNics(hwloc_topology_t t, System* s) {
  std::set<std::string> seen;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o));) {
    auto kind = o->attr->osdev.type;
    if (kind != HWLOC_OBJ_OSDEV_NETWORK && kind != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    hwloc_obj_t dev = o->parent;
    if (!dev || dev->type != HWLOC_OBJ_PCI_DEVICE) continue;
    Nic n;
    n.name = o->name;
    n.pci = placeOf(t, dev);
    if (kind == HWLOC_OBJ_OSDEV_OPENFABRICS) {
      addVerbsPort(o->name, &n);
      // The netdev of the same PCI function, if any (RoCE, IPoIB).
      for (hwloc_obj_t c = dev->io_first_child; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) n.netdev = c->name;
    } else {
      n.netdev = o->name;
      n.kind = "ethernet";
      n.speedGBs = netSpeedGBs(o->name);
    }
    if (!n.netdev.empty()) seen.insert(n.netdev);
    s->nics.push_back(n);
  }
  std::vector<std::string> names;
  if (DIR* d = opendir("/sys/class/net")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (seen.count(name)) continue;
    Nic n;
    n.name = n.netdev = name;
    n.kind = name == "lo" ? "loopback" : "virtual";
    n.speedGBs = netSpeedGBs(name);
    s->nics.push_back(n);
  }
}

void addGpus(hwloc_topology_t t, System* s) {
  const CudaInfo& cuda = cudaInfo();
  for (int i = 0; i < cuda.deviceCount; ++i) {
    Gpu g;
    g.index = i;
    g.name = fmt::format("cuda{}", i);
    std::string bus = cudaBusId(i);
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o));)
      if (strcasecmp(busIdOf(o).c_str(), bus.c_str()) == 0) g.pci = placeOf(t, o);
    if (g.pci.busId.empty()) {
      g.pci.busId = normalizeBusId(bus);
      s->error += fmt::format("GPU {} ({}) not found in the PCI tree; ", i, bus);
    }
    // NVLinks from NVML; without it (or without NVLink) the GPU is on PCIe only.
    NvLinks links;
    std::string why;
    if (nvlinksOf(g.pci.busId, &links, &why)) {
      g.nvswitchLinks = links.switchLinks;
      for (const auto& [peer, count] : links.gpuPeers) g.nvlinks.push_back({peer, count});
      if (links.GBsPerLink > 0) g.nvlinkGBsPerLink = links.GBsPerLink;
    } else if (why.find("no active NVLink") == std::string::npos) {
      s->error += fmt::format("GPU {}: {}; ", i, why);
    }
    s->gpus.push_back(g);
  }
}

}  // namespace

System detectSystem(const std::string& host, const std::string& hostId) {
  System s;
  s.host = host;
  s.hostId = hostId;
  unsigned v = hwloc_get_api_version();
  s.source = fmt::format("detected (hwloc {}.{}.{})", v >> 16, (v >> 8) & 0xff, v & 0xff);
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) {
    s.error = "hwloc_topology_init failed";
    s.numa.push_back(NumaNode{});
    s.packages = 1;
    return s;
  }
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Not the OpenCL and GL plugins: coll reads packages, NUMA nodes and PCI devices, and those two
  // would open the OpenCL ICD loader and the X server's GL in every process that makes a
  // communicator (the ICD loader's allocations, left behind when hwloc unloads it, also show as
  // leaks under LeakSanitizer). Unknown names are ignored by hwloc.
  for (const char* unused : {"opencl", "gl"})
    (void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, unused);
  if (hwloc_topology_load(t) != 0) {
    s.error = "hwloc_topology_load failed";
    s.numa.push_back(NumaNode{});
    s.packages = 1;
    hwloc_topology_destroy(t);
    return s;
  }
  addNumaNodes(t, &s);
  addNics(t, &s);
  addGpus(t, &s);
  hwloc_topology_destroy(t);
  return s;
}

}  // namespace coll::topo
