#include "base/host_id.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "base/params.h"
#include "base/random.h"

namespace coll {

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

namespace {

std::string bootId() {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return boot;
}

}  // namespace

std::string hostIdentity() {
  if (params::kHostId.isSet()) return params::kHostId.get();
  std::string boot = bootId();
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return std::string(buf) + ":" + boot;
}

uint64_t machineHash() {
  std::string boot = bootId();
  if (boot.empty()) boot = hostName();  // no /proc: the host name is the best guess
  return fnv1a(boot.data(), boot.size());
}

int onlineCpus() { return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

int usableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return onlineCpus();
}

uint64_t hostHash() {
  std::string id = hostIdentity();
  return fnv1a(id.data(), id.size());
}

}  // namespace coll
