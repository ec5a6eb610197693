// The receive engine of tagged messages (mailbox.h says how it works).
#include "core/mailbox.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/params.h"
#include "base/process.h"
#include "core/comm.h"
#include "core/redop.h"

namespace coll {

using Clock = std::chrono::steady_clock;
using transport::Fifo;

namespace {

constexpr uint32_t kHeaderMagic = 0x67617463;  // "ctag"
constexpr auto kLivenessEvery = std::chrono::milliseconds(100);
constexpr int64_t kMaxNapUs = 1000;

bool matches(const MsgRequest& r, int source, int tag) {
  return (r.peer == COLL_ANY_SOURCE || r.peer == source) && (r.tag == COLL_ANY_TAG || r.tag == tag);
}

std::string describe(const MsgRequest& r) {
  if (r.isSend) return fmt::format("collIsend to rank {} (tag {}, {} bytes)", r.peer, r.tag, r.bytes);
  std::string from = r.peer == COLL_ANY_SOURCE ? "any source" : fmt::format("rank {}", r.peer);
  std::string tag = r.tag == COLL_ANY_TAG ? "any tag" : fmt::format("tag {}", r.tag);
  return fmt::format("collIrecv from {} ({}, room for {} bytes)", from, tag, r.bytes);
}

}  // namespace

struct Mailbox::Header {
  uint32_t magic;
  int32_t tag;
  uint64_t bytes;
  int32_t type;  // MsgRequest::type: -1 when the sender does not check
  uint32_t unused;
};

// ---------------------------------------------------------------------------------------------
// MsgRequest

void MsgRequest::finish(Status result, const collMsgStatus_t& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    result_ = std::move(result);
    status_ = status;
  }
  cv_.notify_all();
}

bool MsgRequest::test(Status* result, collMsgStatus_t* status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return false;
  *result = result_;
  if (status) *status = status_;
  return true;
}

Status MsgRequest::wait(collMsgStatus_t* status) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  if (status) *status = status_;
  return result_;
}

// ---------------------------------------------------------------------------------------------
// Mailbox: posting

Mailbox::Mailbox(collComm* inner)
    : inner_(inner),
      rank_(inner->rank),
      nranks_(inner->nranks),
      out_(static_cast<size_t>(inner->nranks)),
      in_(static_cast<size_t>(inner->nranks)),
      heldLimit_(static_cast<size_t>(params::kP2PUnexpectedBytes.get())),
      gone_(static_cast<size_t>(inner->nranks)) {
  thread_ = std::thread([this] { run(); });
}

Mailbox::~Mailbox() = default;

Status Mailbox::post(const std::shared_ptr<MsgRequest>& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return Status(collInvalidUsage, "the communicator is being destroyed");
  r->lastMoved = Clock::now();
  if (r->isSend) {
    if (r->peer == rank_) {
      deliverLocal(r);
      return Status::ok();
    }
    if (!gone_[r->peer].empty()) return COLL_ERROR(collRemoteError, FMT_STRING("{}: {}"), describe(*r), gone_[r->peer]);
    out_[r->peer].queue.push_back(r);
  } else {
    if (!failed_.isOk()) return failed_;
    if (matchHeld(r)) return Status::ok();
    if (r->peer != COLL_ANY_SOURCE && !gone_[r->peer].empty())
      return COLL_ERROR(collRemoteError, FMT_STRING("{}: {}"), describe(*r), gone_[r->peer]);
    posted_.push_back(r);
  }
  wake_.notify_one();
  return Status::ok();
}

void Mailbox::withdraw(const std::shared_ptr<MsgRequest>& r) {
  std::lock_guard<std::mutex> lock(mu_);
  r->withdrawn = true;
  Status freed(collInvalidUsage, "the request was freed before it completed");
  if (r->isSend) {
    // Still queued or halfway out: the rest goes from a copy (the peer still expects it whole).
    for (const Outbox& o : out_)
      if (std::find(o.queue.begin(), o.queue.end(), r) != o.queue.end()) {
        r->owned.assign(r->buf, r->buf + r->bytes);
        r->buf = r->owned.data();
      }
    return;
  }
  auto it = std::find(posted_.begin(), posted_.end(), r);
  if (it != posted_.end()) posted_.erase(it);
  for (Inbound& in : in_)
    if (in.active && in.req == r) in.into = nullptr;  // the rest of its message is dropped
  r->finish(freed, {});  // a held message it claimed is dropped when whole (completeInbound)
}

