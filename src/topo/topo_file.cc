#include "topo/topo_file.h"

#include "topo/topo_xml.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace coll::topo {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;

json pciToJson(const PciPlace& p) {
  return json{{"bus_id", p.busId}, {"numa", p.numa}, {"chain", p.chain}, {"link_GBs", p.linkGBs}};
}

// Rejects keys outside `known`, so that a misspelt field is an error instead of a default.
void onlyKeys(const json& j, const std::set<std::string>& known, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(where + ": expected an object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key())) throw std::runtime_error(where + ": unknown key '" + it.key() + "'");
}

template <typename T>
void get(const json& j, const char* key, T* out, const std::string& where, bool required = false) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) throw std::runtime_error(where + ": missing '" + key + "'");
    return;
  }
  try {
    *out = it->get<T>();
  } catch (const json::exception&) {
    throw std::runtime_error(where + "." + key + ": wrong type");
  }
}

// Integer fields take integral JSON numbers in the field's range only: nlohmann's get<int>
// converts 1e10 with a C cast (undefined behaviour) and 2.5 by truncation.
template <typename Int>
void getInteger(const json& j, const char* key, Int* out, const std::string& where, bool required) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (required) throw std::runtime_error(where + ": missing '" + key + "'");
    return;
  }
  bool fits = false;
  if (it->is_number_unsigned())
    fits = it->template get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max());
  else if (it->is_number_integer()) {
    int64_t v = it->template get<int64_t>();
    fits = v >= static_cast<int64_t>(std::numeric_limits<Int>::min()) &&
           (v < 0 || static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<Int>::max()));
  }
  if (!it->is_number_integer()) throw std::runtime_error(where + "." + key + ": wrong type (not an integer)");
  if (!fits) throw std::runtime_error(where + "." + key + ": " + it->dump() + " is out of range");
  *out = it->template get<Int>();
}

void get(const json& j, const char* key, int* out, const std::string& where, bool required = false) {
  getInteger(j, key, out, where, required);
}

void get(const json& j, const char* key, uint64_t* out, const std::string& where, bool required = false) {
  getInteger(j, key, out, where, required);
}

PciPlace pciFromJson(const json& j, const std::string& where) {
  onlyKeys(j, {"bus_id", "numa", "chain", "link_GBs"}, where);
  PciPlace p;
  get(j, "bus_id", &p.busId, where);
  get(j, "numa", &p.numa, where);
  get(j, "chain", &p.chain, where);
  get(j, "link_GBs", &p.linkGBs, where);
  return p;
}

System parse(const json& j) {
  onlyKeys(j, {"format", "version", "host", "host_id", "packages", "numa", "gpus", "nics"}, "topology");
  std::string format;
  int version = 0;
  get(j, "format", &format, "topology", true);
  get(j, "version", &version, "topology", true);
  if (format != "coll-topology") throw std::runtime_error("topology: format is '" + format + "', not coll-topology");
  if (version != kVersion)
    throw std::runtime_error("topology: version " + std::to_string(version) + " (this build reads 1)");
  System s;
  get(j, "host", &s.host, "topology");
  get(j, "host_id", &s.hostId, "topology");
  get(j, "packages", &s.packages, "topology");
  if (j.contains("numa"))
    for (size_t i = 0; i < j["numa"].size(); ++i) {
      const json& n = j["numa"][i];
      std::string where = "numa[" + std::to_string(i) + "]";
      onlyKeys(n, {"id", "package", "cores", "memory_bytes"}, where);
      NumaNode node;
      get(n, "id", &node.id, where, true);
      get(n, "package", &node.package, where);
      get(n, "cores", &node.cores, where);
      get(n, "memory_bytes", &node.memoryBytes, where);
      s.numa.push_back(node);
    }
  if (j.contains("gpus"))
    for (size_t i = 0; i < j["gpus"].size(); ++i) {
      const json& g = j["gpus"][i];
      std::string where = "gpus[" + std::to_string(i) + "]";
      onlyKeys(g, {"index", "name", "pci", "nvswitch_links", "nvlink_GBs_per_link", "nvlinks"}, where);
      Gpu gpu;
      gpu.index = static_cast<int>(i);
      get(g, "index", &gpu.index, where);
      get(g, "name", &gpu.name, where);
      if (g.contains("pci")) gpu.pci = pciFromJson(g["pci"], where + ".pci");
      get(g, "nvswitch_links", &gpu.nvswitchLinks, where);
      get(g, "nvlink_GBs_per_link", &gpu.nvlinkGBsPerLink, where);
      if (g.contains("nvlinks"))
        for (const json& l : g["nvlinks"]) {
          onlyKeys(l, {"peer", "count"}, where + ".nvlinks");
          Gpu::Link link;
          get(l, "peer", &link.peerBusId, where + ".nvlinks", true);
          get(l, "count", &link.count, where + ".nvlinks", true);
          gpu.nvlinks.push_back(link);
        }
      s.gpus.push_back(gpu);
    }
  if (j.contains("nics"))
    for (size_t i = 0; i < j["nics"].size(); ++i) {
      const json& n = j["nics"][i];
      std::string where = "nics[" + std::to_string(i) + "]";
      onlyKeys(n, {"name", "netdev", "kind", "pci", "speed_GBs", "port", "gid"}, where);
      Nic nic;
      get(n, "name", &nic.name, where, true);
      get(n, "netdev", &nic.netdev, where);
      get(n, "kind", &nic.kind, where);
      if (n.contains("pci")) nic.pci = pciFromJson(n["pci"], where + ".pci");
      get(n, "speed_GBs", &nic.speedGBs, where);
      get(n, "port", &nic.port, where);
      get(n, "gid", &nic.gid, where);
      static const std::set<std::string> kinds{"ethernet", "ib", "roce", "virtual", "loopback"};
      if (!kinds.count(nic.kind))
        throw std::runtime_error(where + ".kind: '" + nic.kind +
                                 "' is not one of ethernet, ib, roce, virtual, loopback");
      s.nics.push_back(nic);
    }
  if (s.numa.empty()) s.numa.push_back(NumaNode{});
  if (s.packages == 0) s.packages = 1;
  return s;
}

}  // namespace

