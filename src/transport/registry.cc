#include <cstring>

#include "base/params.h"
#include "transport/net/net.h"
#include "transport/transport.h"

namespace coll::transport {

namespace {
// Every transport, in priority order: the first that can connect a pair is used.
const Transport* const* allTransports(size_t* n) {
  static const Transport* const kAll[] = {&shmTransport(), &tcpTransport()};
  *n = sizeof(kAll) / sizeof(kAll[0]);
  return kAll;
}
}  // namespace

// The network transports: FIFO slots over a network provider (net/net.h), one per provider.
// Never freed, like a static: communicators destroyed at exit may still use it.
const Transport& tcpTransport() {
  static const Transport* t =
      net::newNetTransport("tcp", Caps{20.0, 1.5, size_t(64) << 20}, &net::openSocketProvider).release();
  return *t;
}

std::vector<const Transport*> registeredTransports() {
  size_t n;
  const Transport* const* all = allTransports(&n);
  std::vector<const Transport*> out;
  for (size_t i = 0; i < n; ++i)
    if (!(params::kShmDisable.get() && std::strcmp(all[i]->name(), "shm") == 0)) out.push_back(all[i]);
  return out;
}

const Transport* transportByName(const std::string& name) {
  size_t n;
  const Transport* const* all = allTransports(&n);
  for (size_t i = 0; i < n; ++i)
    if (name == all[i]->name()) return all[i];
  for (const Transport* t : deviceTransports())
    if (name == t->name()) return t;
  return nullptr;
}

std::vector<const Transport*> deviceTransports() {
  std::vector<const Transport*> out;
  if (!params::kP2PDisable.get()) out.push_back(&p2pTransport());
  if (!params::kShmDisable.get()) out.push_back(&shmTransport());
  out.push_back(&tcpTransport());
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
