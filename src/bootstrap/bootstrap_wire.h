// The bootstrap's wire format and the server that receives it.
//
// Every bootstrap connection carries exactly one message: a MsgHeader (magic, secret, tag, size,
// source rank, version) followed by `size` payload bytes. A connection whose header has the wrong
// magic, secret or version, an oversized payload, or that stalls, is dropped and logged; the
// MessageServer progresses all pending connections in one poll loop, so a silent or malicious
// client can never block the root or a rank's inbox.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/conn_budget.h"
#include "base/log.h"
#include "base/socket.h"
#include "base/status.h"
#include "coll/coll.h"

namespace coll::bootstrap {

constexpr uint64_t kWireMagic = 0x544f4f424c4c4f43ull;  // "COLLBOOT"
constexpr uint32_t kWireVersion = 2;                    // 2: RankInfo::gpuCtas
constexpr uint64_t kMaxPayloadBytes = 256ull << 20;

// Tags with the top bit set are the bootstrap's own; user tags (later transports) are below.
constexpr uint64_t kTagInternal = 1ull << 63;
constexpr uint64_t kTagHello = kTagInternal | 1;
constexpr uint64_t kTagReply = kTagInternal | 2;
constexpr uint64_t kTagAbortNotice = kTagInternal | 3;  // "I failed, because ...": ends peers' waits
constexpr uint64_t kTagCollective = kTagInternal | (1ull << 62);
constexpr uint64_t kTagWaitQuery = kTagInternal | 4;              // "whom are you waiting for?"
constexpr uint64_t kTagWaitAnswer = kTagInternal | (1ull << 61);  // | the question's number
// A tool's questions (coll-top), answered on the question's connection (bootstrap/status_wire.h
// says which and how); a tool is no rank of the job and sends kToolRank as its source.
constexpr uint64_t kTagStatusQuery = kTagInternal | 5;
constexpr uint64_t kTagStatusAnswer = kTagInternal | 6;
constexpr int32_t kToolRank = -2;

/// The answer to kTagWaitQuery: what the rank's operation waits for (base/wait_state.h).
struct WaitAnswer {
  uint64_t opSeq;      // operations the rank has started
  int32_t inOp;        // 1 while an operation runs (or after one failed)
  int32_t waitingFor;  // -1: no peer known
  int64_t waitedMs;    // how long that wait has lasted
  int32_t waitStep;    // the step of the operation's schedule that wait is in; -1: not known
  char opName[36];     // NUL-terminated
};

/// A rank's state as a tool (coll-top) is told it: its communicator's (base/wait_state.h).
struct JobStatus {
  int32_t rank, nranks, pid;
  int32_t communicators;  // communicators alive in the rank's process
  WaitAnswer wait;        // its operation and whom it waits for, as a peer's question is answered
  uint64_t bytes;         // bytes of the operations this rank has finished (sent or received by it)
  char host[64];
  char detail[192];  // the transports, as collCommGetTransports says them
};
static_assert(sizeof(JobStatus) == 344, "wire layout (perf/top_model.py counts it)");

struct MsgHeader {
  uint64_t magic;
  uint64_t secret;
  uint64_t tag;
  uint64_t size;
  int32_t srcRank;
  uint32_t version;
};
static_assert(sizeof(MsgHeader) == 40, "wire layout");

/// What every rank tells every other at init.
struct RankInfo {
  int32_t rank;
  int32_t nranks;
  int32_t pid;
  int32_t cudaDev;  // -1: host-only
  uint64_t hostHash;
  net::PackedAddress listen;  // where this rank's bootstrap inbox accepts messages
  char hostName[64];
  char hostId[96];
  char busId[20];   // PCI bus id of cudaDev, "" when host-only
  int16_t package;  // of the CPUs the rank may run on, -1: several or unknown (topo/cpu_place.h)
  int16_t numa;     // likewise
  int32_t netMbps;  // link speed of the interface this rank uses for TCP, 0: unknown (virtual)
  // Which ranks share cores: hosts told apart by COLL_HOSTID or network namespaces may still be one
  // machine (one kernel), and the tuner must know that their ranks compete for the same cores.
  uint64_t machineHash;  // of the kernel's boot id
  int32_t cores;         // CPUs this rank may run on (its affinity mask)
  int32_t onlineCpus;    // CPUs of its machine
  // The CTAs of coll's device kernel that this rank's GPU holds at once (SMs x occupancy), 0 for a
  // host-only rank: every rank computes the same launch budget from the table (core/residency.h).
  int32_t gpuCtas;
  int32_t reserved;
};

/// The rank -> root hello payload.
struct Hello {
  int32_t nranks;
  uint32_t libVersion;
  RankInfo info;
};

/// The most ranks one bootstrap serves. The root sizes its table from the first hello's count, so
/// an absurd count (a corrupt or hostile hello) must be refused before it allocates; and its
/// answer, a RankInfo per rank, must fit in one message.
constexpr int kMaxRanks = 1 << 19;
static_assert(uint64_t(kMaxRanks) * sizeof(RankInfo) + (1u << 16) <= kMaxPayloadBytes, "answer fits a message");

/// The root's answer to a hello: its verdict, and the table of every rank on success.
struct RootAnswer {
  collResult_t code = collSuccess;
  std::string message;  // why, when code is not collSuccess
  std::vector<RankInfo> table;
};

// Decoders of what arrives from a socket. Each is a pure function of the received bytes, called by
// the socket code and by the fuzzers (tests/fuzz), so that both exercise the same checks. Every
// value a caller relies on (counts, ranks, terminated strings, addresses) is validated here.

/// Whether a fixed-size string field from the wire ends within its array (consumers print it as
/// a C string; the sender always terminates it).
inline bool terminated(const char* field, size_t size) { return std::memchr(field, '\0', size) != nullptr; }

/// A message header with this job's secret: collRemoteError with the reason otherwise.
Result<MsgHeader> decodeHeader(const uint8_t* data, size_t size, uint64_t secret);
/// A hello payload: collRemoteError when it is not one (wrong size, unterminated strings),
/// collInvalidUsage when its rank or rank count is out of range (the root answers that rank).
Result<Hello> decodeHello(const uint8_t* data, size_t size);
/// The root's answer for a rank of an nranks job; an error (collInternalError, "a truncated
/// answer", ...) when the bytes are malformed. A failure the root reports is a RootAnswer.
Result<RootAnswer> decodeRootAnswer(const uint8_t* data, size_t size, int nranks);
/// The answer's bytes: int32 code, uint32 message length, the message, then the table on success.
std::vector<char> encodeRootAnswer(collResult_t code, const std::string& message, const std::vector<RankInfo>& table);

struct Message {
  int srcRank = -1;
  uint64_t tag = 0;
  std::vector<char> payload;
  net::Address from;
};

/// Builds a header for a message from this rank.
MsgHeader makeHeader(uint64_t secret, uint64_t tag, uint64_t size, int srcRank);

/// Sends one framed message over an already connected socket.
Status sendMessage(net::Socket& sock, const MsgHeader& header, const void* payload, const net::Deadline& deadline,
                   const std::atomic<bool>* abort, const std::string& peer);
/// Receives one framed message; the header must carry `secret` and `expectTag`.
Result<Message> recvMessage(net::Socket& sock, uint64_t secret, uint64_t expectTag, const net::Deadline& deadline,
                            const std::atomic<bool>* abort, const std::string& peer);

/// What a MessageServer tolerates from the connections it has not yet authenticated.
struct ServerLimits {
  /// A connection must deliver a complete header with this job's secret within this many ms
  /// (COLL_HANDSHAKE_TIMEOUT_MS): a silent connection costs a descriptor only that long.
  int64_t handshakeMs = 3000;
  /// An authenticated message must arrive completely within this many ms.
  int64_t stallMs = 60000;
  /// Connections read at once. Beyond it, and beyond the process's budget for unauthenticated
  /// connections (base/conn_budget.h), a new connection replaces the oldest one that has not
  /// shown the job's secret, so that a flood of silent connections of any size cannot keep an
  /// honest one waiting; only when every pending connection is authenticated do new ones wait in
  /// the kernel's backlog.
  size_t maxPending = 1024;
};

/// Accepts connections on a listener and reads one message from each, many at a time.
class MessageServer {
 public:
  /// Called for every complete, authenticated message with the socket it came on (the handler
  /// may keep it to reply, or let it close).
  using Handler = std::function<void(Message&&, net::Socket&&)>;
  /// Asked once a header is authenticated, before its payload is allocated: "" to read the
  /// payload, else why the message is refused (the connection is dropped, the reason logged).
  using Admit = std::function<std::string(const MsgHeader&)>;
  /// Told when a payload that was admitted will never be delivered (its connection failed).
  using Release = std::function<void(const MsgHeader&)>;