std::string systemToJson(const System& s) {
  json j{{"format", "coll-topology"},
         {"version", kVersion},
         {"host", s.host},
         {"host_id", s.hostId},
         {"packages", s.packages}};
  j["numa"] = json::array();
  for (const NumaNode& n : s.numa)
    j["numa"].push_back({{"id", n.id}, {"package", n.package}, {"cores", n.cores}, {"memory_bytes", n.memoryBytes}});
  j["gpus"] = json::array();
  for (const Gpu& g : s.gpus) {
    json links = json::array();
    for (const Gpu::Link& l : g.nvlinks) links.push_back({{"peer", l.peerBusId}, {"count", l.count}});
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"pci", pciToJson(g.pci)},
                         {"nvswitch_links", g.nvswitchLinks},
                         {"nvlink_GBs_per_link", g.nvlinkGBsPerLink},
                         {"nvlinks", links}});
  }
  j["nics"] = json::array();
  for (const Nic& n : s.nics)
    j["nics"].push_back({{"name", n.name},
                         {"netdev", n.netdev},
                         {"kind", n.kind},
                         {"pci", pciToJson(n.pci)},
                         {"speed_GBs", n.speedGBs},
                         {"port", n.port},
                         {"gid", n.gid}});
  return j.dump(2) + "\n";
}

bool systemFromJson(const std::string& text, System* out, std::string* error) {
  try {
    *out = parse(json::parse(text));
    return true;
  } catch (const json::parse_error& e) {
    *error = std::string("not valid JSON: ") + e.what();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return false;
}

bool loadSystemFile(const std::string& path, System* out, std::string* error) {
  std::ifstream in(path);
  if (!in) return *error = "cannot open topology file " + path, false;
  std::stringstream text;
  text << in.rdbuf();
  // NCCL's XML topology (an NCCL_TOPO_FILE) or coll's JSON, told apart by the first character.
  const std::string& body = text.str();
  size_t first = body.find_first_not_of(" \t\r\n");
  bool xml = first != std::string::npos && body[first] == '<';
  if (!(xml ? systemFromXml(body, out, error) : systemFromJson(body, out, error)))
    return *error = path + ": " + *error, false;
  out->source = path;
  return true;
}

bool saveSystemFile(const std::string& path, const System& s, std::string* error) {
  bool xml = path.size() >= 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
  std::ofstream f(path);
  if (!(f << (xml ? systemToXml(s) : systemToJson(s))) || !f.flush())
    return *error = "cannot write topology file " + path, false;
  return true;
}

}  // namespace coll::topo
