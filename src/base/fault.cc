#include "base/fault.h"

#include <signal.h>
#include <unistd.h>

#include <string>

#include "base/log.h"
#include "base/param.h"
#include "base/params.h"

namespace coll {

bool faultWanted(const char* point, int rank) {
  if (!params::kFaultInject.isSet()) return false;
  std::string spec = params::kFaultInject.get();
  std::string name = spec.substr(0, spec.find(':'));
  if (name != point) return false;
  if (spec.find(':') != std::string::npos) {
    int64_t want;
    if (!param::parseInt(spec.substr(spec.find(':') + 1), &want) || want != rank) return false;
  }
  return true;
}

void faultPoint(const char* point, int rank) {
  if (!faultWanted(point, rank)) return;
  COLL_LOG(WARN, INIT, "COLL_FAULT_INJECT: rank {} is killing itself at '{}'", rank, point);
  ::kill(getpid(), SIGKILL);
}

}  // namespace coll
