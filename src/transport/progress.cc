#include "transport/progress.h"

#include <algorithm>

namespace coll::transport {

void Progress::add(Connection* c, bool sends) {
  if (!c || !c->info().proxied || std::find(conns_.begin(), conns_.end(), c) != conns_.end()) return;
  conns_.push_back(c);
  if (sends) senders_.push_back(c);
}

Status Progress::pollAll() {
  if (conns_.empty()) return Status::ok();
  proxy::demand();
  for (Connection* c : conns_)
    if (c->proxyFailed()) return c->proxyFailure();
  return Status::ok();
}

bool Progress::hasUnsentData() const {
  for (Connection* c : senders_)
    if (c->hasUnsentData()) return true;
  return false;
}

}  // namespace coll::transport
