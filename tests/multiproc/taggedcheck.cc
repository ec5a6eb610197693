#include "multiproc/taggedcheck.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "multiproc/checks.h"

namespace colltest {

namespace {

using Clock = std::chrono::steady_clock;

// The value of element i of the message from `from` with sequence number seq.
int32_t value(int from, int seq, size_t i) { return static_cast<int32_t>(from * 1000003 + seq * 7919 + i); }

std::vector<int32_t> message(int from, int seq, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(from, seq, i);
  return v;
}

// What is wrong with a received message (poisoned beyond it), or "".
std::string checkMessage(const std::vector<int32_t>& got, size_t count, int from, int seq, const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    int32_t want = i < count ? value(from, seq, i) : -7;
    if (got[i] != want)
      return fmt::format("{}: element {} is {}, expected {} (message {} of rank {})", what, i, got[i], want, seq, from);
  }
  return "";
}

// Element counts of the message rank `from` sends to rank 0 in the any-source round: empty,
// inline, one slot and several slots (COLL_P2P_BUFFSIZE 1 MiB: 128 KiB slots).
size_t anySourceCount(int from) {
  static const size_t counts[] = {0, 1, 13, 40000, 100003, 7};
  return counts[from % 6];
}

std::string wait(collRequest_t* r, collMsgStatus_t* st, collComm_t comm, const std::string& what) {
  if (collWait(r, st) != collSuccess) return what + ": " + collGetLastError(comm);
  if (*r != nullptr) return what + ": the request was not cleared";
  return "";
}

// Every other rank sends one message to rank 0, which receives them from any source.
std::string anySource(collComm_t comm, int rank, int n) {
  const int tag = 7;
  if (rank != 0) {
    std::vector<int32_t> m = message(rank, 0, anySourceCount(rank));
    collRequest_t r = nullptr;
    if (collIsend(m.data(), m.size(), collInt32, 0, tag, comm, &r) != collSuccess)
      return std::string("isend: ") + collGetLastError(comm);
    collMsgStatus_t st{};
    std::string e = wait(&r, &st, comm, "isend");
    if (e.empty() && (st.source != rank || st.tag != tag || st.bytes != m.size() * 4))
      e = fmt::format("isend status: source {} tag {} bytes {}", st.source, st.tag, st.bytes);
    return e;
  }
  std::vector<std::vector<int32_t>> bufs(n - 1, std::vector<int32_t>(100003 + 5, -7));
  std::vector<collRequest_t> reqs(n - 1, nullptr);
  for (int i = 0; i < n - 1; ++i)
    if (collIrecv(bufs[i].data(), bufs[i].size(), collInt32, COLL_ANY_SOURCE, tag, comm, &reqs[i]) != collSuccess)
      return std::string("irecv: ") + collGetLastError(comm);
  std::set<int> seen;
  for (int i = 0; i < n - 1; ++i) {
    collMsgStatus_t st{};
    std::string e = wait(&reqs[i], &st, comm, "irecv from any source");
    if (!e.empty()) return e;
    if (st.source <= 0 || st.source >= n || !seen.insert(st.source).second || st.tag != tag ||
        st.bytes != anySourceCount(st.source) * 4)
      return fmt::format("any-source receive {}: source {} tag {} bytes {}", i, st.source, st.tag, st.bytes);
    e = checkMessage(bufs[i], anySourceCount(st.source), st.source, 0, "any-source receive");
    if (!e.empty()) return e;
  }
  return "";
}

// Each rank sends 5 messages to the next, tags 3, 4, 3, 4, 3; the next receives tag 4 first (one
// posted before the messages come, one after), then tag 3: each tag's messages in sending order.
std::string tagOrder(collComm_t comm, int rank, int n) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const int tags[5] = {3, 4, 3, 4, 3};
  const size_t count = 5000;
  std::vector<std::vector<int32_t>> in(5, std::vector<int32_t>(count, -7));
  collRequest_t first = nullptr;
  if (collIrecv(in[0].data(), count, collInt32, prev, 4, comm, &first) != collSuccess)
    return std::string("irecv tag 4: ") + collGetLastError(comm);
  std::string e = barrier(comm);
  if (!e.empty()) return e;
  std::vector<std::vector<int32_t>> out;
  std::vector<collRequest_t> sends(5, nullptr);
  for (int s = 0; s < 5; ++s) {
    out.push_back(message(rank, s, count));
    if (collIsend(out[s].data(), count, collInt32, next, tags[s], comm, &sends[s]) != collSuccess)
      return std::string("isend: ") + collGetLastError(comm);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // most arrive before their receives
  std::vector<collRequest_t> rest(4, nullptr);
  const int restTags[4] = {4, 3, 3, 3};
  for (int i = 0; i < 4; ++i)
    if (collIrecv(in[i + 1].data(), count, collInt32, prev, restTags[i], comm, &rest[i]) != collSuccess)
      return std::string("irecv: ") + collGetLastError(comm);
  const int wantSeq[5] = {1, 3, 0, 2, 4};  // the sequence numbers, in the order of the receives
  collMsgStatus_t st{};
  if (!(e = wait(&first, &st, comm, "irecv tag 4")).empty()) return e;
  if (!(e = checkMessage(in[0], count, prev, wantSeq[0], "tag order")).empty()) return e;
  for (int i = 0; i < 4; ++i) {
    if (!(e = wait(&rest[i], &st, comm, "irecv")).empty()) return e;
    if (st.source != prev || st.tag != restTags[i]) return fmt::format("tag order: status {} {}", st.source, st.tag);
    if (!(e = checkMessage(in[i + 1], count, prev, wantSeq[i + 1], "tag order")).empty()) return e;
  }
  for (auto& s : sends)
    if (!(e = wait(&s, nullptr, comm, "isend")).empty()) return e;
  return "";
}

// To oneself, an any-tag receive, a message longer than its receive, and bad arguments.
std::string edges(collComm_t comm, int rank, int n) {
  // Two messages to oneself: one taken by a receive from any source (its tag only this rank
  // sends: the previous rank's next messages may already be here, and any source may take them),
  // one by a receive of any tag from this rank.
  std::vector<int32_t> self = message(rank, 9, 3), got(4, -7), self2 = message(rank, 8, 2), got2(4, -7);
  collRequest_t s = nullptr, r = nullptr, selfS2 = nullptr, selfR2 = nullptr;
  if (collIsend(self.data(), 3, collInt32, rank, 11, comm, &s) != collSuccess ||
      collIsend(self2.data(), 2, collInt32, rank, 12, comm, &selfS2) != collSuccess)
    return std::string("isend to self: ") + collGetLastError(comm);
  if (collIrecv(got.data(), 4, collInt32, COLL_ANY_SOURCE, 11, comm, &r) != collSuccess ||
      collIrecv(got2.data(), 4, collInt32, rank, COLL_ANY_TAG, comm, &selfR2) != collSuccess)
    return std::string("irecv any: ") + collGetLastError(comm);
  collMsgStatus_t st{};
  std::string e = wait(&r, &st, comm, "irecv from self");
  if (e.empty() && (st.source != rank || st.tag != 11 || st.bytes != 12))
    e = fmt::format("self status {} {} {}", st.source, st.tag, st.bytes);
  if (e.empty()) e = checkMessage(got, 3, rank, 9, "self");
  if (e.empty()) e = wait(&selfR2, &st, comm, "irecv any tag from self");
  if (e.empty() && (st.source != rank || st.tag != 12 || st.bytes != 8))
    e = fmt::format("self any-tag status {} {} {}", st.source, st.tag, st.bytes);
  if (e.empty()) e = checkMessage(got2, 2, rank, 8, "self any tag");
  if (e.empty()) e = wait(&s, nullptr, comm, "isend to self");
  if (e.empty()) e = wait(&selfS2, nullptr, comm, "isend to self");
  if (!e.empty()) return e;

  // Too long: the receive fails, the message is dropped, the next one arrives whole.
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  std::vector<int32_t> longMsg = message(rank, 1, 100), shortMsg = message(rank, 2, 10);
  collRequest_t s1 = nullptr, s2 = nullptr, r1 = nullptr, r2 = nullptr;
  std::vector<int32_t> small(10, -7), after(10, -7);
  if (collIsend(longMsg.data(), 100, collInt32, next, 5, comm, &s1) != collSuccess ||
      collIsend(shortMsg.data(), 10, collInt32, next, 5, comm, &s2) != collSuccess ||
      collIrecv(small.data(), 10, collInt32, prev, 5, comm, &r1) != collSuccess ||
      collIrecv(after.data(), 10, collInt32, prev, 5, comm, &r2) != collSuccess)
    return std::string("truncation posts: ") + collGetLastError(comm);
  if (collWait(&r1, nullptr) != collInvalidUsage) return "a message longer than its receive did not fail it";
  std::string why = collGetLastError(comm);
  if (why.find("sent 400 bytes with tag 5, more than the receive has room for") == std::string::npos)
    return "truncation sentence: " + why;
  if (!(e = wait(&r2, &st, comm, "irecv after truncation")).empty()) return e;
  if (!(e = checkMessage(after, 10, prev, 2, "after truncation")).empty()) return e;
  if (!(e = wait(&s1, nullptr, comm, "isend long")).empty() || !(e = wait(&s2, nullptr, comm, "isend")).empty())
    return e;

  // Another type of the same size (the in-band check, COLL_CHECK_CALLS): the receive from any
  // source fails naming both types, the message is dropped, the next one arrives whole.
  std::vector<float> asFloat(10, 1.5f);
  std::vector<int32_t> typed = message(rank, 3, 10), wrong(10, -7), right(10, -7);
  collRequest_t s3 = nullptr, s4 = nullptr, r3 = nullptr, r4 = nullptr;
  if (collIsend(asFloat.data(), 10, collFloat32, next, 6, comm, &s3) != collSuccess ||
      collIsend(typed.data(), 10, collInt32, next, 6, comm, &s4) != collSuccess ||
      collIrecv(wrong.data(), 10, collInt32, COLL_ANY_SOURCE, 6, comm, &r3) != collSuccess ||
      collIrecv(right.data(), 10, collInt32, COLL_ANY_SOURCE, 6, comm, &r4) != collSuccess)
    return std::string("type posts: ") + collGetLastError(comm);
  if (collWait(&r3, nullptr) != collInvalidUsage) return "a message of another type did not fail its receive";
  why = collGetLastError(comm);
  if (why.find(fmt::format("rank {} sent 40 bytes with tag 6 as collFloat32, but this receive is for collInt32",
                           prev)) == std::string::npos)
    return "type sentence: " + why;
  if (wrong != std::vector<int32_t>(10, -7)) return "the receive of another type wrote its buffer";
  if (!(e = wait(&r4, &st, comm, "irecv after a type mismatch")).empty()) return e;
  if (!(e = checkMessage(right, 10, prev, 3, "after a type mismatch")).empty()) return e;
  if (!(e = wait(&s3, nullptr, comm, "isend float")).empty() || !(e = wait(&s4, nullptr, comm, "isend int")).empty())
    return e;

  // Bad arguments: refused with a sentence, nothing posted.
  collRequest_t bad = nullptr;
  struct Case {
    collResult_t rc;
    const char* says;
  } cases[] = {
      {collIsend(self.data(), 1, collInt32, n, 0, comm, &bad), "is not a rank"},
      {collIsend(self.data(), 1, collInt32, COLL_ANY_SOURCE, 0, comm, &bad), "is not a rank"},
      {collIsend(self.data(), 1, collInt32, 0, -1, comm, &bad), "tag -1 is negative"},
      {collIrecv(got.data(), 1, collInt32, 0, -2, comm, &bad), "tag -2 is negative and not COLL_ANY_TAG"},
      {collIrecv(got.data(), 1, static_cast<collDataType_t>(99), 0, 0, comm, &bad), "datatype 99"},
      {collIrecv(nullptr, 1, collInt32, 0, 0, comm, &bad), "buf is NULL"},
      {collIrecv(got.data(), 1, collInt32, 0, 0, comm, nullptr), "request is NULL"},
  };
  for (const Case& c : cases) {
    (void)c.says;
    if (c.rc != collInvalidArgument) return fmt::format("a bad argument gave {}", static_cast<int>(c.rc));
  }
  if (bad != nullptr) return "a refused call wrote its request";
  if (collWait(nullptr, nullptr) != collInvalidArgument || collRequestFree(nullptr) != collSuccess)
    return "NULL requests";
  return "";
}

// A send freed halfway goes on from a copy: the buffer is overwritten at once, the receiver still
// gets the message as it was.
std::string freedSend(collComm_t comm, int rank, int n) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t count = 100003;  // more than the FIFO (COLL_P2P_BUFFSIZE 1 MiB) holds
  std::vector<int32_t> out = message(rank, 5, count), in(count, -7);
  collRequest_t s = nullptr, r = nullptr;
  if (collIsend(out.data(), count, collInt32, next, 31, comm, &s) != collSuccess) return collGetLastError(comm);
  if (collRequestFree(&s) != collSuccess || s != nullptr) return "collRequestFree of a send";
  std::fill(out.begin(), out.end(), -1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (collIrecv(in.data(), count, collInt32, prev, 31, comm, &r) != collSuccess) return collGetLastError(comm);
  std::string e = wait(&r, nullptr, comm, "irecv of a freed send");
  return e.empty() ? checkMessage(in, count, prev, 5, "freed send") : e;
}

// A receive from any source stays posted while comm's collectives run; then it is served.
std::string besideCollectives(collComm_t comm, int rank, int n) {
  int32_t v = -7;
  collRequest_t r = nullptr;
  if (rank == 0 && collIrecv(&v, 1, collInt32, COLL_ANY_SOURCE, 21, comm, &r) != collSuccess)
    return std::string("irecv: ") + collGetLastError(comm);
  std::vector<float> x(1000, static_cast<float>(rank + 1));
  for (int i = 0; i < 3; ++i)
    if (collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, comm, nullptr) != collSuccess)
      return std::string("all-reduce beside a posted receive: ") + collGetLastError(comm);
  if (rank == n - 1) {
    int32_t m = 4242;
    collRequest_t s = nullptr;
    if (collIsend(&m, 1, collInt32, 0, 21, comm, &s) != collSuccess) return collGetLastError(comm);
    std::string e = wait(&s, nullptr, comm, "isend");
    if (!e.empty()) return e;
  }
  if (rank == 0) {
    collMsgStatus_t st{};
    std::string e = wait(&r, &st, comm, "irecv beside collectives");
    if (!e.empty()) return e;
    if (v != 4242 || st.source != n - 1) return fmt::format("got {} from {}", v, st.source);
  }
  return "";
}

