// UCX's entry points, loaded with dlopen the first time a communicator chooses UCX (COLL_NET=ucx,
// or the network choice finds RDMA hardware), as libibverbs and NCCL net plugins are: libcoll
// has no link-time UCX dependency. Loading libucp brings libucm, whose memory hooks would
// otherwise interpose mmap/munmap/madvise in every process that loads libcoll, UCX user or not.
// Only UCX's headers are needed at build time (libucx-dev), for the types.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace coll::transport::net::ucx {

// Every UCX function the provider calls, each a pointer of the function's own type.
#define COLL_UCX_FUNCTIONS(X)   \
  X(ucp_config_read)            \
  X(ucp_config_modify)          \
  X(ucp_config_release)         \
  X(ucp_init_version)           \
  X(ucp_get_version)            \
  X(ucp_worker_create)          \
  X(ucp_worker_destroy)         \
  X(ucp_worker_progress)        \
  X(ucp_worker_get_address)     \
  X(ucp_worker_release_address) \
  X(ucp_ep_create)              \
  X(ucp_ep_close_nbx)           \
  X(ucp_tag_send_nbx)           \
  X(ucp_tag_recv_nbx)           \
  X(ucp_request_check_status)   \
  X(ucp_request_cancel)         \
  X(ucp_request_free)           \
  X(ucp_mem_map)                \
  X(ucp_mem_unmap)              \
  X(ucs_status_string)

/// The loaded library: a pointer per function, named as the function.
struct Api {
#define COLL_UCX_MEMBER(name) decltype(&::name) name = nullptr;
  COLL_UCX_FUNCTIONS(COLL_UCX_MEMBER)
#undef COLL_UCX_MEMBER
};

/// UCX, loaded on the first call (libucp.so.0 from the loader's search path); nullptr when it
/// cannot be, and then *why (when given) says why in a sentence.
const Api* api(std::string* why = nullptr);

}  // namespace coll::transport::net::ucx
