#include "transport/net/ucx/ucx_api.h"

#include <dlfcn.h>

#include <mutex>

namespace coll::transport::net::ucx {

const Api* api(std::string* why) {
  static Api table;
  static std::string error;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    // RTLD_LOCAL: UCX's symbols stay out of the global namespace, so a process that also loads
    // another UCX (Open MPI's) keeps its own. libucs and libuct come in as libucp's dependencies,
    // and dlsym on libucp's handle finds their functions too (ucs_status_string).
    void* h = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      error = std::string("UCX is not installed here: libucp.so.0 cannot be loaded (") + (e ? e : "?") +
              "); install libucx0 (Debian, Ubuntu) or ucx (RHEL), or put its lib folder on LD_LIBRARY_PATH";
      return;
    }
#define COLL_UCX_LOAD(name)                                                                   \
  table.name = reinterpret_cast<decltype(table.name)>(dlsym(h, #name));                       \
  if (!table.name) {                                                                          \
    error = "the UCX found here (libucp.so.0) lacks " #name ": coll needs UCX 1.10 or newer"; \
    return;                                                                                   \
  }
    COLL_UCX_FUNCTIONS(COLL_UCX_LOAD)
#undef COLL_UCX_LOAD
    loaded = true;
  });
  if (!loaded && why) *why = error;
  return loaded ? &table : nullptr;
}

}  // namespace coll::transport::net::ucx