bool Mailbox::fits(const std::shared_ptr<MsgRequest>& r, int source, int tag, size_t bytes, int type) {
  if (bytes > r->bytes) {
    r->finish(COLL_ERROR(collInvalidUsage,
                         FMT_STRING("{}: rank {} sent {} bytes with tag {}, more than the receive has room for; the "
                                    "message was dropped"),
                         describe(*r), source, bytes, tag),
              {source, tag, bytes});
    return false;
  }
  // MPI's type matching: the receive reads the bytes as its own type, so another one would be
  // read as garbage (float32 as int32 has the same size and passes the size check).
  if (r->type < 0 || type < 0 || r->type == type) return true;
  r->finish(COLL_ERROR(collInvalidUsage,
                       FMT_STRING("{}: rank {} sent {} bytes with tag {} as {}, but this receive is for {}: a message "
                                  "and its receive must have the same type (COLL_CHECK_CALLS); the message was "
                                  "dropped"),
                       describe(*r), source, bytes, tag, typeName(type), typeName(r->type)),
            {source, tag, bytes});
  return false;
}

bool Mailbox::matchHeld(const std::shared_ptr<MsgRequest>& r) {
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    if (it->claimedBy || !matches(*r, it->source, it->tag)) continue;
    const size_t bytes = it->data.size();
    bool ok = fits(r, it->source, it->tag, bytes, it->type);
    if (it->got < bytes) {  // still arriving: completeInbound hands it over (or drops it)
      it->claimedBy = r;
      return true;
    }
    if (ok) {
      if (bytes) std::memcpy(r->buf, it->data.data(), bytes);
      r->finish(Status::ok(), {it->source, it->tag, bytes});
    }
    heldBytes_ -= bytes;
    held_.erase(it);
    return true;
  }
  return false;
}

void Mailbox::deliverLocal(const std::shared_ptr<MsgRequest>& send) {
  collMsgStatus_t sent{rank_, send->tag, send->bytes};
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!matches(**it, rank_, send->tag)) continue;
    std::shared_ptr<MsgRequest> r = *it;
    posted_.erase(it);
    if (fits(r, rank_, send->tag, send->bytes, send->type)) {
      if (send->bytes) std::memcpy(r->buf, send->buf, send->bytes);
      r->finish(Status::ok(), sent);
    }
    send->finish(Status::ok(), sent);
    return;
  }
  if (!failed_.isOk() || heldBytes_ + send->bytes > heldLimit_) {
    send->finish(COLL_ERROR(collInvalidUsage,
                            FMT_STRING("{}: no receive is posted for it and the messages held for receives not yet "
                                       "posted would pass COLL_P2P_UNEXPECTED_BYTES={}"),
                            describe(*send), heldLimit_),
                 sent);
    return;
  }
  Held h;
  h.source = rank_;
  h.tag = send->tag;
  h.type = send->type;
  h.data.assign(send->buf, send->buf + send->bytes);
  h.got = send->bytes;
  heldBytes_ += send->bytes;
  held_.push_back(std::move(h));
  send->finish(Status::ok(), sent);
}

// ---------------------------------------------------------------------------------------------
// Mailbox: the thread

bool Mailbox::pending() const {
  if (!posted_.empty()) return true;
  for (int p = 0; p < nranks_; ++p)
    if (!out_[p].queue.empty() || in_[p].active) return true;
  // A network connection's last slots still have to be handed to the socket.
  return inner_->conns->links().progress->hasUnsentData();
}

