// Built without UCX (libucx-dev absent, or COLL_ENABLE_UCX=OFF): there is no "ucx" transport,
// and COLL_NET=ucx says so at communicator init.
#include "transport/transport.h"

namespace coll::transport {

const Transport* ucxTransport() { return nullptr; }

std::string ucxUnavailable() { return "this build of coll has no UCX provider (install libucx-dev and rebuild coll)"; }

}  // namespace coll::transport
