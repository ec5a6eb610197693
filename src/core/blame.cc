#include "core/blame.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "base/log.h"
#include "core/comm.h"

namespace coll {

std::string findStalledRank(collComm* comm, int firstPeer, int64_t answerMs) {
  bootstrap::Bootstrap& boot = *comm->bootstrap;
  std::vector<int> chain{comm->rank};
  int at = firstPeer;
  auto path = [&] {
    std::string s = "chain of waits: ";
    for (size_t i = 0; i + 1 < chain.size(); ++i)
      s += fmt::format("{}rank {} waits for rank {}", i ? ", " : "", chain[i], chain[i + 1]);
    return s;
  };
  while (at >= 0 && at < comm->nranks && static_cast<int>(chain.size()) <= comm->nranks) {
    chain.push_back(at);
    if (std::count(chain.begin(), chain.end() - 1, at) > 0)
      return fmt::format(
          "these ranks wait for each other in a cycle (they called different operations or counts); "
          "{}",
          path());
    // A rank inside an operation that has not said whom it waits for yet (its executor tells at
    // its next check, or at its own timeout, which comes about now) is asked again.
    Result<bootstrap::WaitAnswer> a = boot.askWhatPeerWaitsFor(at, answerMs);
    for (int again = 0; again < 4 && a.isOk() && a->inOp && a->waitingFor < 0; ++again) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      a = boot.askWhatPeerWaitsFor(at, answerMs);
    }
    if (!a.isOk()) {
      // Gone (its listener refuses) is not the same as frozen: a rank that failed and exited has
      // usually told everyone why, and that notice is the better explanation; a notice that
      // arrives while this rank waits for an answer ends the wait too.
      if (a.status().code() != collTimeout) {
        // A peer's notice (its own chain's verdict, often) ends the wait for an answer.
        std::string notice = boot.peerFailure(300);
        if (!notice.empty()) return "as " + notice;
        return fmt::format("{} cannot be reached ({}); {}", boot.describe(at), a.status().message(), path());
      }
      return fmt::format(
          "{} stopped making progress: it does not answer within {} ms (stopped, hung in "
          "computation, or frozen); {}",
          boot.describe(at), answerMs, path());
    }
    COLL_LOG(INFO, COLL, "rank {}: rank {} is at operation #{} ({}){}", comm->rank, at, a->opSeq, a->opName,
             a->waitingFor >= 0 ? fmt::format(", waiting {} ms for rank {}", a->waitedMs, a->waitingFor) : "");
    if (a->waitingFor < 0) {
      uint64_t mine = comm->waitState->opSeq.load();
      std::string where = a->inOp
                              ? fmt::format("is running operation #{} ({}) but waits for no peer", a->opSeq, a->opName)
                              : fmt::format("is not in an operation (it has started {}, this rank {})", a->opSeq, mine);
      return fmt::format("{} stopped making progress: it {}; {}", boot.describe(at), where, path());
    }
    at = a->waitingFor;
  }
  return "";
}

}  // namespace coll
