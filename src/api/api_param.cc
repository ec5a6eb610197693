// collParamGet, collParamNames, collParamNcclTwins, collDebugReload: the parameter registry
// (base/param.h) through the C API, which the NCCL drop-in's ncclParam* calls map onto.
#include <cstring>
#include <string>
#include <vector>

#include "api/api_util.h"
#include "base/log.h"
#include "base/param.h"

using coll::Status;

namespace {

// "COLL_X" or "X" as the registered name COLL_X.
std::string fullName(const char* name) {
  return std::strncmp(name, "COLL_", 5) == 0 ? std::string(name) : std::string("COLL_") + name;
}

}  // namespace

COLL_API collResult_t collParamGet(const char* name, const char** value, int* isSet) {
  static thread_local std::string text;  // valid until this thread's next call
  return coll::api::guarded("collParamGet", nullptr, [&]() -> Status {
    if (!name || !value) return Status(collInvalidArgument, name ? "value is NULL" : "name is NULL");
    const coll::param::Base* p = coll::param::find(fullName(name));
    if (!p) return COLL_ERROR(collInvalidArgument, FMT_STRING("coll has no parameter {}"), fullName(name));
    text = p->text();
    *value = text.c_str();
    if (isSet) *isSet = p->source() == coll::param::Source::kEnv ? 1 : 0;
    return Status::ok();
  });
}

COLL_API collResult_t collParamNames(const char* const** names, int* count) {
  return coll::api::guarded("collParamNames", nullptr, [&]() -> Status {
    if (!names || !count) return Status(collInvalidArgument, names ? "count is NULL" : "names is NULL");
    // Parameters are declared at static initialization and never removed: the table is made once.
    static const std::vector<const char*> table = [] {
      std::vector<const char*> t;
      for (const coll::param::Base* p : coll::param::all()) t.push_back(p->name());
      return t;
    }();
    *names = table.data();
    *count = static_cast<int>(table.size());
    return Status::ok();
  });
}

COLL_API collResult_t collParamNcclTwins(int on) {
  return coll::api::guarded("collParamNcclTwins", nullptr, [&]() -> Status {
    if (on != 0 && on != 1) return COLL_ERROR(collInvalidArgument, FMT_STRING("on={} is not 0 or 1"), on);
    coll::param::setNcclTwins(on == 1);
    return Status::ok();
  });
}

COLL_API void collDebugReload(void) {
  try {
    coll::log::configureFromEnv();
  } catch (...) {
    // Logging stays as it was: nothing may cross the C boundary.
  }
}
