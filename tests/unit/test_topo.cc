// Topology: the shipped files (tests/topo) replay a DGX-H100-like node, a two-socket and a
// one-socket server; path classes, NIC choice and ring orders are asserted on them. Topology
// files round-trip and malformed ones are refused with the field named. Detection on this machine
// finds what hwloc and /sys/class/net show.
#include <hwloc.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "algorithms/schedule.h"
#include "base/host_id.h"
#include "topo/cpu_place.h"
#include "topo/detect.h"
#include "topo/host_system.h"
#include "topo/ib_probe.h"
#include "topo/nvml_probe.h"
#include "topo/paths.h"
#include "topo/topo_file.h"
#include "topo/topo_xml.h"
#include "transport/net/nic_locality.h"

using namespace coll::topo;

namespace {

System load(const char* name) {
  System s;
  std::string error;
  std::string path = std::string(COLL_TOPO_DIR) + "/" + name;
  INFO(error);
  REQUIRE(loadSystemFile(path, &s, &error));
  return s;
}

Endpoint gpu(int i) { return {Endpoint::kGpu, i}; }
Endpoint nic(const System& s, const std::string& name) {
  for (size_t i = 0; i < s.nics.size(); ++i)
    if (s.nics[i].name == name) return {Endpoint::kNic, static_cast<int>(i)};
  FAIL("no NIC " << name);
  return {};
}
Endpoint numa(int id) { return {Endpoint::kNuma, id}; }

}  // namespace

TEST_CASE("topo: DGX-H100-like node", "[topo]") {
  System s = load("dgx-h100.json");
  REQUIRE(s.gpus.size() == 8);
  REQUIRE(s.packages == 2);
  // Every GPU pair over NVSwitch: 18 links of 25 GB/s.
  Path p = pathBetween(s, gpu(0), gpu(7));
  CHECK(p.type == PathType::kNvl);
  CHECK(p.GBs == Approx(450));
  CHECK(pathBetween(s, gpu(3), gpu(3)).type == PathType::kLoc);
  // GPU and its NIC share a PCIe switch; the neighbour pair's NIC is across the host bridge; the
  // other socket's NICs are across the inter-socket link.
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_0")).type == PathType::kPix);
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_1")).type == PathType::kPhb);
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_2")).type == PathType::kPhb);
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_4")).type == PathType::kSys);
  CHECK(pathBetween(s, nic(s, "mlx5_5"), gpu(5)).type == PathType::kPix);
  CHECK(pathBetween(s, numa(0), gpu(1)).type == PathType::kPhb);
  CHECK(pathBetween(s, numa(0), gpu(4)).type == PathType::kSys);
  CHECK(pathBetween(s, numa(0), numa(1)).type == PathType::kSys);
  // Each GPU takes the NIC behind its own switch; CPU ranks take their socket's fastest NIC.
  std::vector<Endpoint> eps;
  for (int i = 0; i < 8; ++i) eps.push_back(gpu(i));
  eps.push_back(numa(0));
  eps.push_back(numa(1));
  std::vector<int> pick = assignNics(s, eps);
  for (int i = 0; i < 8; ++i) CHECK(s.nics[pick[i]].name == "mlx5_" + std::to_string(i));
  CHECK(s.nics[pick[8]].name == "mlx5_0");
  CHECK(s.nics[pick[9]].name == "mlx5_4");
}

