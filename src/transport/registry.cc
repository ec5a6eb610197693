#include <cstring>

#include "core/params.h"
#include "transport/transport.h"

namespace coll::transport {

std::vector<const Transport*> registeredTransports() {
  // Priority order: the first transport that can connect a pair is used.
  std::vector<const Transport*> out;
  if (!params::kShmDisable.get()) out.push_back(&shmTransport());
  out.push_back(&tcpTransport());
  return out;
}

const Transport* selectTransport(const bootstrap::RankInfo& me, const bootstrap::RankInfo& peer) {
  for (const Transport* t : registeredTransports())
    if (t->canConnect(me, peer)) return t;
  return nullptr;
}

}  // namespace coll::transport
