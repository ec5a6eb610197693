// coll's networks other than its own sockets, with ranks as processes and shm off
// (COLL_SHM_DISABLE=1), so that every byte crosses the network under test:
//   - NCCL net plugins: the test plugins (tests/netplugin), one library per ABI version v6..v12,
//     each exporting only its own ncclNetPlugin_vN, loaded by path and by name; what the loader
//     must do as NCCL does is read back from the plugin's trace (config, context, finalize,
//     registrations, irecvConsumed); a plugin that cannot be loaded or a network that does not
//     exist is an error at init naming it;
//   - the UCX provider over UCX_TLS=tcp at 2, 3 and 4 ranks;
//   - for each: every collective x type x op checked (the worker's matrix), a SIGKILLed rank
//     named by the survivors within COLL_TIMEOUT_MS, and a stranger without the secret refused
//     (provider level, in this process).
#include <dirent.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "multiproc/spawn.h"
#include "transport/net/net.h"

using colltest::Command;
using colltest::Outcome;
namespace tn = coll::transport::net;

namespace {

const std::string kRun = COLL_RUN_PATH;
const std::string kWorker = COLL_WORKER_PATH;
const std::string kInfo = COLL_INFO_PATH;
const std::string kPerf = COLL_PERF_PATH;
const std::string kPlugins = COLL_NETPLUGIN_DIR;
using Env = std::vector<std::pair<std::string, std::string>>;

std::string pluginPath(int version) { return kPlugins + "/libnccl-net-colltest-v" + std::to_string(version) + ".so"; }

int count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tempPath(const std::string& stem) {
  char name[128];
  std::snprintf(name, sizeof name, "/tmp/coll-net-%s-%d-XXXXXX", stem.c_str(), static_cast<int>(getpid()));
  int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  return name;
}

Env withNet(Env extra) {
  Env env{{"COLL_SHM_DISABLE", "1"}, {"COLL_DEBUG", "INFO"}, {"COLL_DEBUG_SUBSYS", "NET"}};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// The worker's collective matrix on n ranks under coll-run; every rank ok, every connection over
// `transport` (the NET log names it per connection).
std::string expectAllOk(int n, const std::string& transport, Env env, const std::string& mode = "collectives") {
  std::vector<std::string> argv{kRun, "-n", std::to_string(n), kWorker, mode};
  Outcome o = colltest::runOne({argv, withNet(env)}, 600);
  INFO(o.output.substr(o.output.size() > 6000 ? o.output.size() - 6000 : 0));
  CHECK(o.exitCode() == 0);
  CHECK(count(o.output, "worker rank \\d+/" + std::to_string(n) + " ok") == n);
  CHECK(count(o.output, "via " + transport + " ") >= n * (n - 1));
  if (transport != "tcp") CHECK(count(o.output, " via (tcp|shm) ") == 0);
  return o.output;
}

// Ranks started directly (not coll-run, which ends the survivors as soon as one rank dies), every
// pair over the network under test.
std::vector<Command> directJob(int n, std::vector<std::string> args, Env extra) {
  extra.insert(extra.begin(), {"COLL_SHM_DISABLE", "1"});
  return colltest::directJob(kWorker, n, args, extra);
}

// A rank SIGKILLed inside an all-reduce: the others fail with its name within the timeout.
void expectKilledRankNamed(Env env) {
  env.push_back({"COLL_TIMEOUT_MS", "4000"});
  auto outs = colltest::runAll(directJob(4, {"die-in", "2"}, env), 120);
  CHECK(outs[2].exitCode() == 128 + SIGKILL);
  for (int r : {0, 1, 3}) {
    INFO("rank " << r << ": " << outs[r].output);
    CHECK(outs[r].exitCode() == 3);
    CHECK_THAT(outs[r].output, Catch::Contains("rank 2"));
    CHECK(outs[r].seconds < 4.0 + 6.0);
  }
}

}  // namespace

TEST_CASE("net plugins v6..v12: loaded by path, every collective checked at 2 ranks; NCCL's calling rules kept",
          "[network][plugin]") {
  for (int v : {6, 7, 8, 9, 10, 11, 12}) {
    DYNAMIC_SECTION("ncclNetPlugin_v" << v) {
      std::string trace = tempPath("trace");
      expectAllOk(2, "ncclnet", {{"COLL_NET_PLUGIN", pluginPath(v)}, {"COLLTEST_NET_TRACE", trace}});
      std::string t = slurp(trace);
      INFO(t.substr(0, 4000));
      std::remove(trace.c_str());
      if (v >= 11) {
        // One context per communicator plus the loader's probe, each finalized; commId never 0
        // for a communicator's.
        CHECK(count(t, "init v" + std::to_string(v) + " commId=0x[0-9a-f]+ trafficClass=-1") >= 4);
        CHECK(count(t, "init v\\d+ commId=0x[0-9a-f]*[1-9a-f][0-9a-f]* ") >= 2);
        CHECK(count(t, " finalize ") == count(t, " init v"));
      } else {
        CHECK(count(t, " init v" + std::to_string(v)) == 2);  // once per process
      }
      if (v >= 10) CHECK(count(t, "connect config trafficClass=-1") >= 2);  // never a null config
      // The FIFO's slots registered once per connection, host memory; every comm closed.
      CHECK(count(t, "regMr type=1 bytes=\\d+ comm=send") >= 2);
      CHECK(count(t, "regMr type=1 bytes=\\d+ comm=recv") >= 2);
      CHECK(count(t, "closeSend messages=[1-9]") >= 2);
      // irecvConsumed exists from v7 on.
      if (v >= 7)
        CHECK(count(t, "closeRecv messages=[1-9]\\d* bytes=\\d+ consumed=[1-9]") >= 2);
      else
        CHECK(count(t, "closeRecv messages=[1-9]\\d* bytes=\\d+ consumed=0") >= 2);
      CHECK(count(t, "mrs=[1-9]") == 0);
      // The plugin's 4-request limit was met and coll posted again later.
      CHECK(count(t, "busy=[1-9]") >= 1);
    }
  }
}

TEST_CASE("net plugin v12 by name (libnccl-net-X.so on the loader's path): 3 and 4 ranks, large counts",
          "[network][plugin]") {
  for (int n : {3, 4}) {
    DYNAMIC_SECTION(n << " ranks") {
      expectAllOk(n, "ncclnet", {{"COLL_NET_PLUGIN", "colltest-v12"}, {"LD_LIBRARY_PATH", kPlugins}},
                  n == 3 ? "collectives" : "redops");
    }
  }
  SECTION("large counts (past one slot), COLL_NET naming the plugin") {
    expectAllOk(2, "ncclnet", {{"COLL_NET_PLUGIN", pluginPath(9)}, {"COLL_NET", "colltest"}}, "collectives");
  }
  SECTION("NCCL's names: NCCL_NET=IB takes a plugin that serves IB; NCCL_NET=Socket takes coll's sockets") {
    // The drop-in reads NCCL_NET as COLL_NET (COLL_NCCL_TWINS); the test plugin named as an IB one.
    expectAllOk(2, "ncclnet",
                {{"COLL_NET_PLUGIN", pluginPath(12)}, {"COLLTEST_NET_NAME", "IBext_v12"}, {"COLL_NET", "IB"}});
    expectAllOk(2, "tcp", {{"COLL_NET_PLUGIN", pluginPath(12)}, {"COLL_NCCL_TWINS", "1"}, {"NCCL_NET", "Socket"}});
  }
}

// The test plugin presented as the eight NICs of tests/topo/dgx-h100.xml (same PCI paths).
std::string dgxNics() {
  const char* b[8][3] = {{"15", "16", "17"}, {"15", "28", "29"}, {"37", "38", "39"}, {"37", "5b", "5c"},
                         {"97", "98", "99"}, {"97", "a8", "aa"}, {"b7", "b8", "b9"}, {"b7", "d8", "da"}};
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += fmt::format("{}mlx5_{}=/sys/devices/pci0000:{}/0000:{}:00.0/0000:{}:00.0/0000:{}:00.0", i ? "," : "", i,
                       b[i][0], b[i][0], b[i][1], b[i][2]);
  return out;
}

TEST_CASE("net plugin: a rank uses the NICs nearest it and spreads its connections over them; coll-info lists all",
          "[network][plugin]") {
  Env env{{"COLL_NET_PLUGIN", pluginPath(12)},
          {"COLLTEST_NET_DEVICES", dgxNics()},
          {"COLL_TOPO_FILE", std::string(COLL_TOPO_DIR) + "/dgx-h100.xml"}};
  // This machine's ranks sit on NUMA node 0: in that topology mlx5_0..3 are its (PHB), mlx5_4..7
  // are across the socket link.
  Outcome info = colltest::runOne({{kInfo}, env}, 60);
  INFO(info.output);
  CHECK(info.exitCode() == 0);
  for (int i = 0; i < 8; ++i)
    CHECK_THAT(info.output,
               Catch::Contains(fmt::format("{} dev {}: mlx5_{} (/sys/devices/pci0000:", i < 4 ? "*" : " ", i, i)));
  CHECK_THAT(info.output, Catch::Contains("nearest this process: mlx5_0,mlx5_1,mlx5_2,mlx5_3 (PHB from NUMA node 0)"));
  std::string trace = tempPath("trace");
  env.push_back({"COLLTEST_NET_TRACE", trace});
  expectAllOk(2, "ncclnet", env);
  std::string t = slurp(trace);
  std::remove(trace.c_str());
  INFO(t.substr(0, 3000));
  std::set<int> used;
  std::regex re("(listen|connect config trafficClass=-?\\d+) dev=(\\d+)");
  for (auto it = std::sregex_iterator(t.begin(), t.end(), re); it != std::sregex_iterator(); ++it)
    used.insert(std::stoi((*it)[2]));
  CHECK(!used.empty());
  CHECK(*used.rbegin() <= 3);  // never a NIC across the socket link
  CHECK(used.size() >= 2);     // connections spread over the near ones
}

TEST_CASE("net plugin: coll-info and coll-perf name the plugin, its version and its one de-duplicated device",
          "[network][plugin]") {
  Outcome info = colltest::runOne({{kInfo}, {{"COLL_NET_PLUGIN", pluginPath(11)}}}, 60);
  INFO(info.output);
  CHECK(info.exitCode() == 0);
  // The plugin lists two devices that are one NIC: coll keeps one.
  CHECK_THAT(info.output, Catch::Contains("Network:     ncclnet ['CollTest' v11 from " + pluginPath(11) +
                                          ", device colltest0 10 Gb/s]"));
  Outcome perf = colltest::runOne({{kRun, "-n", "2", kPerf, "-b", "8", "-e", "1M", "-f", "4", "-c", "1"},
                                   {{"COLL_NET_PLUGIN", pluginPath(12)}, {"COLL_SHM_DISABLE", "1"}}},
                                  120);
  INFO(perf.output);
  CHECK(perf.exitCode() == 0);
  CHECK_THAT(perf.output, Catch::Contains("# coll transports: 2 ranks on 1 host; ncclnet ['CollTest' v12"));
  CHECK_THAT(perf.output, Catch::Contains("# Out of bounds values : 0 OK"));
}

TEST_CASE("net plugin: an unusable plugin or network is an error at init that names it", "[network][plugin]") {
  auto expectInitError = [](Env env, const std::string& words) {
    Outcome o = colltest::runOne({{kRun, "-n", "2", kWorker, "collectives"}, env}, 60);
    INFO(o.output);
    CHECK(o.exitCode() != 0);
    CHECK_THAT(o.output, Catch::Contains(words));
  };
  SECTION("a name that no library answers: dlerror's reason, as NCCL_NET_PLUGIN would look it up") {
    expectInitError({{"COLL_NET_PLUGIN", "nosuch"}},
                    "COLL_NET_PLUGIN=nosuch: cannot load it (libnccl-net-nosuch.so: cannot open shared object file");
  }
  SECTION("a library that is not a net plugin: the versions tried") {
    expectInitError({{"COLL_NET_PLUGIN", COLL_LIB_PATH}},
                    "exports none of ncclNetPlugin_v12, v11, v10, v9, v8, v7, v6");
  }
  SECTION("a network that does not exist") {
    expectInitError({{"COLL_NET", "infiniband"}}, "COLL_NET=infiniband: no network of that name here (tcp");
  }
  SECTION("NCCL's 'IB' where no plugin serves IB and no RDMA port exists: both reasons") {
    expectInitError({{"COLL_NET", "IB"}},
                    "COLL_NET=IB (NCCL's InfiniBand network): no net plugin is loaded, and UCX "
                    "cannot serve it here (");
    expectInitError({{"COLL_NET", "IB"}, {"COLL_NET_PLUGIN", pluginPath(12)}},
                    "the loaded net plugin 'CollTest' is not an IB plugin");
  }
  SECTION("unset: no libnccl-net.so on the path, and coll quietly uses its sockets") {
    expectAllOk(2, "tcp", {}, "collectives");
  }
}

TEST_CASE("net plugin: a rank SIGKILLed mid all-reduce is named by the survivors within the timeout",
          "[network][plugin][failure]") {
  expectKilledRankNamed({{"COLL_NET_PLUGIN", pluginPath(12)}});
}

// One network proxy per process makes every provider call (transport/proxy.h). On this machine's
// two cores the default hands the data path to the waiting ranks; both ways are run here, each
// over every provider, and the test plugin aborts if two threads are ever inside it at once.
TEST_CASE("network proxy: the collective matrix with the proxy thread moving the data, and with the waiters",
          "[network][proxy]") {
  for (const char* mode : {"thread", "waiters"}) {
    DYNAMIC_SECTION("COLL_NET_PROXY=" << mode) {
      std::vector<std::pair<std::string, Env>> nets = {
        {"tcp", {{"COLL_NET", "tcp"}}},
        {"ncclnet", {{"COLL_NET_PLUGIN", pluginPath(12)}}},
#if COLL_HAVE_UCX
        {"ucx", {{"COLL_NET", "ucx"}, {"UCX_TLS", "tcp"}}},
#endif
      };
      for (auto& [transport, env] : nets) {
        INFO(transport);
        env.push_back({"COLL_NET_PROXY", mode});
        std::string out = expectAllOk(2, transport, env);
        CHECK(count(out, std::string("network proxy: thread started; the data path's rounds run on ") +
                             (mode == std::string("thread") ? "it" : "the waiting threads")) == 2);
        CHECK(count(out, "the waiting threads run the rounds from now on") == 0);
      }
    }
  }
  SECTION("auto, 2 ranks on this machine's cores: the waiters, said once per rank") {
    std::string out = expectAllOk(2, "tcp", {{"COLL_NET", "tcp"}});
    if (std::thread::hardware_concurrency() < 4)
      CHECK(count(out, "the waiting threads run the rounds from now on") == 2);
  }
  SECTION("a rank SIGKILLed mid all-reduce, the proxy thread moving the data: named within the timeout") {
    expectKilledRankNamed({{"COLL_NET_PROXY", "thread"}});
  }
  SECTION("another value fails init with a sentence") {
    Outcome o =
        colltest::runOne({{kRun, "-n", "2", kWorker, "collectives"}, withNet({{"COLL_NET_PROXY", "inline"}})}, 60);
    INFO(o.output);
    CHECK(o.exitCode() != 0);
    // coll-run ends the other rank once one has failed: at least one says it.
    CHECK(count(o.output, "COLL_NET_PROXY=inline: expected auto \\(the default\\), thread or waiters") >= 1);
  }
}

// Sending large pieces straight from the caller's buffer (fifo.h, kRefsPlain) where the provider
// allows it (net.h, sendsUnregistered: UCX), and nowhere else: with COLL_SHM_DIRECT_MIN=1, which
// sends every piece whose memory stays unchanged that way, and small slots, every collective is
// checked and the connections' INFO lines at close count the pieces that went from the caller's
// buffers (none over the sockets and the plugin).
TEST_CASE("networks: pieces sent from the caller's buffer where the provider allows it, every collective checked",
          "[network][ref]") {
  Env refs{{"COLL_SHM_DIRECT_MIN", "1"}, {"COLL_BUFFSIZE", "16384"}, {"COLL_NSLOTS", "4"}};
  std::vector<std::tuple<std::string, Env, bool>> nets = {
    {"tcp", {{"COLL_NET", "tcp"}}, false},
    {"ncclnet", {{"COLL_NET_PLUGIN", pluginPath(12)}}, false},
#if COLL_HAVE_UCX
    {"ucx", {{"COLL_NET", "ucx"}, {"UCX_TLS", "tcp"}}, true},
#endif
  };
  for (auto& [transport, net, byRef] : nets) {
    for (int n : {2, 3}) {
      if (!byRef && n == 3) continue;
      DYNAMIC_SECTION(transport << ", " << n << " ranks") {
        Env env = net;
        env.insert(env.end(), refs.begin(), refs.end());
        std::string out = expectAllOk(n, transport, env);
        int lines = count(out, "connection to rank \\d+: [1-9]\\d* of \\d+ pieces sent from the caller's buffers");
        if (byRef)
          CHECK(lines >= n * (n - 1));
        else
          CHECK(lines == 0);
      }
    }
    if (!byRef) continue;
    DYNAMIC_SECTION(transport << ", 2 ranks, the default threshold and slots, 1 MiB + 1 and 16 MiB") {
      Outcome o = colltest::runOne({{kRun, "-n", "2", kWorker, "collectives", "big"}, withNet(net)}, 600);
      INFO(o.output.substr(o.output.size() > 6000 ? o.output.size() - 6000 : 0));
      CHECK(o.exitCode() == 0);
      CHECK(count(o.output, "worker rank \\d+/2 ok") == 2);
      CHECK(count(o.output, "connection to rank \\d+: [1-9]\\d* of \\d+ pieces sent from the caller's buffers") >= 2);
    }
  }
}

namespace {

// Mismatched calls over the network under test (coll_test_worker inband-mismatch, mismatchcheck.h):
// the in-band fingerprint rides in the slots the provider moves, so every rank names the odd one
// within a second, then aborts cleanly. (collective, mismatch, odd rank) at 3 ranks.
void expectMismatchesNamed(const Env& net) {
  struct Case {
    int collective, mismatch, odd;
    const char* what;
  };
  const Case cases[] = {{0, 0, 2, "all-reduce, op"},
                        {1, 1, 0, "reduce-scatter, type"},
                        {2, 5, 1, "all-gather, skipped"},
                        {5, 2, 2, "all-to-all, count"},
                        {4, 4, 1, "reduce, another collective"}};
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.what) {
      auto outs = colltest::runAll(
          directJob(
              3, {"inband-mismatch", std::to_string(c.collective), std::to_string(c.mismatch), std::to_string(c.odd)},
              net),
          120);
      for (int r = 0; r < 3; ++r) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK(count(outs[r].output, "worker rank \\d+/\\d+ ok") == 1);
      }
    }
  }
}

}  // namespace

