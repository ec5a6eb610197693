// NCCL 2.30's parameter API over coll's parameters (collParamGet, collParamNames), and
// ncclResetDebugInit. Keys are coll's names: COLL_X, or NCCL_X and X for the same parameter.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "nccl/shim.h"

using collnccl::Result;
using collnccl::shim::refuse;
using collnccl::shim::result;

struct ncclParamHandle {
  std::string name;  // COLL_X
};

namespace {

std::string collName(const char* key) {
  if (std::strncmp(key, "NCCL_", 5) == 0) return std::string("COLL_") + (key + 5);
  if (std::strncmp(key, "COLL_", 5) == 0) return key;
  return std::string("COLL_") + key;
}

// Handles are owned here and live as long as the process (NCCL's are owned by its registry).
std::mutex gMu;
std::map<std::string, std::unique_ptr<ncclParamHandle>>& handles() {
  static auto* m = new std::map<std::string, std::unique_ptr<ncclParamHandle>>();
  return *m;
}

// The parameter's text now, or a refusal naming the call.
Result text(ncclParamHandle* h, const char* fn, const char** out) {
  if (!h || !out) return refuse(collnccl::kInvalidArgument, fn, h ? "out is NULL" : "the handle is NULL");
  return result(collParamGet(h->name.c_str(), out, nullptr));
}

// v as a whole integer of X (strtoll or strtoull), or false.
template <typename X, typename Parse>
bool whole(const char* v, Parse parse, X* x) {
  errno = 0;
  char* end = nullptr;
  *x = parse(v, &end, 0);
  return errno == 0 && end != v && *end == '\0';
}

template <typename T>
Result getInt(ncclParamHandle* h, T* out, const char* fn) {
  const char* v = nullptr;
  Result r = text(h, fn, &v);
  if (r != collnccl::kSuccess) return r;
  bool ok;
  T value{};
  if (std::numeric_limits<T>::is_signed) {
    long long x = 0;
    ok = whole(v, std::strtoll, &x) && x >= static_cast<long long>(std::numeric_limits<T>::min()) &&
         x <= static_cast<long long>(std::numeric_limits<T>::max());
    value = static_cast<T>(x);
  } else {
    unsigned long long x = 0;
    ok = whole(v, std::strtoull, &x) && v[0] != '-' &&
         x <= static_cast<unsigned long long>(std::numeric_limits<T>::max());
    value = static_cast<T>(x);
  }
  if (!ok)
    return refuse(collnccl::kInvalidArgument, fn,
                  h->name + "='" + v + "' is not an integer of " + std::to_string(sizeof(T) * 8) + " bits");
  *out = value;
  return collnccl::kSuccess;
}

}  // namespace

NCCL_EXPORT Result pncclParamBind(ncclParamHandle** out, const char* key) {
  if (!out || !key) return refuse(collnccl::kInvalidArgument, "ncclParamBind", out ? "key is NULL" : "out is NULL");
  std::string name = collName(key);
  const char* v = nullptr;
  Result r = result(collParamGet(name.c_str(), &v, nullptr));  // names an unknown parameter
  if (r != collnccl::kSuccess) return r;
  std::lock_guard<std::mutex> lock(gMu);
  auto& h = handles()[name];
  if (!h) h.reset(new ncclParamHandle{name});
  *out = h.get();
  return collnccl::kSuccess;
}
NCCL_ALIAS(Result, ncclParamBind, (ncclParamHandle * *out, const char* key))

#define NCCL_PARAM_GET(suffix, T)                                        \
  NCCL_EXPORT Result pncclParamGet##suffix(ncclParamHandle* h, T* out) { \
    return getInt<T>(h, out, "ncclParamGet" #suffix);                    \
  }                                                                      \
  NCCL_ALIAS(Result, ncclParamGet##suffix, (ncclParamHandle * h, T * out))
NCCL_PARAM_GET(I8, int8_t)
NCCL_PARAM_GET(I16, int16_t)
NCCL_PARAM_GET(I32, int32_t)
NCCL_PARAM_GET(I64, int64_t)
NCCL_PARAM_GET(U8, uint8_t)
NCCL_PARAM_GET(U16, uint16_t)
NCCL_PARAM_GET(U32, uint32_t)
NCCL_PARAM_GET(U64, uint64_t)

NCCL_EXPORT Result pncclParamGetStr(ncclParamHandle* h, const char** out) { return text(h, "ncclParamGetStr", out); }
NCCL_ALIAS(Result, ncclParamGetStr, (ncclParamHandle * h, const char** out))

// The value's bytes: an integer parameter as an int64_t, any other as its text with the NUL.
NCCL_EXPORT Result pncclParamGet(ncclParamHandle* h, void* out, int maxLen, int* len) {
  const char* v = nullptr;
  Result r = text(h, "ncclParamGet", &v);
  if (r != collnccl::kSuccess) return r;
  if (maxLen < 0 || (maxLen > 0 && !out))
    return refuse(collnccl::kInvalidArgument, "ncclParamGet", "out is NULL or maxLen is negative");
  long long x = 0;
  bool integer = whole(v, std::strtoll, &x);
  int need = integer ? static_cast<int>(sizeof(int64_t)) : static_cast<int>(std::strlen(v) + 1);
  if (len) *len = need;
  if (need > maxLen)
    return refuse(collnccl::kInvalidArgument, "ncclParamGet",
                  h->name + " needs " + std::to_string(need) + " bytes, maxLen is " + std::to_string(maxLen));
  if (integer) {
    int64_t i = x;
    std::memcpy(out, &i, sizeof(i));
  } else {
    std::memcpy(out, v, need);
  }
  return collnccl::kSuccess;
}
NCCL_ALIAS(Result, ncclParamGet, (ncclParamHandle * h, void* out, int maxLen, int* len))

NCCL_EXPORT Result pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  if (!key || !value)
    return refuse(collnccl::kInvalidArgument, "ncclParamGetParameter", key ? "value is NULL" : "key is NULL");
  Result r = result(collParamGet(collName(key).c_str(), value, nullptr));
  if (r == collnccl::kSuccess && valueLen) *valueLen = static_cast<int>(std::strlen(*value));
  return r;
}
NCCL_ALIAS(Result, ncclParamGetParameter, (const char* key, const char** value, int* valueLen))

NCCL_EXPORT Result pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (!table || !tableLen)
    return refuse(collnccl::kInvalidArgument, "ncclParamGetAllParameterKeys", "table or tableLen is NULL");
  const char* const* names = nullptr;
  Result r = result(collParamNames(&names, tableLen));
  if (r == collnccl::kSuccess) *table = const_cast<const char**>(names);
  return r;
}
NCCL_ALIAS(Result, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen))

// Every parameter and its value, one line each, on stderr (NCCL logs them at INFO).
NCCL_EXPORT void pncclParamDumpAll(void) {
  const char* const* names = nullptr;
  int n = 0;
  if (collParamNames(&names, &n) != collSuccess) return;
  for (int i = 0; i < n; ++i) {
    const char* v = nullptr;
    int set = 0;
    if (collParamGet(names[i], &v, &set) == collSuccess)
      std::fprintf(stderr, "coll INFO param %s=%s%s\n", names[i], v, set ? " (set)" : "");
  }
}
NCCL_ALIAS(void, ncclParamDumpAll, (void))

NCCL_EXPORT void pncclResetDebugInit(void) { collDebugReload(); }
NCCL_ALIAS(void, ncclResetDebugInit, (void))
// Not in nccl.h, but exported by NCCL's library (programs resolve it with dlsym).
NCCL_EXPORT void ncclResetDebugInitInternal(void) { collDebugReload(); }
