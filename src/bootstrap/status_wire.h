// The questions a tool (coll-top) asks a running job, their answers' layouts, and the client that
// asks many inboxes at once.
//
// A view of n ranks costs O(n) bytes: the tool asks once for the table of inboxes (from the root,
// or kAskTable from any rank), then one leader per host (the lowest rank with that host's hash)
// for its host (kAskHost); the leader asks its host's other ranks for themselves (kAskSelf) and
// answers with one HostEntry per rank of the host. No answer carries another rank's table, and a
// stopped leader costs the view its host only: the tool marks that host's ranks unknown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "bootstrap/bootstrap_wire.h"

namespace coll::bootstrap {

/// What a tool's kTagStatusQuery asks (its payload; an empty payload asks kAskSelf).
enum StatusKind : uint32_t {
  kAskSelf = 0,   // one JobStatus: this rank's state
  kAskTable = 1,  // a TableEntry per rank: where to ask the others, and which share a host
  kAskHost = 2,   // a HostEntry per rank of this rank's host, gathered within timeoutMs
};

struct StatusQuestion {
  uint32_t kind;
  uint32_t timeoutMs;  // kAskHost: how long each of the host's ranks may take to answer
};
static_assert(sizeof(StatusQuestion) == 8, "wire layout");

/// One rank in a kAskTable answer.
struct TableEntry {
  net::PackedAddress listen;  // its bootstrap inbox
  uint64_t hostHash;          // ranks with equal hashes share a host (RankInfo::hostHash)
};
static_assert(sizeof(TableEntry) == 32, "wire layout");

/// How a rank of a host answered its leader.
enum EntryState : int32_t {
  kAnswered = 0,      // st holds its state
  kNotAnswering = 1,  // connected, no answer within the time given (stopped or hung)
  kMissing = 2,       // the connection was refused or closed (its process is gone)
};

/// One rank in a kAskHost answer; when state is not kAnswered, st.detail says why.
struct HostEntry {
  int32_t rank;
  int32_t state;
  JobStatus st;
};
static_assert(sizeof(HostEntry) == 352, "wire layout (perf/top_model.py counts it)");

/// The ranks of a kAskHost answer, validated: at most nranks entries, each rank in range and
/// named once, states known, strings terminated. collRemoteError with the reason otherwise.
Result<std::vector<HostEntry>> decodeHostAnswer(const uint8_t* data, size_t size, int nranks);
/// The entries of a kAskTable answer (at least one, at most kMaxRanks, addresses valid).
Result<std::vector<TableEntry>> decodeTableAnswer(const uint8_t* data, size_t size);
/// A kAskSelf answer (terminated strings, rank within its own nranks).
Result<JobStatus> decodeSelfAnswer(const uint8_t* data, size_t size);

/// The answer to one question, or why none came: collTimeout when the peer took the connection
/// but did not answer by the deadline (a stopped or hung process, its inbox frozen with it),
/// collRemoteError when it refused or closed the connection (gone, or the secret was wrong).
using StatusAnswer = Result<std::vector<char>>;

/// Asks question of every address at once, on this thread (one poll over all the connections,
/// no thread per peer); every answer or failure is in by timeoutMs. Answers above maxBytes are
/// refused (a garbled or hostile size must not allocate).
std::vector<StatusAnswer> askStatusAll(const std::vector<net::Address>& addrs, uint64_t secret,
                                       const StatusQuestion& question, int64_t timeoutMs, uint64_t maxBytes,
                                       const std::atomic<bool>* stop = nullptr);

/// One question to one address (askStatusAll of one).
StatusAnswer askStatus(const net::Address& addr, uint64_t secret, const StatusQuestion& question, int64_t timeoutMs,
                       uint64_t maxBytes = kMaxPayloadBytes);

}  // namespace coll::bootstrap