TEST_CASE("topo: the path between two GPUs by bus id decides p2p (COLL_P2P_LEVEL)", "[topo]") {
  System s = load("dgx-h100.json");
  PathType t = PathType::kNet;
  // CUDA spells the domain with 8 digits and may use capitals; hwloc with 4.
  REQUIRE(gpuPath(s, "00000000:18:00.0", "0000:2A:00.0", &t));
  CHECK(t == PathType::kNvl);
  REQUIRE(gpuPath(s, "0000:18:00.0", "00000000:18:00.0", &t));
  CHECK(t == PathType::kLoc);
  CHECK_FALSE(gpuPath(s, "0000:18:00.0", "0000:ff:00.0", &t));  // not a GPU of this host
  CHECK_FALSE(gpuPath(s, "", "0000:18:00.0", &t));
  // Without NVLink the same GPUs meet over PCIe: a host bridge or the inter-socket link, which
  // the default level (PXB) leaves to host-staged shm.
  for (Gpu& g : s.gpus) {
    g.nvswitchLinks = 0;
    g.nvlinks.clear();
  }
  REQUIRE(gpuPath(s, s.gpus[0].pci.busId, s.gpus[4].pci.busId, &t));
  CHECK(t == PathType::kSys);
  REQUIRE(gpuPath(s, s.gpus[0].pci.busId, s.gpus[1].pci.busId, &t));
  CHECK(t > PathType::kPxb);
  for (const char* name : {"LOC", "nvl", "Pix", "PXB", "PHB", "SYS"}) {
    INFO(name);
    CHECK(parsePathType(name, &t));
    CHECK(pathName(t) == [&] {
      std::string up(name);
      for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return up;
    }());
  }
  CHECK_FALSE(parsePathType("NVLINK", &t));
  CHECK_FALSE(parsePathType("", &t));
}

TEST_CASE("topo: two-socket CPU server", "[topo]") {
  System s = load("cpu-2socket.json");
  REQUIRE(s.numa.size() == 4);
  CHECK(pathBetween(s, numa(0), numa(1)).type == PathType::kPhb);  // same socket
  CHECK(pathBetween(s, numa(1), numa(2)).type == PathType::kSys);
  CHECK(pathBetween(s, numa(0), nic(s, "eth0")).type == PathType::kPhb);
  CHECK(pathBetween(s, numa(3), nic(s, "eth0")).type == PathType::kSys);
  CHECK(pathBetween(s, nic(s, "eth0"), nic(s, "mlx5_0")).type == PathType::kPhb);  // host bridges of one socket
  // Socket 0's NUMA nodes take the InfiniBand HCA (closest class, then fastest); socket 1's its
  // own Ethernet port rather than cross the sockets; loopback is never chosen.
  std::vector<int> pick = assignNics(s, {numa(0), numa(1), numa(2), numa(3)});
  CHECK(s.nics[pick[0]].name == "mlx5_0");
  CHECK(s.nics[pick[1]].name == "mlx5_0");
  CHECK(s.nics[pick[2]].name == "eth1");
  CHECK(s.nics[pick[3]].name == "eth1");
}

TEST_CASE("topo: single-socket node, virtual interfaces only as a last resort", "[topo]") {
  System s = load("cpu-1socket.json");
  std::vector<int> pick = assignNics(s, {numa(0)});
  CHECK(s.nics[pick[0]].name == "eno1");
  // With only virtual interfaces left, one of them is used rather than none.
  System v = s;
  v.nics.erase(v.nics.begin() + 1);
  pick = assignNics(v, {numa(0)});
  REQUIRE(pick[0] >= 0);
  CHECK(v.nics[pick[0]].kind != "ethernet");
  v.nics.clear();
  CHECK(assignNics(v, {numa(0)})[0] == -1);
}

TEST_CASE("topo: rings enter and leave each host once and follow sockets inside", "[topo]") {
  // Ranks launched round-robin over two hosts, and over the sockets of each.
  std::vector<RankPlace> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back({r % 2 ? "B" : "A", (r / 2) % 2, (r / 2) % 2, -1});
  std::vector<int> order = ringOrder(ranks);
  CHECK(order == std::vector<int>{0, 4, 2, 6, 1, 5, 3, 7});
  int hostChanges = 0;
  for (size_t i = 0; i < order.size(); ++i)
    hostChanges += ranks[order[i]].hostId != ranks[order[(i + 1) % order.size()]].hostId;
  CHECK(hostChanges == 2);
  // GPUs in device order inside a host.
  std::vector<RankPlace> gpus;
  for (int g : {3, 1, 2, 0}) gpus.push_back({"A", 0, 0, g});
  CHECK(ringOrder(gpus) == std::vector<int>{3, 1, 2, 0});
}