TEST_CASE("net plugin: mismatched calls are named on every rank by the in-band check", "[network][plugin][mismatch]") {
  expectMismatchesNamed({{"COLL_NET_PLUGIN", pluginPath(12)}});
}

#if COLL_HAVE_UCX
TEST_CASE("ucx: mismatched calls are named on every rank by the in-band check", "[network][ucx][mismatch]") {
  expectMismatchesNamed({{"COLL_NET", "ucx"}, {"UCX_TLS", "tcp"}});
}

// The same mismatches named with every piece sent from the caller's buffer (a first piece's print
// as the message's trailer, UcxProvider::isendTrailer). The failed call returns with pieces still
// waiting for credits, and the worker frees its buffers at once: TSan found them sent from freed
// memory before failed operations took their references back (Connection::withdrawRefs).
TEST_CASE("ucx: mismatched calls named with every piece sent by reference", "[network][ucx][mismatch][ref]") {
  expectMismatchesNamed({{"COLL_NET", "ucx"},
                         {"UCX_TLS", "tcp"},
                         {"COLL_SHM_DIRECT_MIN", "1"},
                         {"COLL_BUFFSIZE", "16384"},
                         {"COLL_NSLOTS", "4"}});
}

TEST_CASE("ucx (UCX_TLS=tcp): every collective, type, op and placement at 2, 3 and 4 ranks", "[network][ucx]") {
  for (int n : {2, 3, 4}) {
    DYNAMIC_SECTION(n << " ranks") { expectAllOk(n, "ucx", {{"COLL_NET", "ucx"}, {"UCX_TLS", "tcp"}}); }
  }
  SECTION("large counts and the reduction operators") {
    expectAllOk(2, "ucx", {{"COLL_NET", "ucx"}, {"UCX_TLS", "tcp"}}, "redops");
  }
}

