// The client layer's tests run their ranks as threads of the test process.
#pragma once

#include <catch2/catch.hpp>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"

namespace colltest {

/// Runs f(rank, comm) on one thread per rank of a fresh clique of n (collCommInitAll), destroys
/// the communicators, and returns each rank's exception text ("" if none).
inline std::vector<std::string> onRanks(int n, const std::function<void(int, collComm_t)>& f) {
  std::vector<collComm_t> comms(n);
  REQUIRE(collCommInitAll(comms.data(), n, nullptr) == collSuccess);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r, comms[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto c : comms) collCommDestroy(c);
  return errors;
}

}  // namespace colltest
