#include "core/status.h"

#include <cstring>

namespace coll {

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