TEST_CASE("ucx: a rank SIGKILLed mid all-reduce is named by the survivors within the timeout",
          "[network][ucx][failure]") {
  expectKilledRankNamed({{"COLL_NET", "ucx"}, {"UCX_TLS", "tcp"}});
}

// A stopped receiver leaves the survivors' pieces, sent from their own buffers, in UCX's hands
// (or waiting for credits) when their calls time out; each survivor frees its buffers the moment
// its call fails (COLLTEST_FREE_ON_FAILURE), so a send still reading them would be a
// use-after-free (TSan runs this suite) or a fault. The failed call takes them back first. The
// survivors' collCommAbort then waits for no close to the stopped rank (UcxProvider::abandon):
// before, a receive it had matched held each of two drains for COLL_HANDSHAKE_TIMEOUT_MS (6 s).
TEST_CASE("ucx: a rank stopped mid all-reduce with every piece sent by reference; survivors free their buffers at once",
          "[network][ucx][failure][ref]") {
  auto outs = colltest::runAll(directJob(3, {"stop-in", "1", "12"},
                                         {{"COLL_NET", "ucx"},
                                          {"UCX_TLS", "tcp"},
                                          {"COLL_SHM_DIRECT_MIN", "1"},
                                          {"COLL_TIMEOUT_MS", "2000"},
                                          {"COLLTEST_FREE_ON_FAILURE", "1"},
                                          // Small socket buffers: sends stay in UCX's hands.
                                          {"UCX_TCP_SNDBUF", "64k"},
                                          {"UCX_TCP_RCVBUF", "64k"}}),
                               120);
  CHECK(outs[1].exitCode() == 128 + SIGKILL);
  for (int r : {0, 2}) {
    INFO("rank " << r << ": " << outs[r].output);
    CHECK(outs[r].exitCode() == 3);
    CHECK_THAT(outs[r].output, Catch::Contains("rank 1"));
    CHECK(outs[r].seconds < 2.0 + 10.0);
    CHECK(count(outs[r].output, "abort returned in 0\\.\\d+ s") == 1);
  }
}
#endif

