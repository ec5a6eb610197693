// The flight recorder: the last operations of one rank on one communicator, written to a file
// when an operation fails or the communicator is aborted (PyTorch's NCCL flight recorder is the
// model). `coll-flight` reads the files of all ranks and says where they diverged.
//
// Each operation is recorded when it starts (sequence number, kind, count, type, op, root or
// peer, wall-clock start) and marked when it ends. A ring of COLL_FLIGHT_RECORDER_ENTRIES
// entries; the file goes to COLL_FLIGHT_RECORDER_DIR (unset: no file) as
// coll-flight-<comm>-rank<r>.json, mode 0600, where <comm> is a hash of the communicator's id
// that every rank shares and that does not reveal the id's secret.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace coll {

struct OpArgs;

class FlightRecorder {
 public:
  FlightRecorder(int rank, int nranks, uint64_t commHash, size_t capacity, std::string dir);

  /// Records the start of the operations of one call (a group's several); returns the sequence
  /// number of the first (1 for the communicator's first), the others following it.
  uint64_t start(const std::vector<OpArgs>& ops);
  /// Marks the n operations from sequence number first finished (ok or failed).
  void end(uint64_t first, size_t n, bool ok);
  /// Writes the file, once per communicator (later calls do nothing); returns its path or "".
  std::string dump(const std::string& reason);
  /// The JSON text dump() writes (tests).
  std::string toJson(const std::string& reason) const;
  /// The hash that names the communicator in file names.
  uint64_t commHash() const { return commHash_; }

 private:
  struct Entry {
    uint64_t seq = 0;
    const char* name = "";
    size_t count = 0;
    int type = 0;
    int op = 0;
    int root = -1;
    int64_t startUs = 0;  // wall clock, so that the files of several hosts line up roughly
    int64_t endUs = 0;
    int state = 0;  // 0 running, 1 completed, 2 failed
  };
  int rank_;
  int nranks_;
  uint64_t commHash_;
  std::string dir_;
  mutable std::mutex mutex_;
  std::vector<Entry> ring_;  // ring_[seq % size]
  uint64_t next_ = 1;
  bool dumped_ = false;
};

}  // namespace coll
