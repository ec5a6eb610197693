// Ranks as processes: through coll-run (1..8 ranks, two "nodes"), its failure handling and
// signals, and the rendezvous failure paths with real processes (a rank that never starts, a
// rank killed during init). Paths of the binaries come from CMake.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <regex>
#include <thread>

#include "base/param.h"
#include "multiproc/spawn.h"

using colltest::Command;
using colltest::Outcome;

namespace {

const std::string kRun = COLL_RUN_PATH;
const std::string kWorker = COLL_WORKER_PATH;
const std::string kInfo = COLL_INFO_PATH;

int countMatches(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// n worker processes started directly (no launcher), with the COLL_* contract set by hand.
std::vector<Command> directRanks(int worldSize, const std::vector<int>& ranks, const std::string& mode,
                                 std::vector<std::pair<std::string, std::string>> extra) {
  int port = colltest::freePort();
  std::vector<Command> cmds;
  for (int r : ranks) {
    Command c{{kWorker, mode},
              {{"COLL_RANK", std::to_string(r)},
               {"COLL_WORLD_SIZE", std::to_string(worldSize)},
               {"COLL_MASTER_ADDR", "127.0.0.1"},
               {"COLL_MASTER_PORT", std::to_string(port)},
               {"COLL_BOOTSTRAP_SECRET", "c0ffee"}}};
    for (auto& e : extra) c.env.push_back(e);
    cmds.push_back(c);
  }
  return cmds;
}

}  // namespace

TEST_CASE("coll-run -n 1..8: every rank initializes from the environment and passes the checks", "[processes]") {
  for (int n = 1; n <= 8; ++n) {
    DYNAMIC_SECTION("coll-run -n " << n) {
      Outcome o = colltest::runOne({{kRun, "-n", std::to_string(n), kWorker, "basic"}}, 120);
      INFO(o.output);
      CHECK(o.exitCode() == 0);
      CHECK(countMatches(o.output, "worker rank \\d+/" + std::to_string(n) + " ok") == n);
    }
  }
}

TEST_CASE("two coll-run 'nodes' form one job through --nnodes/--node-rank/--master", "[processes]") {
  std::string master = "127.0.0.1:" + std::to_string(colltest::freePort());
  std::vector<Command> nodes;
  for (int node = 0; node < 2; ++node)
    nodes.push_back({{kRun, "-n", "2", "--nnodes", "2", "--node-rank", std::to_string(node), "--master", master,
                      "--tag-output", kWorker, "basic"},
                     {{"COLL_BOOTSTRAP_SECRET", "5eed0fc011ec7175"}}});
  auto outs = colltest::runAll(nodes, 120);
  for (int node = 0; node < 2; ++node) {
    INFO(outs[node].output);
    CHECK(outs[node].exitCode() == 0);
    CHECK(countMatches(outs[node].output, "worker rank \\d/4 ok") == 2);
  }
  CHECK(countMatches(outs[1].output, "\\[2\\] worker rank 2/4 ok") == 1);  // --tag-output prefixes
}

TEST_CASE("multi-node coll-run refuses to start without a shared secret", "[processes]") {
  // A secret derived from the master address, port and size can be computed by anyone who can
  // reach the root; coll-run cannot hand a drawn one to the other nodes, so it asks for one.
  std::string master = "127.0.0.1:" + std::to_string(colltest::freePort());
  Outcome o =
      colltest::runOne({{kRun, "-n", "1", "--nnodes", "2", "--node-rank", "0", "--master", master, kWorker, "basic"},
                        {{"COLL_BOOTSTRAP_SECRET", ""}}},
                       30);
  INFO(o.output);
  CHECK(o.exitCode() == 2);
  CHECK(countMatches(o.output, "--nnodes > 1 needs COLL_BOOTSTRAP_SECRET") == 1);
  CHECK(o.seconds < 5);
}

TEST_CASE("coll-info --check passes under coll-run", "[processes]") {
  Outcome o = colltest::runOne({{kRun, "-n", "3", kInfo, "--check"}}, 60);
  INFO(o.output);
  CHECK(o.exitCode() == 0);
  CHECK_THAT(o.output, Catch::Contains("bootstrap self-check passed: 3 rank(s)"));
}

TEST_CASE("coll-run: a failing rank ends the job with its status, naming it", "[processes][failure]") {
  Outcome o = colltest::runOne({{kRun, "-n", "4", kWorker, "fail-rank", "2", "7"}}, 60);
  INFO(o.output);
  CHECK(o.exitCode() == 7);
  CHECK_THAT(o.output, Catch::Contains("coll-run: rank 2 (pid") && Catch::Contains("exited with status 7") &&
                           Catch::Contains("terminating the other 3 rank(s)"));
  CHECK(o.seconds < 15);  // the others would otherwise wait 60 s in their barrier
}

TEST_CASE("coll-run: a rank that cannot be executed is a failure with status 127", "[processes][failure]") {
  Outcome o = colltest::runOne({{kRun, "-n", "2", "/nonexistent/program"}}, 30);
  CHECK(o.exitCode() == 127);
  CHECK_THAT(o.output, Catch::Contains("cannot execute '/nonexistent/program'"));
}

TEST_CASE("coll-run: --timeout ends the job with 124", "[processes][failure]") {
  Outcome o = colltest::runOne({{kRun, "-n", "2", "--timeout", "0.5", kWorker, "sleep", "30"}}, 30);
  CHECK(o.exitCode() == 124);
  CHECK(o.seconds < 10);
  CHECK_THAT(o.output, Catch::Contains("--timeout of 0.5 s reached"));
}

TEST_CASE("coll-run forwards SIGTERM and SIGINT to every rank and leaves no process behind", "[processes][failure]") {
  for (auto [name, sig] : {std::pair<const char*, int>{"TERM", SIGTERM}, {"INT", SIGINT}}) {
    DYNAMIC_SECTION("SIG" << name) {
      // coreutils timeout sends the signal to coll-run after 1 s and returns coll-run's status.
      Outcome o = colltest::runOne(
          {{"timeout", "--preserve-status", "-s", name, "1", kRun, "-n", "3", kWorker, "sleep", "30"}}, 30);
      CHECK(o.exitCode() == 128 + sig);
      CHECK(o.seconds < 10);
      CHECK_THAT(o.output, Catch::Contains("forwarding it to all ranks"));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      CHECK(colltest::processesMatching(kWorker + " sleep").empty());
    }
  }
}

TEST_CASE("coll-run usage errors exit 2 with a message", "[processes]") {
  for (auto args : std::vector<std::vector<std::string>>{{kRun},
                                                         {kRun, "-n", "0", "true"},
                                                         {kRun, "-n", "two", "true"},
                                                         {kRun, "-n", "2"},
                                                         {kRun, "-n", "2", "--nnodes", "2", "true"},
                                                         {kRun, "-n", "2", "--master", "nohostport", "true"},
                                                         {kRun, "--bogus", "-n", "2", "true"},
                                                         {kRun, "-n", "2", "--node-rank", "1", "true"}}) {
    Outcome o = colltest::runOne({args}, 10);
    INFO(o.output);
    CHECK(o.exitCode() == 2);
    CHECK_THAT(o.output, Catch::Contains("usage: coll-run"));
  }
  CHECK(colltest::runOne({{kRun, "--help"}}, 10).exitCode() == 0);
}

TEST_CASE("processes: a rank that never starts makes the others fail with collTimeout naming it",
          "[processes][failure]") {
  auto cmds = directRanks(4, {0, 1, 3}, "init-expect-fail", {{"COLL_BOOTSTRAP_TIMEOUT_MS", "1500"}});
  auto outs = colltest::runAll(cmds, 30);
  for (const auto& o : outs) {
    INFO(o.output);
    CHECK(o.exitCode() == 3);
    CHECK_THAT(o.output,
               Catch::Contains("operation timed out") && Catch::Contains("never arrived") && Catch::Contains("rank 2"));
    CHECK(o.seconds < 1.5 + 1.0 + 3.0);  // deadline + grace + slack for a loaded 2-core machine
  }
}

TEST_CASE("processes: a rank killed during init makes the others fail within the deadline", "[processes][failure]") {
  for (const char* point : {"init-after-hello:2", "init-before-hello:2"}) {
    DYNAMIC_SECTION(point) {
      auto cmds = directRanks(4, {0, 1, 2, 3}, "init-expect-fail",
                              {{"COLL_BOOTSTRAP_TIMEOUT_MS", "3000"}, {"COLL_FAULT_INJECT", point}});
      auto outs = colltest::runAll(cmds, 60);
      CHECK(outs[2].exitCode() == 128 + SIGKILL);
      for (int r : {0, 1, 3}) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 3);
        CHECK_THAT(outs[r].output, Catch::Contains("rank 2"));
        CHECK(outs[r].seconds < 3.0 + 1.0 + 3.0);
      }
    }
  }
}