void Mailbox::run() {
  std::unique_lock<std::mutex> lock(mu_);
  int64_t napUs = 0;
  int idlePasses = 0;
  while (!stop_) {
    if (!pending()) {
      wake_.wait(lock, [this] { return stop_ || pending(); });
      napUs = 0;
      idlePasses = 0;
      continue;
    }
    bool moved = pass();
    auto now = Clock::now();
    if (now - lastLiveness_ >= kLivenessEvery) {
      lastLiveness_ = now;
      checkPeers();
      checkDeadlines(now);
    }
    if (moved) {
      napUs = 0;
      idlePasses = 0;
      continue;
    }
    // Nothing moved: a few more passes (a peer that is a little late), then naps that grow to
    // kMaxNapUs, so that a receive posted long before its message costs next to no CPU. A post
    // ends the nap at once.
    if (++idlePasses < 32) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      continue;
    }
    napUs = napUs ? std::min(napUs * 2, kMaxNapUs) : 5;
    wake_.wait_for(lock, std::chrono::microseconds(napUs));
  }
}

bool Mailbox::pass() {
  const exec::Links& l = inner_->conns->links();
  auto now = Clock::now();
  bool moved = false;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || !gone_[p].empty()) continue;
    transport::Connection* s = l.sendTo[p];
    transport::Connection* r = l.recvFrom[p];
    Status progressed = l.progress->pollOne(s);
    if (progressed.isOk()) progressed = l.progress->pollOne(r);
    if (!progressed.isOk()) {
      failPeer(p, progressed);
      continue;
    }
    moved |= pumpSends(p, now);
    moved |= pumpRecvs(p, now);
  }
  return moved;
}

bool Mailbox::pumpSends(int peer, Clock::time_point now) {
  Outbox& o = out_[peer];
  const Fifo& f = inner_->conns->links().sendTo[peer]->fifo();
  const uint64_t nslots = static_cast<uint64_t>(f.nslots);
  bool moved = false;
  while (!o.queue.empty()) {
    if (o.cursor >= o.tailSeen + nslots) {
      o.tailSeen = f.header->tail.load(std::memory_order_acquire);
      if (o.cursor >= o.tailSeen + nslots) break;  // full: the peer has not drained it yet
    }
    MsgRequest& r = *o.queue.front();
    if (!o.headerSent) {
      Header h{kHeaderMagic, r.tag, r.bytes, r.type, 0};
      std::memcpy(f.sendBuffer(o.cursor, sizeof(h)), &h, sizeof(h));
      f.publish(o.cursor++, sizeof(h));
      o.headerSent = true;
    } else {
      size_t k = std::min(f.slotBytes, r.bytes - o.sent);
      std::memcpy(f.sendBuffer(o.cursor, k), r.buf + o.sent, k);
      f.publish(o.cursor++, k);
      o.sent += k;
    }
    moved = true;
    r.lastMoved = now;
    if (o.sent == r.bytes) {
      r.finish(Status::ok(), {rank_, r.tag, r.bytes});
      o.queue.pop_front();
      o.headerSent = false;
      o.sent = 0;
      if (!o.queue.empty()) o.queue.front()->lastMoved = now;  // its wait starts now
    }
  }
  return moved;
}

bool Mailbox::pumpRecvs(int peer, Clock::time_point now) {
  Inbound& in = in_[peer];
  const Fifo& f = inner_->conns->links().recvFrom[peer]->fifo();
  bool moved = false;
  while (f.ready(in.cursor)) {
    size_t n = f.bytesIn(in.cursor);
    if (f.isRef(in.cursor)) {  // this engine's senders never publish references
      failPeer(peer, COLL_ERROR(collRemoteError, FMT_STRING("rank {} sent a piece this engine cannot read"), peer));
      return moved;
    }
    const char* piece = f.recvBuffer(in.cursor);
    if (!in.active) {
      Status s = route(peer, piece, n);
      if (!s.isOk()) {
        failPeer(peer, s);
        return moved;
      }
    } else {
      if (n > in.bytes - in.got) {
        failPeer(peer, COLL_ERROR(collRemoteError,
                                  FMT_STRING("rank {} sent {} bytes more than the {} of its message (tag {})"), peer,
                                  n - (in.bytes - in.got), in.bytes, in.tag));
        return moved;
      }
      if (in.into) std::memcpy(in.into + in.got, piece, n);
      in.got += n;
      if (in.toHeld) in.held->got = in.got;
      if (in.req) in.req->lastMoved = now;
    }
    f.release(in.cursor++);
    moved = true;
    if (in.active && in.got == in.bytes) completeInbound(peer);
  }
  return moved;
}

