#include <catch2/catch.hpp>

#include "base/ifaddr.h"
#include "core/tuning.h"

using namespace coll::net;

namespace {
Interface iface(const char* name, const char* ip, bool loopback = false, bool up = true) {
  Interface i;
  i.name = name;
  i.address = *Address::resolve(ip, 0);
  i.loopback = loopback;
  i.up = up;
  return i;
}

// lo, docker0, eth0, eth1 (v4 and v6), ib0
std::vector<Interface> machine() {
  return {iface("lo", "127.0.0.1", true), iface("docker0", "172.17.0.1"), iface("eth0", "10.0.0.5"),
          iface("eth1", "10.1.0.5"),      iface("eth1", "fd00::5"),       iface("ib0", "192.168.1.5")};
}

std::string pick(const std::vector<Interface>& ifs, const std::string& spec, const std::string& family = "") {
  auto r = selectInterface(ifs, spec, family);
  return r.isOk() ? r->name + " " + r->address.hostString() : "error: " + r.status().message();
}
}  // namespace

TEST_CASE("COLL_SOCKET_IFNAME syntax", "[ifname]") {
  auto f = IfnameFilter::parse("eth,ib");
  CHECK(f.matches("eth0"));
  CHECK(f.matches("ib1"));
  CHECK_FALSE(f.matches("lo"));

  f = IfnameFilter::parse("^docker,lo");
  CHECK(f.exclude);
  CHECK(f.matches("eth0"));
  CHECK_FALSE(f.matches("docker0"));
  CHECK_FALSE(f.matches("lo"));

  f = IfnameFilter::parse("=eth1");
  CHECK(f.exact);
  CHECK(f.matches("eth1"));
  CHECK_FALSE(f.matches("eth10"));

  f = IfnameFilter::parse("^=eth1");
  CHECK(f.exclude);
  CHECK(f.exact);
  CHECK(f.matches("eth10"));
  CHECK_FALSE(f.matches("eth1"));
}

TEST_CASE("interface selection", "[ifname]") {
  auto m = machine();
  CHECK(pick(m, "") == "eth0 10.0.0.5");  // first non-loopback, docker skipped
  CHECK(pick(m, "ib") == "ib0 192.168.1.5");
  CHECK(pick(m, "^eth,docker") == "ib0 192.168.1.5");  // lo is only taken when named or as the last resort
  CHECK(pick(m, "=lo") == "lo 127.0.0.1");
  CHECK(pick(m, "eth1") == "eth1 10.1.0.5");                            // IPv4 preferred
  CHECK(pick(m, "eth1", "AF_INET6") == "eth1 fd00::5");                 // unless IPv6 is asked for
  CHECK(pick({iface("lo", "127.0.0.1", true)}, "") == "lo 127.0.0.1");  // fallback to loopback
  CHECK(pick({iface("eth0", "fd00::7")}, "") == "eth0 fd00::7");        // IPv6-only machine

  // The NIC by locality is preferred when no COLL_SOCKET_IFNAME is given; a name that is not up is ignored.
  CHECK(selectInterface(m, "", "", "eth1")->name == "eth1");
  CHECK(selectInterface(m, "", "", "eth9")->name == "eth0");
  CHECK(selectInterface(m, "ib", "", "eth1")->name == "ib0");  // COLL_SOCKET_IFNAME wins

  auto none = pick(m, "wlan");
  CHECK_THAT(none, Catch::Contains("COLL_SOCKET_IFNAME='wlan' matches no up interface"));
  CHECK_THAT(none, Catch::Contains("eth0 10.0.0.5"));  // the message lists what exists
  CHECK_THAT(pick(m, "", "AF_UNIX"), Catch::Contains("COLL_SOCKET_FAMILY"));
  CHECK_THAT(pick({iface("eth0", "10.0.0.1", false, false)}, ""), Catch::StartsWith("error"));
}

TEST_CASE("the real machine has a usable interface", "[ifname]") {
  auto ifs = listInterfaces();
  REQUIRE_FALSE(ifs.empty());
  auto r = selectInterface(ifs, "", "");
  REQUIRE(r.isOk());
  CHECK(r->address.port() == 0);
}

TEST_CASE("link speeds: virtual interfaces have none; the tuner takes the slowest rank's link", "[ifname]") {
  CHECK(linkSpeedMbps("lo") == 0);
  CHECK(linkSpeedMbps("no-such-interface") == 0);
  CHECK(coll::netBetaByLinks(1.5, {10000, 25000}) == 1.25);   // 10 GbE caps the model
  CHECK(coll::netBetaByLinks(1.5, {100000, 400000}) == 1.5);  // faster links than TCP achieves
  CHECK(coll::netBetaByLinks(1.5, {0, 10000}) == 1.5);        // a rank without a known speed
  CHECK(coll::netBetaByLinks(1.5, {}) == 1.5);
}

TEST_CASE("core sharing: from the rank table, so every rank decides alike", "[tuner]") {
  using coll::bootstrap::RankInfo;
  auto rank = [](uint64_t machine, uint64_t host, int cores, int online) {
    RankInfo r{};
    r.machineHash = machine;
    r.hostHash = host;
    r.cores = cores;
    r.onlineCpus = online;
    return r;
  };
  // 4 namespace hosts x 2 unbound ranks on one 2-core machine: 4 ranks per core, 4 hosts on it.
  std::vector<RankInfo> netns;
  for (int h = 0; h < 4; ++h)
    for (int l = 0; l < 2; ++l) netns.push_back(rank(7, 100 + h, 2, 2));
  coll::CoreSharing s = coll::coreSharing(netns);
  CHECK(s.ranksPerCore == 4);
  CHECK(s.hostsPerMachine == 4);
  // Two real 16-core machines, 8 ranks each bound to one core: no oversubscription.
  std::vector<RankInfo> bound;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 8; ++l) bound.push_back(rank(h + 1, h + 1, 1, 16));
  s = coll::coreSharing(bound);
  CHECK(s.ranksPerCore == 1);
  CHECK(s.hostsPerMachine == 1);
  // The busiest machine decides: 8 unbound ranks on a 4-core machine next to a quiet one.
  std::vector<RankInfo> mixed = bound;
  for (int l = 0; l < 8; ++l) mixed.push_back(rank(9, 9, 4, 4));
  CHECK(coll::coreSharing(mixed).ranksPerCore == 2);
}