TEST_CASE("topo: files round-trip; malformed ones are refused with the field named", "[topo]") {
  System s = load("dgx-h100.json");
  System back;
  std::string error;
  REQUIRE(systemFromJson(systemToJson(s), &back, &error));
  CHECK(systemToJson(back) == systemToJson(s));

  auto refused = [](const std::string& text) {
    System x;
    std::string e;
    CHECK_FALSE(systemFromJson(text, &x, &e));
    return e;
  };
  CHECK(refused("{").find("not valid JSON") != std::string::npos);
  CHECK(refused(R"({"format": "nccl", "version": 1})").find("not coll-topology") != std::string::npos);
  CHECK(refused(R"({"format": "coll-topology", "version": 7})").find("version 7") != std::string::npos);
  CHECK(refused(R"({"format": "coll-topology", "version": 1, "gpuz": []})").find("unknown key 'gpuz'") !=
        std::string::npos);
  CHECK(refused(R"({"format": "coll-topology", "version": 1, "nics": [{"name": "x", "kind": "wifi"}]})")
            .find("nics[0].kind") != std::string::npos);
  CHECK(refused(R"({"format": "coll-topology", "version": 1, "numa": [{"id": "zero"}]})").find("numa[0].id") !=
        std::string::npos);
  CHECK(refused(R"({"format": "coll-topology", "version": 1, "nics": [{"kind": "ib"}]})").find("missing 'name'") !=
        std::string::npos);
  CHECK_FALSE(loadSystemFile("/nonexistent/topo.json", &back, &error));
  CHECK(error.find("/nonexistent/topo.json") != std::string::npos);
}

namespace {
// Every endpoint pair's path class (and bandwidth off NVLink, which depends on the SM version an
// XML file gives and a JSON one does not), by the endpoints' names.
std::map<std::string, std::string> pathTable(const System& s) {
  std::vector<std::pair<std::string, Endpoint>> eps;
  for (size_t i = 0; i < s.gpus.size(); ++i)
    eps.push_back({"gpu" + std::to_string(s.gpus[i].index), gpu(static_cast<int>(i))});
  for (size_t i = 0; i < s.nics.size(); ++i) eps.push_back({s.nics[i].name, {Endpoint::kNic, static_cast<int>(i)}});
  for (const NumaNode& n : s.numa) eps.push_back({"numa" + std::to_string(n.id), numa(n.id)});
  std::map<std::string, std::string> out;
  for (const auto& [an, a] : eps)
    for (const auto& [bn, b] : eps) {
      Path p = pathBetween(s, a, b);
      out[an + " " + bn] =
          std::string(pathName(p.type)) + (p.type == PathType::kNvl ? "" : fmt::format(" {:.1f}", p.GBs));
    }
  return out;
}

// The pairs whose paths differ between two systems, as "a b: X here, Y there".
std::vector<std::string> pathDiff(const System& a, const System& b) {
  auto ta = pathTable(a), tb = pathTable(b);
  std::vector<std::string> out;
  for (const auto& [k, v] : ta)
    if (tb[k] != v) out.push_back(k + ": " + v + " here, " + tb[k] + " there");
  if (ta.size() != tb.size()) out.push_back("the endpoint sets differ");
  return out;
}
}  // namespace

