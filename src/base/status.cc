#include "base/status.h"

#include <cstring>

namespace coll {

const char* resultName(collResult_t code) {
  static const char* const kNames[] = {"collSuccess",       "collUnhandledCudaError", "collSystemError",
                                       "collInternalError", "collInvalidArgument",    "collInvalidUsage",
                                       "collRemoteError",   "collInProgress",         "collTimeout"};
  return code >= 0 && code < collNumResults ? kNames[code] : "unknown result";
}

Status& Status::addBreadcrumb(const char* file, int line) {
  // Keep only the file name: full build paths make the trail unreadable.
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  if (!breadcrumbs_.empty()) breadcrumbs_ += " <- ";
  breadcrumbs_ += fmt::format("{}:{}", base, line);
  return *this;
}

Status& Status::prefix(const std::string& context) {
  message_ = context + message_;
  return *this;
}

}  // namespace coll