TEST_CASE("processes: contradictory launcher variables are refused before any connection", "[processes]") {
  auto o = colltest::runOne({{kWorker, "init-expect-fail"}, {{"COLL_RANK", "4"}, {"COLL_WORLD_SIZE", "4"}}}, 10);
  CHECK(o.exitCode() == 3);
  CHECK_THAT(o.output, Catch::Contains("COLL_RANK=4 contradicts COLL_WORLD_SIZE=4"));
  CHECK(o.seconds < 2);
}

TEST_CASE("COLL_SOCKET_IFNAME chooses the bootstrap interface; one that matches nothing is a clear error",
          "[processes]") {
  Outcome o = colltest::runOne({{kRun, "-n", "2", kInfo, "--check"}, {{"COLL_SOCKET_IFNAME", "=lo"}}}, 60);
  INFO(o.output);
  CHECK(o.exitCode() == 0);
  CHECK(countMatches(o.output, "\\n[01]\\s+\\S+\\s+\\d+\\s+127\\.0\\.0\\.1:\\d+") == 2);  // both inboxes on lo

  o = colltest::runOne({{kRun, "-n", "2", kInfo, "--check"}, {{"COLL_SOCKET_IFNAME", "nosuchif"}}}, 60);
  INFO(o.output);
  CHECK(o.exitCode() != 0);
  CHECK_THAT(o.output, Catch::Contains("COLL_SOCKET_IFNAME='nosuchif' matches no up interface"));
}

