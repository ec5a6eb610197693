// Host streams: coll's own streams for non-blocking host-memory operations (collHostStreamCreate).
//
// A host-memory call on a host stream is validated at once, then queued on its communicator's
// HostQueue (one worker thread per communicator, started on first use) and the call returns. The
// worker runs a communicator's queued work in issue order, which is the order the ranks agreed
// on, exactly as blocking calls would have run; a blocking call (NULL stream) on a communicator
// first waits for that communicator's queue to drain. Work on one stream runs in stream order:
// an item waits until the stream's previous item has completed, even when that one is on another
// communicator. A group's parts on several communicators form one stream item (they must run
// together: one thread may drive every rank of a clique), which completes when all parts have.
//
// Errors: an item fails exactly as the blocking call would have (same sentence, the communicator
// marked broken); the stream keeps the first failure since the last collStreamSynchronize, which
// returns it. Destroying or aborting a communicator with work queued or running cancels that
// work (aborting what runs): its stream reports why, and no thread waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "base/status.h"
#include "coll/coll.h"

namespace coll {

class HostStream {
 public:
  static constexpr uint64_t kMagic = 0xc011057ea3a11ull;

  /// Allocates a stream and registers it live.
  static HostStream* create();
  /// The live host stream behind s, or nullptr (NULL, a CUDA stream, a destroyed one).
  static HostStream* find(collStream_t s);
  /// Unregisters and frees s after every item on it has completed; returns the unreported failure.
  static Status destroy(HostStream* s);

  collStream_t handle() { return reinterpret_cast<collStream_t>(this); }

  /// Issues the next item, made of `parts` parts (communicators); returns its sequence number.
  uint64_t issue(int parts);
  /// Waits until every item before seq has completed (stream order); false if *abort rose first.
  bool waitPredecessors(uint64_t seq, const std::atomic<bool>& abort);
  /// One part of item seq is done; status is its result (the first failure is kept). text is
  /// the sentence collGetLastError gives for it.
  void finishPart(uint64_t seq, const Status& status);
  /// Waits for every issued item; returns the first failure since the last call and forgets it.
  Status synchronize();
  /// collSuccess when every issued item completed without failure, collInProgress while some
  /// have not, else the kept failure (kept until synchronize).
  Status query();

 private:
  HostStream() = default;
  uint64_t magic_ = kMagic;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t issued_ = 0;
  uint64_t completed_ = 0;           // items 1..completed_ are done (in order)
  std::map<uint64_t, int> pending_;  // seq -> parts left, for items not yet counted in completed_
  Status failure_;                   // the first failure since the last synchronize
  int orderWaiters_ = 0;             // workers waiting for an earlier item (stream order)
  int syncWaiters_ = 0;              // threads waiting for every item
};

}  // namespace coll
