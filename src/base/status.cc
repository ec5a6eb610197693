#include "base/status.h"

#include <cstring>

namespace coll {

const char* resultName(collResult_t code) {
  static const char* const kNames[] = {"collSuccess",       "collUnhandledCudaError", "collSystemError",
                                       "collInternalError", "collInvalidArgument",    "collInvalidUsage",
                                       "collRemoteError",   "collInProgress",         "collTimeout"};
  return code >= 0 && code < collNumResults ? kNames[code] : "unknown result";
}

const std::string& Status::empty() {
  static const std::string kEmpty;
  return kEmpty;
}

Status& Status::addBreadcrumb(const char* file, int line) {
  // Keep only the file name: full build paths make the trail unreadable.
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  std::string& trail = detail().breadcrumbs;
  if (!trail.empty()) trail += " <- ";
  trail += fmt::format("{}:{}", base, line);
  return *this;
}

Status& Status::prefix(const std::string& context) {
  detail().message = context + detail().message;
  return *this;
}

}  // namespace coll