// ---- Provider level, in this process: strangers without the secret are refused ----------------

namespace {

constexpr uint64_t kSecret = 0x5ec7e75ec7e7ull;

tn::Config config(int rank, uint64_t secret) {
  tn::Config c;
  c.rank = rank;
  c.secret = secret;
  auto a = coll::net::Address::resolve("127.0.0.1", 0, AF_INET);
  REQUIRE(a.isOk());
  c.bindAddress = *a;
  c.timeoutMs = 5000;
  c.handshakeMs = 500;
  return c;
}

void until(const std::function<bool()>& step, int seconds = 10) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!step()) REQUIRE(std::chrono::steady_clock::now() < end);
}

// A stranger (another secret) connects to a receiver's handle: it is never accepted; then the
// right sender is, and a message goes through. An NCCL plugin's listen comm accepts one
// connection (NCCL's own plugins do the same), so there the stranger used it up: the right
// sender's connection then fails with an error, never a hang or a comm for the stranger.
// garbage(handle), when given, throws raw bytes at the receiver's listener first.
void strangerRefused(tn::Provider& receiver, tn::Provider& stranger, tn::Provider& sender,
                     bool listenerOutlivesStranger, const std::function<void(const tn::Handle&)>& garbage = {}) {
  tn::Handle handle{};
  tn::ListenComm* listen = nullptr;
  REQUIRE(receiver.listen(0, &handle, &listen).isOk());
  if (garbage) garbage(handle);
  tn::SendComm* bad = nullptr;
  tn::RecvComm* recv = nullptr;
  // What the network proxy does in each round: move every provider's machinery (UCX's wire-up
  // and the hellos go only while both sides' workers are progressed).
  auto pollAll = [&] {
    for (tn::Provider* p : {&receiver, &stranger, &sender}) REQUIRE(p->poll().isOk());
  };
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < end) {  // past the 500 ms handshake window
    pollAll();
    if (!bad) REQUIRE(stranger.connect(0, handle, &bad).isOk());
    coll::Status s = receiver.accept(listen, &recv);
    REQUIRE(recv == nullptr);
    if (!listenerOutlivesStranger && !s.isOk()) {
      INFO(s.message());
      CHECK_THAT(s.message(), Catch::Contains("net plugin 'CollTest' v12: accept failed with"));
      REQUIRE(receiver.closeListen(listen).isOk());
      if (bad) REQUIRE(stranger.closeSend(bad).isOk());
      return;
    }
    REQUIRE(s.isOk());
  }
  REQUIRE(listenerOutlivesStranger);
  tn::SendComm* send = nullptr;
  until([&] {
    pollAll();
    if (!send) REQUIRE(sender.connect(0, handle, &send).isOk());
    if (!recv) REQUIRE(receiver.accept(listen, &recv).isOk());
    return send && recv;
  });
  char out[64] = "through the right door", in[64] = {};
  tn::MrHandle *smr = nullptr, *rmr = nullptr;
  REQUIRE(sender.regMr(send, out, sizeof out, &smr).isOk());
  REQUIRE(receiver.regMr(recv, in, sizeof in, &rmr).isOk());
  tn::Request *rr = nullptr, *sr = nullptr;
  until([&] {
    pollAll();
    if (!rr) REQUIRE(receiver.irecv(recv, in, sizeof in, 1, rmr, &rr).isOk());
    if (!sr) REQUIRE(sender.isend(send, out, 23, 1, smr, &sr).isOk());
    int done = 0;
    size_t size = 0;
    if (rr) REQUIRE(receiver.test(rr, &done, &size).isOk());
    if (done) {
      CHECK(size == 23);
      rr = reinterpret_cast<tn::Request*>(1);  // done: not tested again
    }
    if (sr && sr != reinterpret_cast<tn::Request*>(1)) {
      int sdone = 0;
      REQUIRE(sender.test(sr, &sdone, nullptr).isOk());
      if (sdone) sr = reinterpret_cast<tn::Request*>(1);
    }
    return done || (rr == reinterpret_cast<tn::Request*>(1) && sr == reinterpret_cast<tn::Request*>(1));
  });
  CHECK(std::string(in) == "through the right door");
  REQUIRE(sender.deregMr(send, smr).isOk());
  REQUIRE(receiver.deregMr(recv, rmr).isOk());
  REQUIRE(sender.closeSend(send).isOk());
  REQUIRE(receiver.closeRecv(recv).isOk());
  REQUIRE(receiver.closeListen(listen).isOk());
  if (bad) REQUIRE(stranger.closeSend(bad).isOk());
}

}  // namespace