TEST_CASE("topo: NCCL's XML topology (NCCL_TOPO_FILE): a DGX-like node and a cloud VM with several NICs",
          "[topo][xml]") {
  System s = load("dgx-h100.xml");
  REQUIRE(s.gpus.size() == 8);
  REQUIRE(s.nics.size() == 9);
  CHECK(s.packages == 2);
  CHECK(s.numa.size() == 2);
  CHECK(s.numa[0].cores == 56);
  // NVSwitch: 18 links at H100's 20.6 GB/s each.
  Path p = pathBetween(s, gpu(0), gpu(7));
  CHECK(p.type == PathType::kNvl);
  CHECK(p.GBs == Approx(18 * 20.6));
  // The GPU and its NIC below one switch; the neighbour below the same upstream switch; the
  // other tree of the socket at its host bridge; the other socket across it.
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_0")).type == PathType::kPix);
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_1")).type == PathType::kPxb);
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_2")).type == PathType::kPhb);
  CHECK(pathBetween(s, gpu(0), nic(s, "mlx5_4")).type == PathType::kSys);
  CHECK(pathBetween(s, gpu(5), nic(s, "enp170s0f0")).type == PathType::kPhb);
  // Gen5 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63 GB/s; the NIC's 400 Gb/s = 50 GB/s.
  CHECK(s.gpus[0].pci.linkGBs == Approx(63.0).epsilon(0.01));
  CHECK(s.nics[static_cast<size_t>(nic(s, "mlx5_3").index)].speedGBs == Approx(50));
  CHECK(s.nics[static_cast<size_t>(nic(s, "mlx5_3").index)].kind == "ib");
  CHECK(s.nics[static_cast<size_t>(nic(s, "enp170s0f0").index)].kind == "ethernet");
  std::vector<Endpoint> eps;
  for (int i = 0; i < 8; ++i) eps.push_back(gpu(i));
  std::vector<int> pick = assignNics(s, eps);
  for (int i = 0; i < 8; ++i)
    CHECK(s.nics[static_cast<size_t>(pick[static_cast<size_t>(i)])].name == "mlx5_" + std::to_string(i));

  System vm = load("cloud-vm-4nic.xml");
  REQUIRE(vm.gpus.size() == 4);
  REQUIRE(vm.nics.size() == 5);
  CHECK(pathBetween(vm, gpu(1), gpu(2)).GBs == Approx(12 * 20.0));
  CHECK(pathBetween(vm, gpu(3), nic(vm, "mlx5_3")).type == PathType::kPix);
  CHECK(pathBetween(vm, gpu(0), nic(vm, "mlx5_1")).type == PathType::kPhb);
  CHECK(pathBetween(vm, gpu(0), nic(vm, "mlx5_2")).type == PathType::kSys);
  const Nic& eth = vm.nics[static_cast<size_t>(nic(vm, "eth0").index)];
  CHECK(eth.kind == "virtual");
  CHECK(eth.netdev == "eth0");
  CHECK(eth.speedGBs == Approx(5));
  eps.clear();
  for (int i = 0; i < 4; ++i) eps.push_back(gpu(i));
  pick = assignNics(vm, eps);
  for (int i = 0; i < 4; ++i)
    CHECK(vm.nics[static_cast<size_t>(pick[static_cast<size_t>(i)])].name == "mlx5_" + std::to_string(i));
}

TEST_CASE("topo: XML dumps read back with the same paths; malformed XML is refused with the element named",
          "[topo][xml]") {
  for (const char* name : {"dgx-h100.xml", "cloud-vm-4nic.xml", "dgx-h100.json", "cpu-2socket.json"}) {
    INFO(name);
    System s = load(name);
    std::string xml = systemToXml(s);
    System back;
    std::string error;
    INFO(xml);
    REQUIRE(systemFromXml(xml, &back, &error));
    CHECK(back.gpus.size() == s.gpus.size());
    CHECK(back.nics.size() == s.nics.size());
    CHECK(pathDiff(back, s) == std::vector<std::string>{});
    for (size_t i = 0; i < s.nics.size(); ++i) {
      CHECK(back.nics[i].name == s.nics[i].name);
      CHECK(back.nics[i].speedGBs == Approx(s.nics[i].speedGBs));
    }
    // And again: a dump of what was read is the same text.
    CHECK(systemToXml(back) == xml);
  }
  auto refused = [](const std::string& text) {
    System x;
    std::string e;
    CHECK_FALSE(systemFromXml(text, &x, &e));
    return e;
  };
  CHECK_THAT(refused("<system><cpu numaid=\"0\">"), Catch::Contains("not valid XML (line"));
  CHECK_THAT(refused("<topology/>"), Catch::Contains("<topology> on line 1: the root element"));
  CHECK_THAT(refused("<system>\n<cpu numaid=\"0\"><gpus/></cpu></system>"),
             Catch::Contains("<gpus> on line 2: an element NCCL's topology has no place for inside <cpu>"));
  CHECK_THAT(refused("<system><cpu/></system>"), Catch::Contains("<cpu> on line 1: missing attribute 'numaid'"));
  CHECK_THAT(refused("<system><cpu numaid=\"x\"/></system>"), Catch::Contains("numaid=\"x\" is not an integer"));
  CHECK_THAT(refused("<system><cpu numaid=\"0\"><pci><gpu dev=\"0\"/></pci></cpu></system>"),
             Catch::Contains("<pci> on line 1: missing attribute 'busid'"));
}

