// The flight recorder: the last operations of one rank on one communicator, written to a file
// when an operation fails or the communicator is aborted (PyTorch's NCCL flight recorder is the
// model). `coll-flight` reads the files of all ranks and says where they diverged.
//
// Each operation is recorded when it starts (sequence number, kind, count, type, op, root or
// peer, wall-clock start) and marked when it ends. A ring of COLL_FLIGHT_RECORDER_ENTRIES
// entries; the file goes to COLL_FLIGHT_RECORDER_DIR (unset: no file) as
// coll-flight-<comm>-rank<r>.json, mode 0600, where <comm> is a hash of the communicator's id
// that every rank shares and that does not reveal the id's secret.
//
// Recording takes no lock and reads no clock but the time-stamp counter (base/ticks.h): it is on
// every call's path, and a mutex pair and two clock_gettime calls were a fifth of an 8-byte
// all-reduce. Each entry is a seqlock: the writer zeroes its sequence number, writes the fields,
// then publishes the number; a reader (dump, possibly on another thread during an abort) keeps
// an entry only if it read the same number before and after its fields.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/ticks.h"

namespace coll {

struct OpArgs;

class FlightRecorder {
 public:
  FlightRecorder(int rank, int nranks, uint64_t commHash, size_t capacity, std::string dir);

  /// Records the start of the operations of one call (a group's several); returns the sequence
  /// number of the first (1 for the communicator's first), the others following it.
  uint64_t start(const OpArgs* ops, size_t n);
  /// Marks the n operations from sequence number first finished (ok or failed).
  void end(uint64_t first, size_t n, bool ok);
  /// end() from another thread than the one that starts operations (the device path's, whose
  /// launches complete on the proxy thread): it does not read the starter's cached position.
  void endElsewhere(uint64_t first, size_t n, bool ok);
  /// Writes the file, once per communicator (later calls do nothing); returns its path or "".
  std::string dump(const std::string& reason);
  /// The JSON text dump() writes (tests).
  std::string toJson(const std::string& reason) const;
  /// The hash that names the communicator in file names.
  uint64_t commHash() const { return commHash_; }

 private:
  /// Marks entries first .. first + n - 1, the first at ring position pos.
  void mark(uint64_t first, size_t n, bool ok, size_t pos);
  // Fields are relaxed atomics so that a concurrent dump reads them without a data race; the
  // sequence number orders them (release when published, acquire when read).
  struct alignas(64) Entry {       // one cache line
    std::atomic<uint64_t> seq{0};  // 0 while the entry is being written
    std::atomic<const char*> name{""};
    std::atomic<size_t> count{0};
    std::atomic<int> type{0};
    std::atomic<int> op{0};
    std::atomic<int> root{-1};
    std::atomic<uint64_t> startTick{0};
    std::atomic<uint64_t> endTick{0};
    std::atomic<int> state{0};  // 0 running, 1 completed, 2 failed
  };
  int rank_;
  int nranks_;
  uint64_t commHash_;
  std::string dir_;
  size_t capacity_;
  std::unique_ptr<Entry[]> ring_;  // ring_[seq % capacity_]
  std::atomic<uint64_t> next_{1};
  // The writer's own: the ring position of next_, and where the last start() began, so that
  // neither start() nor end() divides by the capacity (a 64-bit division per call).
  size_t nextPos_ = 1;  // 1 % capacity_, set by the constructor
  uint64_t lastFirst_ = 0;
  size_t lastPos_ = 0;
  mutable std::mutex dumpMutex_;  // dump and toJson only
  mutable TickClock clock_;       // under dumpMutex_
  bool dumped_ = false;
};

}  // namespace coll