#if COLL_HAVE_UCX
// Every TCP socket this process listens on, as addresses to connect to (a wildcard bind is reached
// over loopback).
std::vector<sockaddr_storage> ownListeners() {
  std::vector<sockaddr_storage> out;
  DIR* d = opendir("/proc/self/fd");
  REQUIRE(d != nullptr);
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    int accepting = 0, type = 0;
    socklen_t len = sizeof(accepting), tlen = sizeof(type);
    if (e->d_name[0] == '.' || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
      continue;
    sockaddr_storage a{};
    socklen_t alen = sizeof(a);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen) != 0) continue;
    if (a.ss_family == AF_INET && reinterpret_cast<sockaddr_in*>(&a)->sin_addr.s_addr == htonl(INADDR_ANY))
      reinterpret_cast<sockaddr_in*>(&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (a.ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr))
      reinterpret_cast<sockaddr_in6*>(&a)->sin6_addr = in6addr_loopback;
    if (a.ss_family == AF_INET || a.ss_family == AF_INET6) out.push_back(a);
  }
  closedir(d);
  return out;
}

TEST_CASE("ucx provider: a connection without the communicator's secret is refused", "[network][ucx]") {
  setenv("UCX_TLS", "tcp", 1);
  auto receiver = tn::openUcxProvider(config(0, kSecret));
  auto stranger = tn::openUcxProvider(config(5, kSecret + 1));
  auto sender = tn::openUcxProvider(config(1, kSecret));
  // The provider opens no UCX listener: the sockets listening here are UCX's tcp transport's own
  // (one per interface and worker). Raw bytes at every one of them: the 16 and 64 bytes that
  // crashed UCX's connection-request parser when coll opened a ucp_listener, 4 KiB of garbage,
  // and a silent connection; none may crash the receiver or keep the right sender out.
  std::vector<int> raw;
  auto garbage = [&](const tn::Handle&) {
    std::vector<sockaddr_storage> ports = ownListeners();
    INFO("listening sockets in this process: " << ports.size());
    REQUIRE(!ports.empty());
    std::string ffzero(8, '\xff');
    ffzero += std::string(8, '\0');
    for (sockaddr_storage addr : ports)
      for (const std::string& payload : {ffzero, std::string(64, '\0'), std::string(4096, 'x'), std::string()}) {
        int fd = socket(addr.ss_family, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr),
                          addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in)) == 0);
        if (!payload.empty()) REQUIRE(::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL) > 0);
        raw.push_back(fd);
      }
  };
  strangerRefused(*receiver, *stranger, *sender, true, garbage);
  for (int fd : raw) close(fd);
}