// A receive nobody sends to ends at the deadline set before it (collCommSetTimeout).
std::string deadline(collComm_t comm, int rank, int n) {
  if (collCommSetTimeout(comm, 300) != collSuccess) return collGetLastError(comm);
  int32_t v = 0;
  collRequest_t r = nullptr;
  auto start = Clock::now();
  if (collIrecv(&v, 1, collInt32, (rank + 1) % n, 99, comm, &r) != collSuccess) return collGetLastError(comm);
  if (collWait(&r, nullptr) != collTimeout) return "a receive nobody sends to did not time out";
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  std::string why = collGetLastError(comm);
  collCommSetTimeout(comm, 600000);
  if (took < 0.29 || took > 3.0) return fmt::format("the receive's deadline came after {} s", took);
  if (why.find("no message matched it within 300 ms") == std::string::npos) return "timeout sentence: " + why;
  return "";
}

}  // namespace

std::string checkTagged(collComm_t comm) {
  int rank = -1, n = 0;
  collCommUserRank(comm, &rank);
  collCommCount(comm, &n);
  collRequest_t r = nullptr;
  int32_t v = 0;
  if (collIrecv(&v, 1, collInt32, 0, 0, comm, &r) != collInvalidUsage)
    return "a tagged receive before collCommTaggedInit was not refused";
  if (collCommTaggedInit(comm) != collSuccess) return std::string("init: ") + collGetLastError(comm);
  if (collCommTaggedInit(comm) != collSuccess) return std::string("second init: ") + collGetLastError(comm);
  std::string e;
  auto step = [&](const char* name, std::string (*f)(collComm_t, int, int)) {
    if (!e.empty()) return;
    e = f(comm, rank, n);
    if (e.empty()) e = barrier(comm);
    if (!e.empty()) e = std::string(name) + ": " + e;
  };
  step("any source", anySource);
  step("tag order", tagOrder);
  step("edges", edges);
  step("freed send", freedSend);
  step("beside collectives", besideCollectives);
  step("deadline", deadline);
  return e.empty() ? e : fmt::format("rank {}: {}", rank, e);
}