Status Mailbox::route(int peer, const char* piece, size_t n) {
  Header h;
  if (n != sizeof(h))
    return COLL_ERROR(collRemoteError, FMT_STRING("rank {} sent a piece of {} bytes where a message header was due"),
                      peer, n);
  std::memcpy(&h, piece, sizeof(h));
  if (h.magic != kHeaderMagic || h.tag < 0)
    return COLL_ERROR(collRemoteError, FMT_STRING("rank {} sent garbage where a message header was due"), peer);
  Inbound& in = in_[peer];
  in.reset();
  in.active = true;
  in.tag = h.tag;
  in.type = h.type;
  in.bytes = h.bytes;
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!matches(**it, peer, h.tag)) continue;
    in.req = *it;
    posted_.erase(it);
    if (fits(in.req, peer, h.tag, h.bytes, h.type)) in.into = in.req->buf;
    return Status::ok();
  }
  if (failed_.isOk() && heldBytes_ + h.bytes > heldLimit_) {
    failed_ = COLL_ERROR(collInvalidUsage,
                         FMT_STRING("rank {} sent a message of {} bytes with tag {} that no posted receive takes, and "
                                    "the messages held for receives not yet posted ({} bytes) would pass "
                                    "COLL_P2P_UNEXPECTED_BYTES={}: post receives earlier, or raise the limit; the "
                                    "message was dropped and this rank's tagged receives fail from now on"),
                         peer, h.bytes, h.tag, heldBytes_, heldLimit_);
    for (auto& r : posted_) r->finish(failed_, {});
    posted_.clear();
  }
  if (!failed_.isOk()) return Status::ok();  // dropped: in.into stays null
  Held held;
  held.source = peer;
  held.tag = h.tag;
  held.type = h.type;
  held.data.resize(h.bytes);
  heldBytes_ += h.bytes;
  held_.push_back(std::move(held));
  in.toHeld = true;
  in.held = std::prev(held_.end());
  in.into = in.held->data.data();
  return Status::ok();
}

void Mailbox::completeInbound(int peer) {
  Inbound& in = in_[peer];
  collMsgStatus_t st{peer, in.tag, in.bytes};
  if (in.req && in.into) in.req->finish(Status::ok(), st);
  if (in.toHeld && in.held->claimedBy) {
    std::shared_ptr<MsgRequest> r = in.held->claimedBy;
    // Else it failed already (too small, another type, or freed).
    if (in.bytes <= r->bytes && (r->type < 0 || in.type < 0 || r->type == in.type) && !r->withdrawn) {
      if (in.bytes) std::memcpy(r->buf, in.held->data.data(), in.bytes);
      r->finish(Status::ok(), st);
    }
    heldBytes_ -= in.held->data.size();
    held_.erase(in.held);
  }
  in.reset();
}

// ---------------------------------------------------------------------------------------------
// Mailbox: failures

