#include "bootstrap/status_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace coll::bootstrap {
namespace {

// Why a JobStatus from the wire cannot be printed as it is, or "".
std::string jobStatusProblem(const JobStatus& st) {
  if (!terminated(st.host, sizeof(st.host))) return "a host name that is not terminated";
  if (!terminated(st.detail, sizeof(st.detail))) return "a detail that is not terminated";
  if (!terminated(st.wait.opName, sizeof(st.wait.opName))) return "an operation name that is not terminated";
  return "";
}

// At most this many questions are in flight at once: a view of a host with thousands of ranks
// must not need thousands of descriptors (RLIMIT_NOFILE is often 1024).
constexpr size_t kMaxInFlight = 256;

// One question's progress through connect, send, header and payload.
struct Ask {
  enum Phase { kIdle, kConnecting, kSending, kHeader, kPayload, kDone } phase = kIdle;
  int fd = -1;
  char out[sizeof(MsgHeader) + sizeof(StatusQuestion)];
  size_t sent = 0;
  uint8_t header[sizeof(MsgHeader)];
  size_t got = 0;
  std::vector<char> payload;
  std::optional<Status> failure;  // set when done without an answer

  void finish(Status why) {
    failure = std::move(why);
    phase = kDone;
    if (fd >= 0) ::close(fd), fd = -1;
  }
  void finishOk() {
    phase = kDone;
    if (fd >= 0) ::close(fd), fd = -1;
  }
};

// Why a connection could not be made (errno err): refused means the process is gone.
Status connectFailure(int err) {
  return err == ECONNREFUSED ? Status(collRemoteError, "refused the connection: its process is gone")
                             : COLL_ERROR(collRemoteError, FMT_STRING("cannot be reached: {}"), std::strerror(err));
}

// Starts a non-blocking connection; the ask is done at once when it is refused.
void start(Ask& a, const net::Address& addr) {
  a.fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (a.fd < 0) return a.finish(COLL_ERROR(collSystemError, FMT_STRING("socket() failed: {}"), std::strerror(errno)));
  int one = 1;
  setsockopt(a.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int rc = ::connect(a.fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length);
  if (rc == 0) {
    a.phase = Ask::kSending;
  } else if (errno == EINPROGRESS) {
    a.phase = Ask::kConnecting;
  } else {
    a.finish(connectFailure(errno));
  }
}

// Moves one ask on as far as its socket allows without blocking.
void step(Ask& a, uint64_t secret, uint64_t maxBytes) {
  if (a.phase == Ask::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(a.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == EINPROGRESS || err == EALREADY) return;
    if (err != 0) return a.finish(connectFailure(err));
    a.phase = Ask::kSending;
  }
  if (a.phase == Ask::kSending) {
    ssize_t n = ::send(a.fd, a.out + a.sent, sizeof(a.out) - a.sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return a.finish(COLL_ERROR(collRemoteError, FMT_STRING("dropped the question: {}"), std::strerror(errno)));
    if (n > 0) a.sent += static_cast<size_t>(n);
    if (a.sent < sizeof(a.out)) return;
    a.phase = Ask::kHeader;
  }
  if (a.phase == Ask::kHeader) {
    ssize_t n = ::recv(a.fd, a.header + a.got, sizeof(a.header) - a.got, 0);
    if (n == 0)
      return a.finish(Status(collRemoteError,
                             "closed the connection without an answer (a wrong secret is dropped so, as is a "
                             "question to a rank whose communicator is not yet formed)"));
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return a.finish(COLL_ERROR(collRemoteError, FMT_STRING("broke the connection: {}"), std::strerror(errno)));
    if (n > 0) a.got += static_cast<size_t>(n);
    if (a.got < sizeof(a.header)) return;
    auto h = decodeHeader(a.header, sizeof(a.header), secret);
    if (!h.isOk()) return a.finish(h.takeStatus().prefix("answered with "));
    if (h->tag != kTagStatusAnswer)
      return a.finish(COLL_ERROR(collRemoteError, FMT_STRING("answered with tag {:#x}"), h->tag));
    if (h->size > maxBytes)
      return a.finish(COLL_ERROR(collRemoteError, FMT_STRING("announced a {}-byte answer (at most {} expected)"),
                                 h->size, maxBytes));
    a.payload.resize(h->size);
    a.got = 0;
    a.phase = Ask::kPayload;
  }
  if (a.phase == Ask::kPayload) {
    while (a.got < a.payload.size()) {
      ssize_t n = ::recv(a.fd, a.payload.data() + a.got, a.payload.size() - a.got, 0);
      if (n == 0) return a.finish(Status(collRemoteError, "closed the connection in the middle of its answer"));
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        return a.finish(COLL_ERROR(collRemoteError, FMT_STRING("broke the connection: {}"), std::strerror(errno)));
      }
      a.got += static_cast<size_t>(n);
    }
    a.finishOk();
  }
}

}  // namespace

Result<std::vector<HostEntry>> decodeHostAnswer(const uint8_t* data, size_t size, int nranks) {
  if (size == 0 || size % sizeof(HostEntry) != 0)
    return COLL_ERROR(collRemoteError, FMT_STRING("a host answer of {} bytes, not a whole number of {}-byte entries"),
                      size, sizeof(HostEntry));
  size_t n = size / sizeof(HostEntry);
  if (nranks < 1 || n > static_cast<size_t>(nranks))
    return COLL_ERROR(collRemoteError, FMT_STRING("a host answer with {} entries for {} ranks"), n, nranks);
  std::vector<HostEntry> entries(n);
  std::memcpy(entries.data(), data, size);
  std::vector<bool> seen(static_cast<size_t>(nranks), false);
  for (const HostEntry& e : entries) {
    if (e.rank < 0 || e.rank >= nranks || seen[static_cast<size_t>(e.rank)])
      return COLL_ERROR(collRemoteError, FMT_STRING("a host answer naming rank {} out of range or twice"), e.rank);
    seen[static_cast<size_t>(e.rank)] = true;
    if (e.state != kAnswered && e.state != kNotAnswering && e.state != kMissing)
      return COLL_ERROR(collRemoteError, FMT_STRING("a host answer with state {} for rank {}"), e.state, e.rank);
    std::string problem = jobStatusProblem(e.st);
    if (!problem.empty()) return COLL_ERROR(collRemoteError, FMT_STRING("rank {}'s entry has {}"), e.rank, problem);
  }
  return entries;
}

Result<std::vector<TableEntry>> decodeTableAnswer(const uint8_t* data, size_t size) {
  if (size == 0 || size % sizeof(TableEntry) != 0 || size / sizeof(TableEntry) > static_cast<size_t>(kMaxRanks))
    return COLL_ERROR(collRemoteError, FMT_STRING("a rank table of {} bytes"), size);
  std::vector<TableEntry> table(size / sizeof(TableEntry));
  std::memcpy(table.data(), data, size);
  for (size_t r = 0; r < table.size(); ++r) {
    auto a = table[r].listen.unpack();
    if (!a.isOk())
      return COLL_ERROR(collRemoteError, FMT_STRING("rank {}'s inbox address is invalid: {}"), r, a.status().message());
  }
  return table;
}

Result<JobStatus> decodeSelfAnswer(const uint8_t* data, size_t size) {
  JobStatus st;
  if (size != sizeof(st))
    return COLL_ERROR(collRemoteError, FMT_STRING("a {}-byte status (expected {})"), size, sizeof(st));
  std::memcpy(&st, data, sizeof(st));
  std::string problem = jobStatusProblem(st);
  if (!problem.empty()) return Status(collRemoteError, "a status with " + problem);
  if (st.nranks < 1 || st.rank < 0 || st.rank >= st.nranks)
    return COLL_ERROR(collRemoteError, FMT_STRING("a status of rank {} of {}"), st.rank, st.nranks);
  return st;
}

std::vector<StatusAnswer> askStatusAll(const std::vector<net::Address>& addrs, uint64_t secret,
                                       const StatusQuestion& question, int64_t timeoutMs, uint64_t maxBytes,
                                       const std::atomic<bool>* stop) {
  auto deadline = net::Deadline::afterMs(timeoutMs);
  std::vector<Ask> asks(addrs.size());
  MsgHeader h = makeHeader(secret, kTagStatusQuery, sizeof(question), kToolRank);
  for (Ask& a : asks) {
    std::memcpy(a.out, &h, sizeof(h));
    std::memcpy(a.out + sizeof(h), &question, sizeof(question));
  }
  size_t next = 0, live = 0;
  std::vector<pollfd> fds;
  std::vector<size_t> which;
  for (;;) {
    while (live < kMaxInFlight && next < asks.size()) {
      start(asks[next], addrs[next]);
      if (asks[next].phase != Ask::kDone) ++live;
      ++next;
    }
    if (live == 0 || deadline.expired() || (stop && stop->load(std::memory_order_relaxed))) break;
    fds.clear();
    which.clear();
    for (size_t i = 0; i < next; ++i) {
      Ask& a = asks[i];
      if (a.phase == Ask::kDone) continue;
      bool writing = a.phase == Ask::kConnecting || a.phase == Ask::kSending;
      fds.push_back({a.fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0});
      which.push_back(i);
    }
    int wait = static_cast<int>(std::min<int64_t>(100, std::max<int64_t>(1, deadline.remainingMs())));
    int n = ::poll(fds.data(), fds.size(), wait);
    if (n < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size() && n > 0; ++k) {
      if (!fds[k].revents) continue;
      Ask& a = asks[which[k]];
      step(a, secret, maxBytes);
      if (a.phase == Ask::kDone) --live;
    }
  }
  std::vector<StatusAnswer> answers;
  answers.reserve(asks.size());
  for (size_t i = 0; i < asks.size(); ++i) {
    Ask& a = asks[i];
    if (a.phase == Ask::kDone && !a.failure) {
      answers.emplace_back(std::move(a.payload));
      continue;
    }
    if (a.phase != Ask::kDone) {
      bool connected = a.phase != Ask::kIdle && a.phase != Ask::kConnecting;
      a.finish(connected ? COLL_ERROR(collTimeout, FMT_STRING("did not answer within {} ms"), timeoutMs)
                         : COLL_ERROR(collTimeout, FMT_STRING("took no connection within {} ms"), timeoutMs));
    }
    answers.emplace_back(std::move(*a.failure));
  }
  return answers;
}

StatusAnswer askStatus(const net::Address& addr, uint64_t secret, const StatusQuestion& question, int64_t timeoutMs,
                       uint64_t maxBytes) {
  return std::move(askStatusAll({addr}, secret, question, timeoutMs, maxBytes).front());
}

}  // namespace coll::bootstrap