std::string checkTaggedSenderDies(collComm_t comm, int victim) {
  int rank = -1;
  collCommUserRank(comm, &rank);
  if (collCommTaggedInit(comm) != collSuccess) return std::string("init: ") + collGetLastError(comm);
  std::string e = barrier(comm);
  if (!e.empty()) return e;
  if (rank == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 posts first
    kill(getpid(), SIGKILL);
  }
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    return "";
  }
  int32_t a = 0, b = 0;
  collRequest_t fromVictim = nullptr, fromAny = nullptr;
  if (collIrecv(&a, 1, collInt32, victim, 1, comm, &fromVictim) != collSuccess ||
      collIrecv(&b, 1, collInt32, COLL_ANY_SOURCE, 2, comm, &fromAny) != collSuccess)
    return std::string("irecv: ") + collGetLastError(comm);
  auto start = Clock::now();
  std::string want = fmt::format("rank {}", victim);
  for (collRequest_t* r : {&fromVictim, &fromAny}) {
    if (collWait(r, nullptr) != collRemoteError) return "a receive from a killed sender did not fail";
    std::string why = collGetLastError(comm);
    if (why.find(want) == std::string::npos || why.find("died") == std::string::npos)
      return "the error does not name the dead sender: " + why;
  }
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  if (took > 5) return fmt::format("the dead sender was seen after {} s", took);
  return "";
}