void Mailbox::failPeer(int peer, const Status& s) {
  if (!gone_[peer].empty()) return;
  gone_[peer] = s.message();
  for (auto& r : out_[peer].queue) r->finish(COLL_ERROR(s.code(), FMT_STRING("{}: {}"), describe(*r), s.message()), {});
  out_[peer].queue.clear();
  Inbound& in = in_[peer];
  if (in.active) {
    if (in.req) in.req->finish(COLL_ERROR(s.code(), FMT_STRING("{}: {}"), describe(*in.req), s.message()), {});
    if (in.toHeld) {
      if (in.held->claimedBy)
        in.held->claimedBy->finish(
            COLL_ERROR(s.code(), FMT_STRING("{}: {}"), describe(*in.held->claimedBy), s.message()), {});
      heldBytes_ -= in.held->data.size();
      held_.erase(in.held);
    }
    in.reset();
  }
  // A receive from any source might have been for this peer: it ends too, rather than wait for
  // a message that may never come.
  for (auto it = posted_.begin(); it != posted_.end();) {
    MsgRequest& r = **it;
    if (r.peer != peer && r.peer != COLL_ANY_SOURCE) {
      ++it;
      continue;
    }
    r.finish(COLL_ERROR(s.code(), FMT_STRING("{}: {}"), describe(r), s.message()), {});
    it = posted_.erase(it);
  }
}

void Mailbox::checkPeers() {
  const exec::Links& l = inner_->conns->links();
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || !gone_[p].empty()) continue;
    int pid = l.localPids[p];
    if (pid > 0 && processGone(pid)) {
      failPeer(p, COLL_ERROR(collRemoteError, FMT_STRING("rank {} (pid {}{}) died"), p, pid, exec::onHost(l, p)));
      continue;
    }
    transport::Connection* r = l.recvFrom[p];
    if (r->peerClosed() && !r->fifo().ready(in_[p].cursor)) {
      std::string why = r->closedReason();
      failPeer(p, COLL_ERROR(collRemoteError, FMT_STRING("rank {}{} closed its connection{}"), p, exec::onHost(l, p),
                             why.empty() ? "" : " (" + why + ")"));
    }
  }
}

void Mailbox::checkDeadlines(Clock::time_point now) {
  auto late = [now](const MsgRequest& r) { return now - r.lastMoved > std::chrono::milliseconds(r.timeoutMs); };
  const exec::Links& l = inner_->conns->links();
  for (int p = 0; p < nranks_; ++p) {
    // A message stuck halfway leaves the connection unusable: everything with this peer ends.
    const MsgRequest* stuck = nullptr;
    if (!out_[p].queue.empty() && late(*out_[p].queue.front())) stuck = out_[p].queue.front().get();
    const Inbound& in = in_[p];
    std::shared_ptr<MsgRequest> reader = in.req ? in.req : (in.toHeld ? in.held->claimedBy : nullptr);
    if (!stuck && in.active && reader && late(*reader)) stuck = reader.get();
    if (!stuck) continue;
    failPeer(p, COLL_ERROR(collTimeout,
                           FMT_STRING("nothing moved for {} ms (COLL_TIMEOUT_MS, config.timeoutMs or "
                                      "collCommSetTimeout) with rank {}{}: it stalled, died, or posted no receive "
                                      "for the message"),
                           stuck->timeoutMs, p, exec::onHost(l, p)));
  }
  for (auto it = posted_.begin(); it != posted_.end();) {
    if (!late(**it)) {
      ++it;
      continue;
    }
    MsgRequest& r = **it;
    r.finish(COLL_ERROR(collTimeout,
                        FMT_STRING("{}: no message matched it within {} ms (COLL_TIMEOUT_MS, config.timeoutMs or "
                                   "collCommSetTimeout)"),
                        describe(r), r.timeoutMs),
             {});
    it = posted_.erase(it);
  }
}

void Mailbox::shutdown(const char* why, bool abort) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      stop_ = true;
      Status s = COLL_ERROR(collRemoteError, FMT_STRING("{} while the request was pending"), why);
      for (int p = 0; p < nranks_; ++p) {
        for (auto& r : out_[p].queue) r->finish(s, {});
        if (in_[p].req) in_[p].req->finish(s, {});
      }
      for (auto& r : posted_) r->finish(s, {});
      for (auto& h : held_)
        if (h.claimedBy) h.claimedBy->finish(s, {});
    }
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (inner_) {
    (void)releaseComm(inner_, abort ? Release::kAbort : Release::kDestroy);
    inner_ = nullptr;
  }
}

}  // namespace coll