  MessageServer(net::Listener listener, uint64_t secret, const ServerLimits& limits, std::string owner);
  ~MessageServer();
  MessageServer(MessageServer&& other) noexcept;
  MessageServer& operator=(MessageServer&&) = delete;
  MessageServer(const MessageServer&) = delete;
  MessageServer& operator=(const MessageServer&) = delete;

  /// Installs the admission check (see Admit and Release); before the first poll().
  void setAdmission(Admit admit, Release release) {
    admit_ = std::move(admit);
    release_ = std::move(release);
  }

  /// Waits up to waitMs for activity on the listener, the pending connections or wakeFd (-1: none),
  /// then accepts, reads, authenticates and delivers what is complete. Never blocks longer.
  void poll(int waitMs, int wakeFd, const Handler& handler);

  const net::Address& address() const { return listener_.address(); }
  size_t pendingCount() const { return pending_.size(); }
  /// Connections dropped so far (bad traffic, stalls, refusals, descriptor exhaustion).
  uint64_t droppedCount() const { return dropped_; }

 private:
  struct Pending {
    net::Socket sock;
    net::Address peer;
    uint8_t headerBytes[sizeof(MsgHeader)] = {};
    MsgHeader header{};  // decoded once all of headerBytes arrived
    size_t headerGot = 0;
    bool admitted = false;  // the header passed admission: its payload is being read
    std::vector<char> payload;
    size_t payloadGot = 0;
    std::chrono::steady_clock::time_point start;
    net::UnauthSlot slot;  // its share of the process's budget until its header shows the secret
  };
  /// Drops the oldest connection that has not shown the job's secret, to make room for a new
  /// one; false when every pending connection has.
  bool evictOldestUnauthenticated();
  /// Reads what is available; true when the connection is finished (delivered or dropped).
  bool progress(Pending& p, const Handler& handler);
  void drop(Pending& p, const std::string& why);
  /// Accepts what the listener holds, within maxPending; handles descriptor exhaustion.
  void acceptAll(const Handler& handler);
  /// A WARN line, at most one a second; the lines held back are counted in the next one.
  void warn(const std::string& line);

  net::Listener listener_;
  uint64_t secret_;
  ServerLimits limits_;
  std::string owner_;
  std::vector<Pending> pending_;
  Admit admit_;
  Release release_;
  int reserveFd_ = -1;  // kept open so that one descriptor is left to accept-and-close when out of them
  std::chrono::steady_clock::time_point listenerPausedUntil_{};
  coll::log::RateLimit warnLimit_;
  uint64_t dropped_ = 0;
};

}  // namespace coll::bootstrap