std::string checkTaggedBound(collComm_t comm) {
  int rank = -1;
  collCommUserRank(comm, &rank);
  if (collCommTaggedInit(comm) != collSuccess) return std::string("init: ") + collGetLastError(comm);
  std::string e = barrier(comm);
  if (!e.empty() || rank > 1) return e;
  if (rank == 1) {  // 3 x 40 KB where the bound is 64 KiB: the second does not fit
    std::vector<int32_t> m(10000, 1);
    for (int i = 0; i < 3; ++i) {
      collRequest_t s = nullptr;
      if (collIsend(m.data(), m.size(), collInt32, 0, 1, comm, &s) != collSuccess) return collGetLastError(comm);
      collRequestFree(&s);  // goes on; rank 0 drops what does not fit
    }
    return "";
  }
  int32_t v = 0;
  collRequest_t r = nullptr;
  if (collIrecv(&v, 1, collInt32, 1, 2, comm, &r) != collSuccess) return collGetLastError(comm);
  if (collWait(&r, nullptr) != collInvalidUsage) return "passing COLL_P2P_UNEXPECTED_BYTES did not fail the receive";
  std::string why = collGetLastError(comm);
  if (why.find("rank 1 sent a message of 40000 bytes with tag 1 that no posted receive takes") == std::string::npos ||
      why.find("COLL_P2P_UNEXPECTED_BYTES=65536") == std::string::npos)
    return "bound sentence: " + why;
  return "";
}

}  // namespace colltest