TEST_CASE("topo: a network's devices nearest a rank, from their PCI paths (NCCL's pciPath)", "[topo][net]") {
  namespace tn = coll::transport::net;
  std::string file = std::string(COLL_TOPO_DIR) + "/dgx-h100.xml";
  setenv("COLL_TOPO_FILE", file.c_str(), 1);
  std::vector<tn::DeviceSpot> devs;
  const char* b[8][3] = {{"15", "16", "17"}, {"15", "28", "29"}, {"37", "38", "39"}, {"37", "5b", "5c"},
                         {"97", "98", "99"}, {"97", "a8", "aa"}, {"b7", "b8", "b9"}, {"b7", "d8", "da"}};
  for (int i = 0; i < 8; ++i)
    devs.push_back(
        {"mlx5_" + std::to_string(i), fmt::format("/sys/devices/pci0000:{}/0000:{}:00.0/0000:{}:00.0/0000:{}:00.0",
                                                  b[i][0], b[i][0], b[i][1], b[i][2])});
  tn::Config c;
  std::string why;
  // A GPU rank: the NIC beside its GPU, under one switch.
  c.cudaDev = 5;
  CHECK(tn::nearestDevices(devs, c, &why) == std::vector<int>{5});
  CHECK(why == "mlx5_5 (PIX from GPU 5)");
  // CPU ranks: their socket's NICs, all four.
  c.cudaDev = -1;
  c.numa = 1;
  CHECK(tn::nearestDevices(devs, c, &why) == std::vector<int>{4, 5, 6, 7});
  // Devices the topology does not know count as farthest; none known: all of them.
  devs[5].pciPath = "/sys/devices/virtual/nic9";
  devs[5].name = "nic9";
  CHECK(tn::nearestDevices(devs, c) == std::vector<int>{4, 6, 7});
  std::vector<tn::DeviceSpot> unknown{{"a", "/x/0000:01:00.0"}, {"b", ""}};
  CHECK(tn::nearestDevices(unknown, c, &why) == std::vector<int>{0, 1});
  CHECK_THAT(why, Catch::Contains("the topology places none of the devices"));
  unsetenv("COLL_TOPO_FILE");
}