// The UCX provider's flow control, driven as the network transport drives it (8 slots each way,
// every receive tested each round) by a receiver that stalls now and then: small messages (at
// most 8 KiB) may run up to 64 past the receives posted, large ones never, and a large message
// held back after a run of small ones is not stuck (the sender asks for credits). Every message
// arrives whole and in order.
TEST_CASE("ucx provider: small messages run ahead of the receives within a bound, large ones never; all in order",
          "[network][ucx]") {
  setenv("UCX_TLS", "tcp", 1);
  auto receiver = tn::openUcxProvider(config(0, kSecret));
  auto sender = tn::openUcxProvider(config(1, kSecret));
  tn::Handle handle{};
  tn::ListenComm* listen = nullptr;
  REQUIRE(receiver->listen(0, &handle, &listen).isOk());
  tn::SendComm* send = nullptr;
  tn::RecvComm* recv = nullptr;
  auto pollAll = [&] {
    REQUIRE(receiver->poll().isOk());
    REQUIRE(sender->poll().isOk());
  };
  until([&] {
    pollAll();
    if (!send) REQUIRE(sender->connect(0, handle, &send).isOk());
    if (!recv) REQUIRE(receiver->accept(listen, &recv).isOk());
    return send && recv;
  });
  constexpr size_t kSlot = 64 << 10, kSmall = 8 << 10;
  constexpr int kSlots = 8, kMessages = 4000, kAhead = 64;
  std::vector<unsigned char> out(kSlots * kSlot), in(kSlots * kSlot);
  tn::MrHandle *smr = nullptr, *rmr = nullptr;
  REQUIRE(sender->regMr(send, out.data(), out.size(), &smr).isOk());
  REQUIRE(receiver->regMr(recv, in.data(), in.size(), &rmr).isOk());
  std::mt19937 rng(48);
  std::vector<size_t> sizes(kMessages);
  for (int i = 0; i < kMessages;) {  // runs of small messages (small collectives) and of large ones
    bool small = rng() % 2;
    for (int run = 1 + static_cast<int>(rng() % 100); run > 0 && i < kMessages; --run, ++i)
      sizes[i] = small ? 1 + rng() % kSmall : kSmall + 1 + rng() % (kSlot - kSmall);
  }
  auto byte = [](int message, size_t k) { return static_cast<unsigned char>(message * 131 + k * 7 + 1); };
  tn::Request* sendReq[kSlots] = {};
  tn::Request* recvReq[kSlots] = {};
  size_t recvSize[kSlots] = {};
  int sent = 0, posted = 0, received = 0, ahead = 0, heldLarge = 0, stall = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (received < kMessages) {
    INFO("sent " << sent << ", receives posted " << posted << ", received " << received);
    REQUIRE(std::chrono::steady_clock::now() < end);
    pollAll();
    for (tn::Request*& r : sendReq) {
      int done = 0;
      if (r) REQUIRE(sender->test(r, &done, nullptr).isOk());
      if (done) r = nullptr;
    }
    while (sent < kMessages && !sendReq[sent % kSlots]) {
      unsigned char* p = out.data() + (sent % kSlots) * kSlot;
      for (size_t k = 0; k < sizes[sent]; ++k) p[k] = byte(sent, k);
      tn::Request* r = nullptr;
      REQUIRE(sender->isend(send, p, sizes[sent], 1, smr, &r).isOk());
      if (!r) {
        heldLarge += sizes[sent] > kSmall && sent >= posted;
        break;
      }
      // The provider knows of at most `posted` receives.
      if (sizes[sent] > kSmall)
        REQUIRE(sent < posted);
      else
        REQUIRE(sent < posted + kAhead);
      ahead += sent >= posted;
      sendReq[sent % kSlots] = r;
      ++sent;
    }
    if (stall > 0) {  // a consumer busy elsewhere: no receive posted or tested
      --stall;
      continue;
    }
    if (rng() % 64 == 0) stall = static_cast<int>(rng() % 200);
    for (; posted < kMessages && posted < received + kSlots; ++posted) {
      tn::Request*& r = recvReq[posted % kSlots];
      REQUIRE(receiver->irecv(recv, in.data() + (posted % kSlots) * kSlot, kSlot, 1, rmr, &r).isOk());
      REQUIRE(r != nullptr);
    }
    for (int m = received; m < posted; ++m) {
      tn::Request*& r = recvReq[m % kSlots];
      int done = 0;
      if (r) REQUIRE(receiver->test(r, &done, &recvSize[m % kSlots]).isOk());
      if (done) r = nullptr;
    }
    for (; received < posted && !recvReq[received % kSlots]; ++received) {
      const unsigned char* p = in.data() + (received % kSlots) * kSlot;
      REQUIRE(recvSize[received % kSlots] == sizes[received]);
      size_t wrong = 0;
      for (size_t k = 0; k < sizes[received]; ++k) wrong += p[k] != byte(received, k);
      REQUIRE(wrong == 0);
    }
  }
  // Not vacuous: small messages did run ahead of the receives, and large ones were held back.
  CHECK(ahead > 0);
  CHECK(heldLarge > 0);
  for (tn::Request* r : sendReq)
    if (r)
      until([&] {
        pollAll();
        int done = 0;
        REQUIRE(sender->test(r, &done, nullptr).isOk());
        return done != 0;
      });
  REQUIRE(sender->deregMr(send, smr).isOk());
  REQUIRE(receiver->deregMr(recv, rmr).isOk());
  REQUIRE(sender->closeSend(send).isOk());
  REQUIRE(receiver->closeRecv(recv).isOk());
  REQUIRE(receiver->closeListen(listen).isOk());
}
#endif

TEST_CASE("net plugin provider: a connection without the communicator's secret is refused", "[network][plugin]") {
  setenv("COLL_NET_PLUGIN", pluginPath(12).c_str(), 1);  // read once, by this process's first use
  auto receiver = tn::openPluginProvider(config(0, kSecret));
  auto stranger = tn::openPluginProvider(config(5, kSecret + 1));
  auto sender = tn::openPluginProvider(config(1, kSecret));
  strangerRefused(*receiver, *stranger, *sender, false);
}
