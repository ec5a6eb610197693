#include "topo/topo_xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace coll::topo {
namespace {

// An element's name, attribute and position, for the error sentences.
std::string nameOf(const xmlNode* n) { return reinterpret_cast<const char*>(n->name); }

std::string where(const xmlNode* n) { return fmt::format("<{}> on line {}", nameOf(n), xmlGetLineNo(n)); }

bool attr(const xmlNode* n, const char* key, std::string* out) {
  xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(key));
  if (!v) return false;
  *out = reinterpret_cast<const char*>(v);
  xmlFree(v);
  return true;
}

std::string requiredAttr(const xmlNode* n, const char* key) {
  std::string v;
  if (!attr(n, key, &v)) throw std::runtime_error(where(n) + ": missing attribute '" + key + "'");
  return v;
}

// An integer attribute (decimal, or hex with 0x); absent: fallback.
long long intAttr(const xmlNode* n, const char* key, long long fallback, bool required = false) {
  std::string v;
  if (!attr(n, key, &v)) {
    if (required) throw std::runtime_error(where(n) + ": missing attribute '" + key + "'");
    return fallback;
  }
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0') throw std::runtime_error(where(n) + ": " + key + "=\"" + v + "\" is not an integer");
  return x;
}

std::vector<const xmlNode*> children(const xmlNode* n) {
  std::vector<const xmlNode*> out;
  for (const xmlNode* c = n->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE) out.push_back(c);
  return out;
}

// NCCL's elements that coll has no use for: skipped without complaint.
bool ignored(const std::string& name) { return name == "c2c" || name == "pcilink" || name == "nvs"; }

[[noreturn]] void unknown(const xmlNode* n, const char* parent) {
  throw std::runtime_error(where(n) + ": an element NCCL's topology has no place for inside <" + parent + ">");
}

// A PCIe link's bandwidth per direction, GB/s: "16.0 GT/s PCIe" x 16 lanes, with the line code
// (128b/130b from 8 GT/s on, 8b/10b below).
double linkGBs(const xmlNode* n) {
  std::string speed;
  if (!attr(n, "link_speed", &speed)) return 0;
  double gts = std::strtod(speed.c_str(), nullptr);
  long long width = intAttr(n, "link_width", 0);
  if (gts <= 0 || width <= 0) return 0;
  double code = gts >= 8 ? 128.0 / 130.0 : 0.8;
  return gts * static_cast<double>(width) * code / 8.0;
}

// NVLink bandwidth per link and direction by SM version, as NCCL counts it (GB/s).
double nvlinkPerLink(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86 || sm == 87) return 12.0;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;
}

