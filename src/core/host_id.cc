#include "core/host_id.h"

#include <unistd.h>

#include <fstream>

#include "core/params.h"
#include "core/unique_id.h"

namespace coll {

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

std::string hostIdentity() {
  if (params::kHostId.isSet()) return params::kHostId.get();
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return std::string(buf) + ":" + boot;
}

uint64_t hostHash() {
  std::string id = hostIdentity();
  return fnv1a(id.data(), id.size());
}

}  // namespace coll