TEST_CASE("topo: UCX's RDMA ports nearest a rank, spelled for UCX_NET_DEVICES", "[topo][net]") {
  namespace tn = coll::transport::net;
  std::string file = std::string(COLL_TOPO_DIR) + "/dgx-h100.xml";
  setenv("COLL_TOPO_FILE", file.c_str(), 1);
  // The DGX's eight NICs by their bus ids in dgx-h100.xml; one port each, and a second port on mlx5_4.
  const char* b[8][3] = {{"15", "16", "17"}, {"15", "28", "29"}, {"37", "38", "39"}, {"37", "5b", "5c"},
                         {"97", "98", "99"}, {"97", "a8", "aa"}, {"b7", "b8", "b9"}, {"b7", "d8", "da"}};
  std::map<std::string, std::string> paths;
  std::vector<coll::topo::IbPort> ports;
  for (int i = 0; i < 8; ++i) {
    std::string dev = "mlx5_" + std::to_string(i);
    paths[dev] = fmt::format("/sys/devices/pci0000:{}/0000:{}:00.0/0000:{}:00.0/0000:{}:00.0", b[i][0], b[i][0],
                             b[i][1], b[i][2]);
    coll::topo::IbPort p;
    p.device = dev;
    p.active = true;
    ports.push_back(p);
  }
  ports[4].active = false;  // a port that is down is never named
  coll::topo::IbPort second = ports[5];
  second.port = 2;
  ports.push_back(second);
  auto pathOf = [&](const std::string& dev) { return paths.count(dev) ? paths[dev] : std::string(); };
  tn::Config c;
  std::string why;
  c.cudaDev = 3;
  CHECK(tn::ucxNetDevices(ports, c, pathOf, &why) == "mlx5_3:1");
  CHECK(why == "mlx5_3 (PIX from GPU 3)");
  c.cudaDev = 5;
  CHECK(tn::ucxNetDevices(ports, c, pathOf) == "mlx5_5:1,mlx5_5:2");
  c.cudaDev = -1;
  c.numa = 1;
  CHECK(tn::ucxNetDevices(ports, c, pathOf, &why) == "mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_5:2");
  // No choice to make: UCX picks. One active port; none placed by the topology; all at one distance.
  std::vector<coll::topo::IbPort> one{ports[0]};
  CHECK(tn::ucxNetDevices(one, c, pathOf, &why).empty());
  CHECK(why == "one active RDMA port");
  std::vector<coll::topo::IbPort> strangers{ports[0], ports[1]};  // neither by PCI path nor by name
  strangers[0].device = "rxe0";
  strangers[1].device = "rxe1";
  CHECK(tn::ucxNetDevices(strangers, c, pathOf, &why).empty());
  CHECK_THAT(why, Catch::Contains("the topology places none of the devices"));
  // Without PCI paths the topology still places the ports by their device names.
  CHECK(tn::ucxNetDevices(ports, c, [](const std::string&) { return std::string(); }) ==
        "mlx5_5:1,mlx5_6:1,mlx5_7:1,mlx5_5:2");
  std::vector<coll::topo::IbPort> socket1{ports[5], ports[6], ports[7]};
  CHECK(tn::ucxNetDevices(socket1, c, pathOf).empty());
  unsetenv("COLL_TOPO_FILE");
}

TEST_CASE("topo: COLL_TOPO_FILE replaces detection, and a bad one is an error", "[topo]") {
  std::string path = std::string(COLL_TOPO_DIR) + "/cpu-2socket.json";
  setenv("COLL_TOPO_FILE", path.c_str(), 1);
  auto r = coll::localSystem();
  REQUIRE(r.isOk());
  CHECK(r->host == "cpu2s");
  CHECK(r->source == path);
  setenv("COLL_TOPO_FILE", "/nonexistent.json", 1);
  auto bad = coll::localSystem();
  CHECK_FALSE(bad.isOk());
  CHECK(bad.status().code() == collInvalidArgument);
  CHECK(bad.status().message().find("COLL_TOPO_FILE") != std::string::npos);
  unsetenv("COLL_TOPO_FILE");

  // Dump, then replay what was dumped.
  char dump[] = "/tmp/coll-topo-XXXXXX";
  int fd = mkstemp(dump);
  REQUIRE(fd >= 0);
  close(fd);
  setenv("COLL_TOPO_DUMP_FILE", dump, 1);
  REQUIRE(coll::dumpSystemIfAsked(*r).isOk());
  unsetenv("COLL_TOPO_DUMP_FILE");
  System again;
  std::string error;
  REQUIRE(loadSystemFile(dump, &again, &error));
  CHECK(systemToJson(again) == systemToJson(*r));
  unlink(dump);

  // NCCL's XML: a file NCCL_TOPO_FILE would name is read (host and host id are this machine's), and
  // a dump file whose name ends in .xml is written in that format.
  std::string xml = std::string(COLL_TOPO_DIR) + "/cloud-vm-4nic.xml";
  setenv("COLL_TOPO_FILE", xml.c_str(), 1);
  auto fromXml = coll::localSystem();
  unsetenv("COLL_TOPO_FILE");
  REQUIRE(fromXml.isOk());
  CHECK(fromXml->gpus.size() == 4);
  CHECK(fromXml->host == coll::hostName());
  CHECK(!fromXml->hostId.empty());
  std::string xmlDump = std::string(dump) + ".xml";
  setenv("COLL_TOPO_DUMP_FILE", xmlDump.c_str(), 1);
  REQUIRE(coll::dumpSystemIfAsked(*fromXml).isOk());
  unsetenv("COLL_TOPO_DUMP_FILE");
  std::ifstream in(xmlDump);
  std::string head;
  std::getline(in, head);
  CHECK(head == "<system version=\"1\">");
  REQUIRE(loadSystemFile(xmlDump, &again, &error));
  CHECK(pathDiff(again, *fromXml) == std::vector<std::string>{});
  unlink(xmlDump.c_str());
}