// Verbs devices (HCA names) among NCCL's <net> names; the rest are network interfaces.
bool isVerbsName(const std::string& name) {
  for (const char* p : {"mlx4", "mlx5", "ib", "bnxt_re", "irdma", "qedr", "hfi1", "efa", "erdma", "rxe", "siw"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

constexpr const char* kNvSwitchClass = "0x068000";

class Reader {
 public:
  System system;

  void readSystem(const xmlNode* root) {
    if (nameOf(root) != "system")
      throw std::runtime_error(where(root) + ": the root element of NCCL's topology is <system>");
    for (const xmlNode* c : children(root)) {
      if (nameOf(c) == "cpu")
        readCpu(c);
      else if (!ignored(nameOf(c)))
        unknown(c, "system");
    }
    std::set<int> packages;
    for (const NumaNode& n : system.numa) packages.insert(n.package);
    system.packages = static_cast<int>(packages.size());
    // Devices in their index order (a GPU's dev, a <net>'s dev: NCCL's device numbers), not the
    // document's, which follows the PCI tree.
    std::stable_sort(system.gpus.begin(), system.gpus.end(),
                     [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
    std::vector<size_t> order(system.nics.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return netDev_[a] < netDev_[b]; });
    std::vector<Nic> nics;
    for (size_t i : order) nics.push_back(system.nics[i]);
    system.nics = std::move(nics);
  }

 private:
  void readCpu(const xmlNode* cpu) {
    NumaNode node;
    node.id = static_cast<int>(intAttr(cpu, "numaid", -1, true));
    if (node.id < 0) throw std::runtime_error(where(cpu) + ": numaid must be 0 or more");
    for (const NumaNode& n : system.numa)
      if (n.id == node.id)
        throw std::runtime_error(where(cpu) + ": a second <cpu> with numaid " + std::to_string(node.id));
    // NCCL's file has one <cpu> per NUMA node and no packages: each is its own, unless the file
    // is a coll dump, whose package attribute NCCL ignores.
    node.package = static_cast<int>(intAttr(cpu, "package", node.id));
    std::string affinity;
    if (attr(cpu, "affinity", &affinity))
      for (char ch : affinity)
        if (std::isxdigit(static_cast<unsigned char>(ch)))
          node.cores += static_cast<int>(std::bitset<4>(std::stoi(std::string(1, ch), nullptr, 16)).count());
    system.numa.push_back(node);
    std::vector<std::string> chain{"hb" + std::to_string(node.id)};
    for (const xmlNode* c : children(cpu)) {
      std::string name = nameOf(c);
      if (name == "pci")
        readPci(c, node.id, chain);
      else if (name == "nic")
        readNic(c, PciPlace{"", node.id, {}, 0});
      else if (!ignored(name))
        unknown(c, "cpu");
    }
  }

  // A <pci>: a bridge when it holds other <pci> elements, else the device its <gpu> or <nic> is.
  void readPci(const xmlNode* pci, int numa, const std::vector<std::string>& chain) {
    std::string busId = requiredAttr(pci, "busid");
    auto kids = children(pci);
    bool bridge = false;
    for (const xmlNode* c : kids) bridge |= nameOf(c) == "pci";
    if (bridge) {
      std::vector<std::string> below = chain;
      below.push_back("sw" + busId);
      for (const xmlNode* c : kids) {
        if (nameOf(c) == "pci")
          readPci(c, numa, below);
        else if (!ignored(nameOf(c)))
          unknown(c, "pci");
      }
      return;
    }
    PciPlace place{busId, numa, chain, linkGBs(pci)};
    for (const xmlNode* c : kids) {
      std::string name = nameOf(c);
      if (name == "gpu")
        readGpu(c, place);
      else if (name == "nic")
        readNic(c, place);
      else if (!ignored(name))
        unknown(c, "pci");
    }
  }

  void readGpu(const xmlNode* g, const PciPlace& place) {
    Gpu gpu;
    gpu.index = static_cast<int>(intAttr(g, "dev", -1, true));
    int sm = static_cast<int>(intAttr(g, "sm", 0));
    gpu.name = sm > 0 ? fmt::format("GPU sm_{}", sm) : std::string("GPU");
    gpu.pci = place;
    gpu.nvlinkGBsPerLink = nvlinkPerLink(sm);
    for (const xmlNode* c : children(g)) {
      std::string name = nameOf(c);
      if (name != "nvlink") {
        if (!ignored(name)) unknown(c, "gpu");
        continue;
      }
      int count = static_cast<int>(intAttr(c, "count", 1));
      std::string tclass;
      attr(c, "tclass", &tclass);
      if (tclass == kNvSwitchClass)
        gpu.nvswitchLinks += count;
      else if (tclass.rfind("0x03", 0) == 0 || tclass.empty())  // display class: another GPU
        gpu.nvlinks.push_back({requiredAttr(c, "target"), count});
      // else: NVLink to a CPU (NVLink-C2C-like); coll does not route through it
    }
    system.gpus.push_back(gpu);
  }

  void readNic(const xmlNode* nic, const PciPlace& place) {
    for (const xmlNode* c : children(nic)) {
      if (nameOf(c) != "net") {
        if (!ignored(nameOf(c))) unknown(c, "nic");
        continue;
      }
      Nic n;
      n.name = requiredAttr(c, "name");
      netDev_.push_back(intAttr(c, "dev", static_cast<long long>(netDev_.size())));
      n.pci = place;
      n.port = static_cast<int>(intAttr(c, "port", 0));
      long long mbps = intAttr(c, "speed", 0);
      n.speedGBs = mbps > 0 ? static_cast<double>(mbps) / 8000.0 : 0;
      if (n.name == "lo") {
        n.kind = "loopback";
        n.netdev = n.name;
      } else if (isVerbsName(n.name)) {
        n.kind = "ib";
      } else {
        n.kind = place.chain.empty() ? "virtual" : "ethernet";
        n.netdev = n.name;
      }
      system.nics.push_back(n);
    }
  }

  std::vector<long long> netDev_;  // per NIC read: its dev attribute (document order when absent)
};

// Writing: the devices of each NUMA node as a tree of their chains' bridges.
struct Tree {
  std::map<std::string, Tree> bridges;  // by chain entry
  std::vector<const Gpu*> gpus;
  std::vector<size_t> nics;  // indices into System::nics
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// A chain entry as a bus id: detect.cc names switches "sw<bus id>"; other names (a hand-written
// file's "sw0") get a synthetic id in domain ffff, stable within one dump.
std::string bridgeBusId(const std::string& entry, std::map<std::string, std::string>* synthetic) {
  if (entry.size() > 2 && entry.compare(0, 2, "sw") == 0 && entry.find(':') != std::string::npos)
    return entry.substr(2);
  auto it = synthetic->find(entry);
  if (it != synthetic->end()) return it->second;
  std::string id = fmt::format("ffff:{:02x}:00.0", synthetic->size() + 1);
  synthetic->emplace(entry, id);
  return id;
}

// link_speed and link_width for a bandwidth: a PCIe generation and width when one gives it (as
// NCCL writes them), else 16 lanes at the rate that reads back as this bandwidth.
std::string linkAttrs(double gbs) {
  if (gbs <= 0) return "";
  auto bandwidth = [](double gts, int width) { return gts * width * (gts >= 8 ? 128.0 / 130.0 : 0.8) / 8.0; };
  for (double gts : {2.5, 5.0, 8.0, 16.0, 32.0, 64.0})
    for (int width : {16, 8, 4, 2, 1})
      if (std::abs(bandwidth(gts, width) - gbs) < 1e-6 * gbs)
        return fmt::format(" link_speed=\"{:.1f} GT/s PCIe\" link_width=\"{}\"", gts, width);
  double gts = gbs * 8.0 / 16.0 / (128.0 / 130.0);
  if (gts < 8) gts = gbs * 8.0 / 16.0 / 0.8;
  return fmt::format(" link_speed=\"{:.6g} GT/s PCIe\" link_width=\"16\"", gts);
}

std::string netElement(const Nic& n, size_t index) {
  return fmt::format("<net name=\"{}\" dev=\"{}\" speed=\"{:.0f}\" port=\"{}\"/>", escape(n.name), index,
                     n.speedGBs * 8000.0, n.port);
}

class Writer {
 public:
  explicit Writer(const System& s) : s_(s) {}

  std::string write() {
    out_ << "<system version=\"1\">\n";
    std::vector<int> numas;
    for (const NumaNode& n : s_.numa) numas.push_back(n.id);
    if (numas.empty()) numas.push_back(0);
    for (int numa : numas) cpu(numa);
    out_ << "</system>\n";
    return out_.str();
  }

 private:
  void line(int depth, const std::string& text) {
    out_ << std::string(static_cast<size_t>(depth) * 2, ' ') << text << "\n";
  }

  void cpu(int numa) {
    int cores = 0, package = numa;
    for (const NumaNode& n : s_.numa)
      if (n.id == numa) cores = n.cores, package = n.package;
    // As many mask bits as the node has cores (coll does not keep which cores they are).
    std::string mask;
    for (int left = cores; left > 0; left -= 4) mask.insert(mask.begin(), "0137f"[std::min(left, 4)]);
    line(1, fmt::format("<cpu numaid=\"{}\"{} package=\"{}\">", numa, mask.empty() ? "" : " affinity=\"" + mask + "\"",
                        package));
    Tree root;
    std::vector<size_t> unplaced;
    auto at = [&](const PciPlace& p) {
      Tree* t = &root;
      for (size_t i = 1; i < p.chain.size(); ++i) t = &t->bridges[p.chain[i]];
      return t;
    };
    for (const Gpu& g : s_.gpus)
      if (numaOf(s_, g.pci) == numa) at(g.pci)->gpus.push_back(&g);
    for (size_t i = 0; i < s_.nics.size(); ++i) {
      const Nic& n = s_.nics[i];
      if (numaOf(s_, n.pci) != numa) continue;
      if (n.pci.chain.empty() || n.pci.busId.empty())
        unplaced.push_back(i);
      else
        at(n.pci)->nics.push_back(i);
    }
    tree(root, 2);
    for (size_t i : unplaced) {
      line(2, "<nic>");
      line(3, netElement(s_.nics[i], i));
      line(2, "</nic>");
    }
    line(1, "</cpu>");
  }

  void tree(const Tree& t, int depth) {
    for (const auto& [entry, sub] : t.bridges) {
      line(depth, fmt::format("<pci busid=\"{}\" class=\"0x060400\">", escape(bridgeBusId(entry, &synthetic_))));
      tree(sub, depth + 1);
      line(depth, "</pci>");
    }
    for (const Gpu* g : t.gpus) {
      line(depth,
           fmt::format("<pci busid=\"{}\" class=\"0x030200\"{}>", escape(g->pci.busId), linkAttrs(g->pci.linkGBs)));
      line(depth + 1, fmt::format("<gpu dev=\"{}\">", g->index));
      for (const Gpu::Link& l : g->nvlinks)
        line(depth + 2,
             fmt::format("<nvlink target=\"{}\" count=\"{}\" tclass=\"0x030200\"/>", escape(l.peerBusId), l.count));
      if (g->nvswitchLinks > 0)
        line(depth + 2, fmt::format("<nvlink target=\"fffffff:ffff:ff\" count=\"{}\" tclass=\"{}\"/>", g->nvswitchLinks,
                                    kNvSwitchClass));
      line(depth + 1, "</gpu>");
      line(depth, "</pci>");
    }
    for (size_t i : t.nics) {
      const Nic& n = s_.nics[i];
      line(depth,
           fmt::format("<pci busid=\"{}\" class=\"0x020000\"{}>", escape(n.pci.busId), linkAttrs(n.pci.linkGBs)));
      line(depth + 1, "<nic>");
      line(depth + 2, netElement(n, i));
      line(depth + 1, "</nic>");
      line(depth, "</pci>");
    }
  }

  const System& s_;
  std::ostringstream out_;
  std::map<std::string, std::string> synthetic_;
};

}  // namespace

bool systemFromXml(const std::string& text, System* out, std::string* error) {
  std::unique_ptr<xmlDoc, void (*)(xmlDoc*)> doc(
      xmlReadMemory(text.data(), static_cast<int>(text.size()), "topology.xml", nullptr,
                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING),
      xmlFreeDoc);
  if (!doc) {
    const xmlError* e = xmlGetLastError();
    *error = e ? fmt::format("not valid XML (line {}: {})", e->line, e->message ? e->message : "?") : "not valid XML";
    while (!error->empty() && (error->back() == '\n' || error->back() == ')')) error->pop_back();
    *error += ")";
    return false;
  }
  try {
    Reader r;
    r.readSystem(xmlDocGetRootElement(doc.get()));
    *out = std::move(r.system);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

std::string systemToXml(const System& s) { return Writer(s).write(); }

}  // namespace coll::topo
