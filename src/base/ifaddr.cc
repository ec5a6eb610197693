#include "base/ifaddr.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdio>

#include <cstring>
#include <sstream>

#include "base/log.h"
#include "base/params.h"

namespace coll::net {

IfnameFilter IfnameFilter::parse(const std::string& spec) {
  IfnameFilter f;
  std::string s = spec;
  if (!s.empty() && s[0] == '^') {
    f.exclude = true;
    s = s.substr(1);
  }
  if (!s.empty() && s[0] == '=') {
    f.exact = true;
    s = s.substr(1);
  }
  std::stringstream ss(s);
  std::string name;
  while (std::getline(ss, name, ','))
    if (!name.empty()) f.names.push_back(name);
  return f;
}

bool IfnameFilter::matches(const std::string& ifname) const {
  bool hit = false;
  for (const auto& n : names) {
    if (exact ? ifname == n : ifname.compare(0, n.size(), n) == 0) {
      hit = true;
      break;
    }
  }
  return exclude ? !hit : hit;
}

std::vector<Interface> listInterfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || !(it->ifa_flags & IFF_UP)) continue;
    int fam = it->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6) {
      // Link-local addresses need a scope id that peers on other hosts cannot use.
      auto* a6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
    }
    Interface i;
    i.name = it->ifa_name;
    i.up = true;
    i.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    i.address.length = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&i.address.storage, it->ifa_addr, i.address.length);
    out.push_back(i);
  }
  freeifaddrs(list);
  return out;
}

namespace {

// The first interface (in kernel order) that passes `accept`, preferring the wanted family.
template <typename Pred>
const Interface* firstMatch(const std::vector<Interface>& ifs, int family, Pred accept) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& i : ifs) {
      if (!i.up || !accept(i)) continue;
      if (family != 0 && i.address.family() != family) continue;
      // Pass 0 takes IPv4 only when no family was asked for; pass 1 takes anything left.
      if (family == 0 && pass == 0 && i.address.family() != AF_INET) continue;
      return &i;
    }
    if (family != 0) break;
  }
  return nullptr;
}

}  // namespace

Result<Interface> selectInterface(const std::vector<Interface>& interfaces, const std::string& spec,
                                  const std::string& family, const std::string& preferred) {
  int fam = 0;
  if (family == "AF_INET")
    fam = AF_INET;
  else if (family == "AF_INET6")
    fam = AF_INET6;
  else if (!family.empty())
    return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_SOCKET_FAMILY='{}' is not AF_INET or AF_INET6"), family);

  if (!spec.empty()) {
    IfnameFilter f = IfnameFilter::parse(spec);
    // Loopback only when nothing else matches: "^docker" means "a real interface, not docker".
    const Interface* i =
        firstMatch(interfaces, fam, [&](const Interface& x) { return !x.loopback && f.matches(x.name); });
    if (!i) i = firstMatch(interfaces, fam, [&](const Interface& x) { return f.matches(x.name); });
    if (i) return *i;
    std::string seen;
    for (const auto& x : interfaces) seen += (seen.empty() ? "" : ", ") + x.name + " " + x.address.hostString();
    return COLL_ERROR(collInvalidArgument,
                      FMT_STRING("COLL_SOCKET_IFNAME='{}' matches no up interface{} (interfaces: {})"), spec,
                      fam ? " of family " + family : "", seen.empty() ? "none" : seen);
  }
  const Interface* i = nullptr;
  if (!preferred.empty()) i = firstMatch(interfaces, fam, [&](const Interface& x) { return x.name == preferred; });
  if (!i)
    i = firstMatch(interfaces, fam,
                   [](const Interface& x) { return !x.loopback && x.name.compare(0, 6, "docker") != 0; });
  if (!i) i = firstMatch(interfaces, fam, [](const Interface& x) { return x.loopback; });
  if (!i) return COLL_ERROR(collSystemError, FMT_STRING("no usable network interface (not even loopback) is up"));
  return *i;
}

bool isPhysical(const std::string& name) { return access(("/sys/class/net/" + name + "/device").c_str(), F_OK) == 0; }

int linkSpeedMbps(const std::string& name) {
  if (!isPhysical(name)) return 0;  // veth and bridges report a nominal speed
  FILE* f = std::fopen(("/sys/class/net/" + name + "/speed").c_str(), "r");
  if (!f) return 0;
  long mbps = 0;
  if (std::fscanf(f, "%ld", &mbps) != 1 || mbps < 0 || mbps > (1L << 30)) mbps = 0;
  std::fclose(f);
  return static_cast<int>(mbps);
}

Result<Interface> selectInterfaceFromEnv(const std::string& preferred) {
  auto r = selectInterface(listInterfaces(), params::kSocketIfname.get(), params::kSocketFamily.get(), preferred);
  if (r.isOk()) COLL_LOG(TRACE, NET, "using interface {} {}", r->name, r->address.hostString());
  return r;
}

}  // namespace coll::net