TEST_CASE("COLL_DEBUG_FILE writes one log per process with %h and %p expanded", "[processes]") {
  char dir[] = "/tmp/coll-logs-XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string pattern = std::string(dir) + "/coll.%h.%p.log";
  Outcome o = colltest::runOne(
      {{kRun, "-n", "3", kInfo, "--check"}, {{"COLL_DEBUG", "INFO"}, {"COLL_DEBUG_FILE", pattern}}}, 60);
  CHECK(o.exitCode() == 0);
  CHECK(o.output.find("coll INFO") == std::string::npos);  // nothing on stderr
  Outcome ls = colltest::runOne({{"sh", "-c", std::string("cat ") + dir + "/coll.*.log; ls " + dir + " | wc -l"}}, 10);
  CHECK(countMatches(ls.output, "coll INFO INIT comm \\S+ rank \\d/3") == 3);
  CHECK_THAT(ls.output, Catch::EndsWith("3\n"));
  colltest::runOne({{"rm", "-rf", dir}}, 10);
}

TEST_CASE("coll-info lists every parameter with its value and source, and flags unknown COLL_ names", "[processes]") {
  Outcome o = colltest::runOne({{kInfo, "--params"}, {{"COLL_BOOTSTRAP_TIMEOUT_MS", "1234"}, {"COLL_DEBGU", "x"}}}, 10);
  CHECK(o.exitCode() == 0);
  for (const auto* p : coll::param::all()) CHECK_THAT(o.output, Catch::Contains(p->name()));
  CHECK(countMatches(o.output, "COLL_BOOTSTRAP_TIMEOUT_MS\\s+= 1234\\s+\\[env\\]") == 1);
  CHECK(countMatches(o.output, "COLL_DEBUG_SUBSYS\\s+= ALL\\s+\\[default\\]") == 1);
  CHECK_THAT(o.output, Catch::Contains("COLL_DEBGU") && Catch::Contains("is not a coll parameter"));
  Outcome full = colltest::runOne({{kInfo}}, 30);
  CHECK(full.exitCode() == 0);
  CHECK_THAT(full.output, Catch::Contains("Interfaces:") && Catch::Contains("Machine:"));
  CHECK(colltest::runOne({{kInfo, "--bogus"}}, 10).exitCode() == 2);
}

TEST_CASE("processes: a master port another process holds is an error naming the address given, not 0.0.0.0",
          "[processes][failure]") {
  // A listener of this test holds the port rank 0 is told to host the root on.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(listen(fd, 4) == 0);
  socklen_t len = sizeof(a);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  std::string port = std::to_string(ntohs(a.sin_port));
  auto cmds = directRanks(2, {0}, "init-expect-fail", {});
  for (auto& e : cmds[0].env)
    if (e.first == "COLL_MASTER_PORT") e.second = port;
  Outcome o = colltest::runOne(cmds[0], 30);
  close(fd);
  INFO(o.output);
  CHECK(o.exitCode() == 3);
  CHECK_THAT(o.output, Catch::Contains("port " + port + " of 127.0.0.1 is taken"));
  CHECK_THAT(o.output, !Catch::Contains("0.0.0.0"));
}