TEST_CASE("topo: detection on this machine matches hwloc and /sys/class/net", "[topo]") {
  System s = detectSystem("h", "id");
  CHECK(s.host == "h");
  hwloc_topology_t t;
  REQUIRE(hwloc_topology_init(&t) == 0);
  REQUIRE(hwloc_topology_load(t) == 0);
  CHECK(static_cast<int>(s.numa.size()) == std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE)));
  CHECK(s.packages == std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE)));
  int cores = 0;
  for (const auto& n : s.numa) cores += n.cores;
  CHECK(cores == hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
  hwloc_topology_destroy(t);
  // Every interface in /sys/class/net is listed once, loopback as loopback.
  bool lo = false;
  for (const auto& n : s.nics) {
    if (n.netdev == "lo") lo = n.kind == "loopback";
    if (!n.netdev.empty() && n.kind != "ib") CHECK(access(("/sys/class/net/" + n.netdev).c_str(), F_OK) == 0);
  }
  CHECK(lo);
}

TEST_CASE("topo: the calling thread's package and NUMA node agree with hwloc", "[topo]") {
  hwloc_topology_t t;
  REQUIRE(hwloc_topology_init(&t) == 0);
  REQUIRE(hwloc_topology_load(t) == 0);
  int nNuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  REQUIRE(hwloc_get_cpubind(t, set, HWLOC_CPUBIND_THREAD) == 0);
  // The NUMA node and package that hold every allowed CPU, if one does.
  int numa = -1, package = -1;
  for (int i = 0; i < nNuma; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    if (hwloc_bitmap_isincluded(set, n->cpuset)) numa = static_cast<int>(n->os_index);
  }
  for (int i = 0; i < hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE); ++i) {
    hwloc_obj_t p = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i);
    if (hwloc_bitmap_isincluded(set, p->cpuset)) package = static_cast<int>(p->os_index);
  }
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);
  coll::topo::CpuPlace mine = coll::topo::cpuPlace();
  CHECK(mine.numa == numa);
  CHECK(mine.package == package);
}

TEST_CASE("topo: sockets use the interface closest to the rank's NUMA node", "[topo]") {
  System s = load("cpu-2socket.json");
  auto up = [](std::vector<std::string> names) {
    std::vector<coll::net::Interface> v;
    for (const auto& n : names) {
      coll::net::Interface i;
      i.name = n;
      i.up = true;
      i.loopback = n == "lo";
      v.push_back(i);
    }
    return v;
  };
  // The InfiniBand HCA has no interface here: socket 0's NUMA nodes take eth0, socket 1's eth1.
  auto both = up({"lo", "eth0", "eth1"});
  CHECK(coll::socketInterfaceByLocality(s, 0, both) == "eth0");
  CHECK(coll::socketInterfaceByLocality(s, 1, both) == "eth0");
  CHECK(coll::socketInterfaceByLocality(s, 2, both) == "eth1");
  CHECK(coll::socketInterfaceByLocality(s, 3, both) == "eth1");
  CHECK(coll::socketInterfaceByLocality(s, -1, both) == "eth0");  // unbound: the first NUMA node's
  // A port that is down is not chosen; with nothing but loopback up, loopback.
  CHECK(coll::socketInterfaceByLocality(s, 3, up({"lo", "eth0"})) == "eth0");
  CHECK(coll::socketInterfaceByLocality(s, 3, up({"lo"})) == "lo");
  CHECK(coll::socketInterfaceByLocality(s, 3, up({"wlan0"})).empty());  // the System knows none of them
}

TEST_CASE("topo: verbs port rates and GIDs, NVML bus ids; both probes fail soft here", "[topo]") {
  CHECK(ibRateGbps(2, 128) == 400);  // 4x NDR
  CHECK(ibRateGbps(2, 64) == 200);   // 4x HDR
  CHECK(ibRateGbps(2, 32) == 100);   // 4x EDR
  CHECK(ibRateGbps(1, 16) == 14);    // 1x FDR
  CHECK(ibRateGbps(3, 32) == 0);     // no such width
  CHECK(ibRateGbps(2, 0) == 0);
  const unsigned char gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0a, 0x88, 0x66, 0xff, 0xfe, 0x01, 0x02, 0x03};
  CHECK(formatGid(gid) == "fe80:0000:0000:0000:0a88:66ff:fe01:0203");
  CHECK(normalizeBusId("00000000:3B:00.0") == "0000:3b:00.0");
  CHECK(normalizeBusId("0000:3b:00.0") == "0000:3b:00.0");
  CHECK(normalizeBusId("garbage") == "garbage");
  // Without the hardware the probes say why, and detection goes on.
  const IbInfo& ib = ibInfo();
  if (ib.devices.empty()) CHECK_FALSE(ib.why.empty());
  for (const IbPort& p : ib.ports) CHECK(p.port >= 1);
  NvLinks links;
  std::string why;
  if (!nvlinksOf("0000:3b:00.0", &links, &why)) CHECK_FALSE(why.empty());
}

TEST_CASE("topo: two DGX-like nodes with ranks round-robin: rings and trees keep to hosts and sockets", "[topo]") {
  // 16 ranks, rank r on node r % 2 with GPU r / 2, as a launcher placing ranks round-robin would.
  System s = load("dgx-h100.json");
  REQUIRE(s.gpus.size() == 8);
  std::vector<RankPlace> ranks;
  for (int r = 0; r < 16; ++r) {
    int g = r / 2;
    int numa = s.gpus[g].pci.numa;
    ranks.push_back({r % 2 ? "nodeB" : "nodeA", packageOf(s, numa), numa, g});
  }
  auto crossings = [&](const std::vector<int>& order, bool socket) {
    // Edges of the ring and of both trees that leave a node (or, with socket, a package).
    auto apart = [&](int a, int b) {
      return ranks[a].hostId != ranks[b].hostId || (socket && ranks[a].package != ranks[b].package);
    };
    int ring = 0, trees = 0;
    for (int p = 0; p < 16; ++p) ring += apart(order[p], order[(p + 1) % 16]);
    for (int which = 0; which < 2; ++which)
      for (int p = 0; p < 16; ++p) {
        int parent = coll::algorithms::doubleBinaryTree(16, p, which).parent;
        if (parent >= 0) trees += apart(order[p], order[parent]);
      }
    return std::make_pair(ring, trees);
  };
  std::vector<int> byRank(16);
  for (int r = 0; r < 16; ++r) byRank[r] = r;
  std::vector<int> order = ringOrder(ranks);
  auto [ringHosts, treeHosts] = crossings(order, false);
  auto [rankRingHosts, rankTreeHosts] = crossings(byRank, false);
  CHECK(ringHosts == 2);
  CHECK(rankRingHosts == 16);
  CHECK(treeHosts <= 4);       // each tree enters the other node at most twice
  CHECK(rankTreeHosts >= 15);  // in rank order almost every tree edge crosses nodes
  // Inside a node, GPUs 0-3 are on socket 0 and 4-7 on socket 1: the ring crosses sockets twice
  // per node, not at every hop.
  // A binary tree over 4 groups of 4 positions needs 3 edges between groups; these have 5 each.
  auto [ringSockets, treeSockets] = crossings(order, true);
  auto [rankRingSockets, rankTreeSockets] = crossings(byRank, true);
  CHECK(ringSockets == 4);
  CHECK(treeSockets <= 10);
  CHECK(rankRingSockets == 16);
  CHECK(rankTreeSockets >= 2 * treeSockets);
  INFO("trees cross nodes " << treeHosts << " times (rank order " << rankTreeHosts << "), nodes or sockets "
                            << treeSockets << " (rank order " << rankTreeSockets << ")");
  CHECK(order == std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15});
}
