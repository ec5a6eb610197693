// Collectives with ranks as processes (coll-run), over shm and over TCP (COLL_SHM_DISABLE=1):
// the full matrix for 1..8 ranks, large counts, 10000 back-to-back small all-reduces, an
// all-to-all group of sends and receives, and a rank killed in the middle of an all-reduce.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "base/socket.h"
#include "bootstrap/bootstrap_wire.h"
#include "multiproc/spawn.h"

using colltest::Command;
using colltest::Outcome;

namespace {

const std::string kRun = COLL_RUN_PATH;
const std::string kWorker = COLL_WORKER_PATH;

int count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// Runs the worker on n ranks under coll-run; every rank must report ok. Returns the job's output.
std::string expectAllOk(int n, std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env,
                        double timeout) {
  std::vector<std::string> argv{kRun, "-n", std::to_string(n), kWorker};
  argv.insert(argv.end(), args.begin(), args.end());
  Outcome o = colltest::runOne({argv, env}, timeout);
  INFO(o.output);
  CHECK(o.exitCode() == 0);
  CHECK(count(o.output, "worker rank \\d+/" + std::to_string(n) + " ok") == n);
  return o.output;
}

// A multi-node coll-run refuses to start without a shared COLL_BOOTSTRAP_SECRET; each simulated
// job draws its own, as an operator would.
std::string jobSecret() {
  std::random_device rd;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%08x%08x", static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return hex;
}

}  // namespace

TEST_CASE("processes over shm: every collective, type, op and placement, 1..8 ranks", "[collectives][processes]") {
  for (int n : {1, 2, 3, 4, 5, 7, 8}) {
    DYNAMIC_SECTION("coll-run -n " << n) { expectAllOk(n, {"collectives"}, {}, 600); }
  }
}

TEST_CASE("processes over shm: 1 MiB + 1 and 64 MiB", "[collectives][processes]") {
  for (int n : {2, 3}) {
    DYNAMIC_SECTION("coll-run -n " << n) { expectAllOk(n, {"collectives", "big"}, {}, 600); }
  }
}

TEST_CASE("processes over shm, every piece read from the sender's buffer (process_vm_readv)",
          "[collectives][processes][ref]") {
  // COLL_SHM_DIRECT_MIN=1 sends every piece whose memory stays unchanged by reference; small
  // slots split steps into many pieces. The INFO log shows that each receiver accepted references.
  std::vector<std::pair<std::string, std::string>> env{{"COLL_SHM_DIRECT_MIN", "1"},
                                                       {"COLL_BUFFSIZE", "65536"},
                                                       {"COLL_NSLOTS", "4"},
                                                       {"COLL_DEBUG", "INFO"},
                                                       {"COLL_DEBUG_SUBSYS", "NET"}};
  for (int n : {2, 3, 5}) {
    DYNAMIC_SECTION("coll-run -n " << n) {
      std::vector<std::string> argv{kRun, "-n", std::to_string(n), kWorker, "collectives"};
      Outcome o = colltest::runOne({argv, env}, 600);
      INFO(o.output);
      CHECK(o.exitCode() == 0);
      CHECK(count(o.output, "worker rank \\d+/" + std::to_string(n) + " ok") == n);
      CHECK(count(o.output, "reads pieces by reference") > 0);
      CHECK(count(o.output, "cannot read rank") == 0);
    }
  }
  SECTION("large counts, default threshold") { expectAllOk(2, {"collectives", "big"}, {}, 600); }
}

TEST_CASE("processes: tree and halving-doubling algorithms forced with COLL_ALGO", "[collectives][processes][algo]") {
  for (const char* algo : {"allreduce:tree;broadcast:tree;reduce:tree", "rhd,chain,pairwise", "allreduce:rd"}) {
    DYNAMIC_SECTION(algo << ", shm") { expectAllOk(5, {"collectives"}, {{"COLL_ALGO", algo}}, 600); }
    DYNAMIC_SECTION(algo << ", tcp") {
      expectAllOk(3, {"collectives"}, {{"COLL_ALGO", algo}, {"COLL_SHM_DISABLE", "1"}}, 600);
    }
  }
  SECTION("large counts") { expectAllOk(3, {"collectives", "big"}, {{"COLL_ALGO", "rhd,tree,pairwise"}}, 600); }
}

TEST_CASE("4 simulated hosts x 2 ranks: hierarchical all-reduce and every collective across hosts",
          "[collectives][processes][algo][hier]") {
  // One coll-run per "host", each with its own COLL_HOSTID: shm inside a host, TCP across.
  for (const char* algo : {"allreduce:hier", ""}) {
    DYNAMIC_SECTION("COLL_ALGO=" << algo) {
      std::string master = "127.0.0.1:" + std::to_string(colltest::freePort());
      std::string secret = jobSecret();
      std::vector<Command> hosts;
      for (int h = 0; h < 4; ++h)
        hosts.push_back({{kRun, "-n", "2", "--nnodes", "4", "--node-rank", std::to_string(h), "--master", master,
                          kWorker, "collectives"},
                         {{"COLL_HOSTID", "simhost-" + std::to_string(h)},
                          {"COLL_ALGO", algo},
                          {"COLL_BOOTSTRAP_SECRET", secret}}});
      auto outs = colltest::runAll(hosts, 600);
      for (int h = 0; h < 4; ++h) {
        INFO("host " << h << ": " << outs[h].output);
        CHECK(outs[h].exitCode() == 0);
        CHECK(count(outs[h].output, "worker rank \\d/8 ok") == 2);
      }
    }
  }
}

TEST_CASE("ranks interleaved over 2 simulated hosts: rings run host by host; every collective checked",
          "[collectives][processes][algo][order]") {
  // Rank r on host r % 2 (one coll-run per rank), as a launcher placing ranks round-robin would.
  // COLL_RING_ORDER=topo (the default) runs rings over 0 2 4 1 3 5: two host crossings instead
  // of six; the hierarchical all-reduce then applies too. Both orders must give exact results.
  const int n = 6;
  for (const char* order : {"topo", "rank"})
    for (const char* algo : {"", "allreduce:ring;reducescatter:ring;allgather:ring", "allreduce:hier",
                             "rhd,tree,pairwise", "allreduce:rd;broadcast:chain;reduce:chain"}) {
      DYNAMIC_SECTION("COLL_RING_ORDER=" << order << " COLL_ALGO=" << algo) {
        std::string master = "127.0.0.1:" + std::to_string(colltest::freePort());
        std::string secret = jobSecret();
        std::vector<Command> ranks;
        for (int r = 0; r < n; ++r)
          ranks.push_back({{kRun, "-n", "1", "--nnodes", std::to_string(n), "--node-rank", std::to_string(r),
                            "--master", master, kWorker, "collectives"},
                           {{"COLL_HOSTID", "simhost-" + std::to_string(r % 2)},
                            {"COLL_ALGO", algo},
                            {"COLL_RING_ORDER", order},
                            {"COLL_DEBUG", "INFO"},
                            {"COLL_DEBUG_SUBSYS", "TOPO"},
                            {"COLL_BOOTSTRAP_SECRET", secret}}});
        auto outs = colltest::runAll(ranks, 600);
        for (int r = 0; r < n; ++r) {
          INFO("rank " << r << ": " << outs[r].output);
          CHECK(outs[r].exitCode() == 0);
          CHECK(count(outs[r].output, "worker rank \\d/6 ok") == 1);
        }
        INFO(outs[0].output);
        if (std::string(algo) == "allreduce:hier")
          CHECK(count(outs[0].output, std::string(order) == "topo" ? "hierarchical all-reduce: 2 hosts x 3 ranks"
                                                                   : "hierarchical all-reduce unavailable") == 1);
        if (std::string(order) == "topo")
          CHECK(count(outs[0].output,
                      "ring \\(topo\\): 0 2 4 1 3 5; it crosses between hosts 2 time\\(s\\), rank order would 6") == 1);
        else
          CHECK(count(outs[0].output, "ring \\(rank\\): 0 1 2 3 4 5; it crosses between hosts 6 time") == 1);
      }
    }
  SECTION("an unknown COLL_RING_ORDER fails init with the reason") {
    Outcome o = colltest::runOne({{kRun, "-n", "2", kWorker, "collectives"}, {{"COLL_RING_ORDER", "numa"}}}, 60);
    INFO(o.output);
    CHECK(o.exitCode() != 0);
    CHECK_THAT(o.output, Catch::Contains("COLL_RING_ORDER=numa: expected 'topo' or 'rank'"));
  }
}

TEST_CASE("processes: a malformed COLL_ALGO or COLL_PROTO fails init with the reason", "[processes][algo]") {
  for (auto env : std::vector<std::pair<std::string, std::string>>{{"COLL_ALGO", "rnig"}, {"COLL_PROTO", "LL,Fast"}}) {
    DYNAMIC_SECTION(env.first << "=" << env.second) {
      std::vector<std::string> argv{kRun, "-n", "2", kWorker, "collectives"};
      Outcome o = colltest::runOne({argv, {env}}, 60);
      INFO(o.output);
      CHECK(o.exitCode() != 0);
      CHECK_THAT(o.output, Catch::Contains(env.first + "=" + env.second));
    }
  }
}

TEST_CASE("processes over TCP: every collective, type, op and placement", "[collectives][processes][tcp]") {
  for (int n : {2, 3, 5}) {
    DYNAMIC_SECTION("coll-run -n " << n) { expectAllOk(n, {"collectives"}, {{"COLL_SHM_DISABLE", "1"}}, 600); }
  }
  SECTION("large counts, 2 sockets per connection") {
    expectAllOk(2, {"collectives", "big"}, {{"COLL_SHM_DISABLE", "1"}, {"COLL_NSOCKS", "2"}}, 600);
  }
}

TEST_CASE("processes: PreMulSum and bitwise ops, over shm and TCP (COLL_SHM_DISABLE=1), 1..4 ranks",
          "[collectives][processes][redop]") {
  // Counts 0, 1, 7, 1031 and 1M + 3 (past one FIFO slot); checks in tests/multiproc/redopcheck.h.
  for (const char* shmOff : {"0", "1"})
    for (int n : {1, 2, 3, 4}) {
      DYNAMIC_SECTION("COLL_SHM_DISABLE=" << shmOff << ", coll-run -n " << n) {
        expectAllOk(n, {"redops", "big"}, {{"COLL_SHM_DISABLE", shmOff}}, 600);
      }
    }
}

TEST_CASE("10000 back-to-back small all-reduces", "[collectives][processes]") {
  expectAllOk(4, {"many", "10000"}, {}, 300);
  expectAllOk(2, {"many", "10000"}, {{"COLL_SHM_DISABLE", "1"}}, 300);
}

TEST_CASE("a group in which every rank sends to and receives from every rank completes", "[collectives][processes]") {
  for (int n : {1, 2, 5, 8}) {
    DYNAMIC_SECTION("shm, " << n << " ranks") { expectAllOk(n, {"alltoallv"}, {}, 120); }
  }
  expectAllOk(4, {"alltoallv"}, {{"COLL_SHM_DISABLE", "1"}}, 120);
}

// Ranks as processes on the emulated device (COLL_DEVICE_EMULATION): device buffers between
// processes go device memory to device memory through (emulated) CUDA IPC by default, host-staged
// through shared memory with COLL_P2P_DISABLE=1, or through TCP moved by each rank's proxy thread
// with COLL_SHM_DISABLE=1 too. Each rank prints the device transports it used.
TEST_CASE("processes on the emulated device: device buffers over CUDA IPC, host-staged shm and proxied TCP",
          "[collectives][processes][device]") {
  using Env = std::vector<std::pair<std::string, std::string>>;
  struct Variant {
    const char* name;  // the transport
    Env env;
    std::vector<int> ranks;
    const char* label = "";
  };
  // Channels: every operation over 1 KiB split across 3 CTAs, each with connections of its own.
  const Env channels{
      {"COLL_DEVICE_EMULATION", "1"}, {"COLL_DEVICE_NCHANNELS", "3"}, {"COLL_DEVICE_CHANNEL_MIN_BYTES", "512"}};
  Env shmChannels = channels, tcpChannels = channels;
  shmChannels.push_back({"COLL_P2P_DISABLE", "1"});
  tcpChannels.insert(tcpChannels.end(), {{"COLL_P2P_DISABLE", "1"}, {"COLL_SHM_DISABLE", "1"}});
  const Variant variants[] = {
      {"p2p", {{"COLL_DEVICE_EMULATION", "1"}}, {1, 2, 3, 4}},
      {"shm", {{"COLL_DEVICE_EMULATION", "1"}, {"COLL_P2P_DISABLE", "1"}}, {2, 3}},
      {"tcp", {{"COLL_DEVICE_EMULATION", "1"}, {"COLL_P2P_DISABLE", "1"}, {"COLL_SHM_DISABLE", "1"}}, {2, 3}},
      {"p2p", channels, {3}, " on 3 channels"},
      {"shm", shmChannels, {2}, " on 3 channels"},
      {"tcp", tcpChannels, {2}, " on 3 channels"},
  };
  for (const Variant& v : variants)
    for (int n : v.ranks) {
      DYNAMIC_SECTION(v.name << v.label << ", coll-run -n " << n) {
        std::string out = expectAllOk(n, {"device-collectives"}, v.env, 600);
        INFO(out);
        if (n > 1) CHECK(count(out, std::string("device buffers: ") + v.name + " to " + std::to_string(n - 1)) == n);
      }
    }
}

TEST_CASE("emulated device: a rank killed while the others' launches wait for it; they report it by name",
          "[collectives][processes][device][failure]") {
  // p2p (CUDA IPC: the survivors map the dead rank's FIFOs), shm, tcp; then p2p and shm while
  // the survivors replay a CUDA graph (no graphs over TCP). At 3 ranks every survivor is the
  // victim's neighbour on the ring and watches its pid; at 4, rank 3 waits only for ranks 2 and 0,
  // which stay alive 5 s after they failed (COLL_TEST_LINGER_MS): it can hear of the death in
  // time only through their abort notices.
  struct Case {
    const char* mode;
    const char* worker;
    int ranks;
  };
  const Case cases[] = {
      {"p2p", "device-die-in", 3},       {"shm", "device-die-in", 3},       {"tcp", "device-die-in", 3},
      {"p2p", "device-graph-die-in", 3}, {"shm", "device-graph-die-in", 3}, {"p2p", "device-die-in", 4},
      {"p2p", "device-graph-die-in", 4},
  };
  for (const auto& [mode, worker, ranks] : cases) {
    DYNAMIC_SECTION("transport " << mode << ", " << worker << ", " << ranks << " ranks") {
      const char* p2pDisable = std::string(mode) == "p2p" ? "0" : "1";
      const char* shmDisable = std::string(mode) == "tcp" ? "1" : "0";
      int port = colltest::freePort();
      std::vector<Command> cmds;
      for (int r = 0; r < ranks; ++r)
        cmds.push_back({{kWorker, worker, "1", "262144"},  // floats: a ring all-reduce
                        {{"COLL_RANK", std::to_string(r)},
                         {"COLL_WORLD_SIZE", std::to_string(ranks)},
                         {"COLL_MASTER_ADDR", "127.0.0.1"},
                         {"COLL_MASTER_PORT", std::to_string(port)},
                         {"COLL_BOOTSTRAP_SECRET", "abc"},
                         {"COLL_TIMEOUT_MS", "20000"},
                         {"COLL_DEVICE_EMULATION", "1"},
                         {"COLL_P2P_DISABLE", p2pDisable},
                         {"COLL_SHM_DISABLE", shmDisable},
                         {"COLL_TEST_LINGER_MS", ranks == 4 ? "5000" : "0"}}});
      auto outs = colltest::runAll(cmds, 120);
      CHECK(outs[1].exitCode() == 128 + SIGKILL);
      for (int r = 0; r < ranks; ++r) {
        if (r == 1) continue;
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 3);
        CHECK_THAT(outs[r].output, Catch::Contains("rank 1"));
        CHECK(outs[r].seconds < 10.0);  // the proxy's watch or a peer's notice, not COLL_TIMEOUT_MS (20 s)
        // Before any survivor exited (they linger 5 s at 4 ranks).
        CHECK(count(outs[r].output, "failed after [0-3]\\.\\d+ s") == 1);
        CHECK(count(outs[r].output, "abort returned in 0\\.\\d+ s") == 1);
      }
    }
  }
}

TEST_CASE("a rank killed mid all-reduce: the others fail within COLL_TIMEOUT_MS naming it; abort is prompt",
          "[collectives][processes][failure]") {
  // "ref": shm with every piece by reference, so that survivors read from the dead rank's memory.
  for (const char* mode : {"shm", "tcp", "ref"}) {
    DYNAMIC_SECTION("transport " << mode) {
      std::string shmDisable = std::string(mode) == "tcp" ? "1" : "0";
      std::string refMin = std::string(mode) == "ref" ? "1" : "65536";
      int port = colltest::freePort();
      std::vector<Command> cmds;
      for (int r = 0; r < 4; ++r)
        cmds.push_back({{kWorker, "die-in", "2"},
                        {{"COLL_RANK", std::to_string(r)},
                         {"COLL_WORLD_SIZE", "4"},
                         {"COLL_MASTER_ADDR", "127.0.0.1"},
                         {"COLL_MASTER_PORT", std::to_string(port)},
                         {"COLL_BOOTSTRAP_SECRET", "abc"},
                         {"COLL_TIMEOUT_MS", "4000"},
                         {"COLL_SHM_DISABLE", shmDisable},
                         {"COLL_SHM_DIRECT_MIN", refMin}}});
      auto outs = colltest::runAll(cmds, 120);
      CHECK(outs[2].exitCode() == 128 + SIGKILL);
      for (int r : {0, 1, 3}) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 3);
        CHECK_THAT(outs[r].output, Catch::Contains("rank 2"));
        CHECK(outs[r].seconds < 4.0 + 6.0);
        CHECK(count(outs[r].output, "abort returned in 0\\.\\d+ s") == 1);
      }
    }
  }
}

std::vector<Command> directJob(int n, std::vector<std::string> args,
                               std::vector<std::pair<std::string, std::string>> extra) {
  return colltest::directJob(kWorker, n, args, extra);
}

std::string runFlight(const std::string& dir) {
  Outcome o = colltest::runOne({{COLL_FLIGHT_PATH, dir}}, 30);
  INFO(o.output);
  CHECK(o.exitCode() == 0);
  return o.output;
}

TEST_CASE("a rank killed mid all-reduce: the survivors shrink without it and reduce correctly",
          "[collectives][processes][failure][shrink]") {
  for (const char* mode : {"shm", "tcp"}) {
    DYNAMIC_SECTION("transport " << mode) {
      auto outs = colltest::runAll(
          directJob(4, {"shrink-after-kill", "2"},
                    {{"COLL_TIMEOUT_MS", "4000"}, {"COLL_SHM_DISABLE", std::string(mode) == "tcp" ? "1" : "0"}}),
          120);
      CHECK(outs[2].exitCode() == 128 + SIGKILL);
      int newRank = 0;
      for (int r : {0, 1, 3}) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK_THAT(outs[r].output,
                   Catch::Contains("shrunk to rank " + std::to_string(newRank++) + " of 3, all-reduce correct"));
      }
    }
  }
}

// Resident memory of a process, in KiB (VmRSS of /proc/PID/status).
long rssKiB(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// The pid of the process whose environment holds all of `words` (NUL-separated entries).
int pidWithEnv(const std::vector<std::string>& words) {
  DIR* d = opendir("/proc");
  int found = -1;
  for (dirent* e; d && (e = readdir(d));) {
    int candidate = std::atoi(e->d_name);
    if (candidate <= 0) continue;
    std::ifstream env("/proc/" + std::to_string(candidate) + "/environ");
    std::string all((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    bool every = !all.empty();
    for (const auto& w : words) every = every && all.find(w + '\0') != std::string::npos;
    if (every) found = candidate;
  }
  if (d) closedir(d);
  return found;
}

// The listening TCP endpoints (address:port) of process pid, from ss.
std::vector<std::string> listenersOf(int pid) {
  Outcome o = colltest::runOne({{"ss", "-ltnpH"}}, 10);
  std::vector<std::string> out;
  std::istringstream lines(o.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("pid=" + std::to_string(pid) + ",") == std::string::npos) continue;
    std::istringstream f(line);
    std::string state, recvq, sendq, local;
    f >> state >> recvq >> sendq >> local;
    out.push_back(local);
  }
  return out;
}

TEST_CASE(
    "a flood of silent connections on every listener, under ulimit -n 1024: collectives, split and finalize "
    "succeed, new connections within a second",
    "[processes][failure][flood]") {
  // The flood's own descriptors: this process needs many more than ranks are allowed.
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;  // as many as this machine lets a process have (20000 here and in CI)
  REQUIRE(setrlimit(RLIMIT_NOFILE, &r) == 0);
  char dir[] = "/tmp/coll-flood-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string go = std::string(dir) + "/go";
  // 4 ranks over TCP (every pair through the data listeners), each limited to 1024 descriptors.
  std::vector<Command> job = directJob(4, {"under-flood", go}, {{"COLL_SHM_DISABLE", "1"}});
  for (auto& c : job) c.argv.insert(c.argv.begin(), {"prlimit", "--nofile=1024", "--"});
  std::vector<Outcome> outs;
  std::thread runner([&] { outs = colltest::runAll(job, 120); });
  std::vector<int> pids;
  for (int i = 0; i < 600 && pids.size() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pids.clear();
    for (int rank = 0; rank < 4; ++rank) {
      std::ifstream f(go + ".ready." + std::to_string(rank));
      int pid = 0;
      if (f >> pid) pids.push_back(pid);
    }
  }
  REQUIRE(pids.size() == 4);
  // Every listener of every rank: the root (rank 0), the bootstrap inboxes, the tcp data listeners.
  std::vector<int> flood;
  size_t listeners = 0;
  for (int pid : pids)
    for (const std::string& local : listenersOf(pid)) {
      auto colon = local.rfind(':');
      auto addr = coll::net::Address::resolve(local.substr(0, colon),
                                              static_cast<uint16_t>(std::stoi(local.substr(colon + 1))));
      if (!addr.isOk()) continue;
      ++listeners;
      for (int k = 0; k < 1500; ++k) {
        int fd = socket(addr->family(), SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0) break;
        (void)::connect(fd, reinterpret_cast<const sockaddr*>(&addr->storage), addr->length);
        flood.push_back(fd);
      }
    }
  INFO(flood.size() << " silent connections on " << listeners << " listeners");
  CHECK(listeners >= 2 * 4);  // at least an inbox and a data listener per rank
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  { std::ofstream(go) << "go\n"; }
  runner.join();
  for (int fd : flood) close(fd);
  for (int rank = 0; rank < 4; ++rank) std::remove((go + ".ready." + std::to_string(rank)).c_str());
  std::remove(go.c_str());
  rmdir(dir);
  REQUIRE(outs.size() == 4);
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank << ": " << outs[rank].output.substr(0, 3000));
    CHECK(outs[rank].exitCode() == 0);
    std::smatch m;
    REQUIRE(std::regex_search(outs[rank].output, m, std::regex("all-to-all under flood took ([0-9.]+) s")));
    // New connections come up through the flood: 0.23 s here (the flood's connections ahead of
    // them in the kernel's queue are replaced 2 ms after they are accepted).
    CHECK(std::stod(m[1]) < 1.0);
  }
}

TEST_CASE("the bootstrap root allocates nothing for headers that announce huge messages, even with the secret",
          "[processes][failure][root]") {
  // A job whose secret is known (as a derived one is to anyone): 2 ranks initialize and idle.
  std::vector<Command> job = directJob(2, {"idle", "6"}, {});
  std::string port;
  for (const auto& [k, v] : job[0].env)
    if (k == "COLL_MASTER_PORT") port = v;
  std::vector<Outcome> outs;
  std::thread runner([&] { outs = colltest::runAll(job, 60); });
  // Rank 0's process holds the root.
  int pid = -1;
  for (int i = 0; i < 100 && pid < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    pid = pidWithEnv({"COLL_MASTER_PORT=" + port, "COLL_RANK=0"});
  }
  REQUIRE(pid > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // init done
  long before = rssKiB(pid);
  auto addr = coll::net::Address::resolve("127.0.0.1", static_cast<uint16_t>(std::stoi(port)), AF_INET);
  REQUIRE(addr.isOk());
  std::vector<coll::net::Socket> held;
  for (uint64_t tag : {coll::bootstrap::kTagHello, coll::bootstrap::kTagStatusQuery, uint64_t(12345)})
    for (int i = 0; i < 4; ++i) {
      auto s = coll::net::Socket::connect(*addr, coll::net::Deadline::afterMs(2000), nullptr, "root");
      REQUIRE(s.isOk());
      // The job's secret (5eed), a valid header, and 256 MiB announced.
      coll::bootstrap::MsgHeader h = coll::bootstrap::makeHeader(0x5eed, tag, 256ull << 20, 0);
      REQUIRE(s->sendAll(&h, sizeof(h), coll::net::Deadline::afterMs(2000), nullptr, "root").isOk());
      std::string junk(4096, 'x');
      (void)s->sendAll(junk.data(), junk.size(), coll::net::Deadline::afterMs(2000), nullptr, "root");
      held.push_back(std::move(*s));
    }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long after = rssKiB(pid);
  INFO("rank 0's RSS " << before << " KiB before, " << after << " KiB with 12 huge announcements open");
  CHECK(before > 0);
  CHECK(after - before < 4096);
  held.clear();
  runner.join();
  for (const auto& o : outs) CHECK(o.exitCode() == 0);
}

TEST_CASE(
    "coll-top: a live view names a stopped rank within 2 s while the others still wait; a wrong secret gets "
    "nothing",
    "[processes][failure][top]") {
  // Rank 2 is SIGSTOPped inside an all-reduce (killed 8 s later by the worker's helper); the
  // others' timeout is 30 s, so they are still waiting when coll-top asks.
  std::vector<Command> job = directJob(4, {"stop-in", "2", "8"}, {{"COLL_TIMEOUT_MS", "30000"}});
  std::string port;
  for (const auto& [k, v] : job[0].env)
    if (k == "COLL_MASTER_PORT") port = v;
  std::vector<Outcome> outs;
  std::thread runner([&] { outs = colltest::runAll(job, 120); });
  // Views until one names rank 2 and shows a survivor waiting for it at a step of its schedule (a
  // survivor announces whom it waits for at its first liveness check, 100 ms into the wait; the
  // device executor's host build, COLL_EXECUTOR=device-host, at its proxy's next 100 ms check: a
  // view taken sooner may not show it yet on a loaded machine).
  std::string view, namedView;
  bool named = false, waitedFor = false;
  double took = 99;
  int exitCode = -1;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(7);
  while (!(named && waitedFor) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Outcome o =
        colltest::runOne({{COLL_TOP_PATH, "--master", "127.0.0.1:" + port}, {{"COLL_BOOTSTRAP_SECRET", "5eed"}}}, 20);
    view = o.output;
    if (!std::regex_search(view, std::regex("\\n +2 +- +- +NOT ANSWERING within 1000 ms"))) continue;
    named = true;
    namedView = view;
    exitCode = o.exitCode();
    std::smatch m;
    if (std::regex_search(view, m, std::regex("asked through \\S+ in ([0-9.]+) s"))) took = std::stod(m[1]);
    waitedFor = count(view, "rank 2 at step \\d+ for \\d+\\.\\d+ s") >= 1;
  }
  INFO(view);
  CHECK(named);
  CHECK(waitedFor);
  CHECK(took < 2.0);
  CHECK(exitCode == 1);
  // The others answer: in the all-reduce, and (above) at least one of them waits for rank 2.
  for (int r : {0, 1, 3})
    CHECK(std::regex_search(namedView,
                            std::regex("\\n +" + std::to_string(r) + " +\\d+ +\\S+ +collAllReduce \\(#\\d+\\)")));
  CHECK_THAT(namedView, Catch::Contains("shm to 3 peers"));
  Outcome wrong =
      colltest::runOne({{COLL_TOP_PATH, "--master", "127.0.0.1:" + port}, {{"COLL_BOOTSTRAP_SECRET", "5eee"}}}, 20);
  INFO(wrong.output);
  CHECK(wrong.exitCode() == 2);
  CHECK_THAT(wrong.output, Catch::Contains("no answer from 127.0.0.1:" + port));
  CHECK_THAT(wrong.output, !Catch::Contains("rank "));
  // The secret on the command line is refused (ps shows argv to every user); from a file that only
  // its owner reads it works, and --json gives the same view for scripts.
  Outcome argv = colltest::runOne({{COLL_TOP_PATH, "--master", "127.0.0.1:" + port, "--secret", "5eed"}}, 20);
  CHECK(argv.exitCode() == 2);
  CHECK_THAT(argv.output, Catch::Contains("not taken from the command line"));
  char path[] = "/tmp/coll-top-secret-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "5eed\n", 5) == 5);
  close(fd);
  Outcome fromFile =
      colltest::runOne({{COLL_TOP_PATH, "--master", "127.0.0.1:" + port, "--secret-file", path, "--json"}}, 20);
  INFO(fromFile.output);
  CHECK((fromFile.exitCode() == 0 || fromFile.exitCode() == 1));
  CHECK_THAT(fromFile.output, Catch::Contains("{\"ranks\": 4, \"hosts\": 1, \"through\": \"127.0.0.1:" + port + "\""));
  CHECK(count(fromFile.output, "\"rank\": \\d+, \"answered\": ") == 4);
  chmod(path, 0644);
  Outcome readable = colltest::runOne({{COLL_TOP_PATH, "--master", "127.0.0.1:" + port, "--secret-file", path}}, 20);
  CHECK(readable.exitCode() == 2);
  CHECK_THAT(readable.output, Catch::Contains("may be read by other users"));
  unlink(path);
  runner.join();
  REQUIRE(outs.size() == 4);
  CHECK(outs[2].exitCode() == 128 + SIGKILL);
}

TEST_CASE(
    "coll-top at 64 ranks on 4 hosts: the view comes within 2 s through the hosts' leaders, names a stopped rank, "
    "and a stopped leader costs only its host",
    "[processes][failure][top][top64]") {
  // 64 processes, 16 per simulated host (COLL_HOSTID), so the question goes down the tree: the
  // tool asks ranks 0, 16, 32 and 48, each asks its host's 15 others. The victim stops inside an
  // all-reduce; the others' timeout (60 s) outlasts the views, and the victim is killed after 14 s.
  for (int victim : {37, 16}) {
    DYNAMIC_SECTION("rank " << victim << " stopped") {
      std::vector<Command> job = directJob(64, {"stop-in", std::to_string(victim), "14"},
                                           {{"COLL_TIMEOUT_MS", "60000"}, {"COLL_DEBUG", "ERROR"}});
      for (size_t r = 0; r < job.size(); ++r)
        job[r].env.push_back({"COLL_HOSTID", "top-host-" + std::to_string(r / 16)});
      std::string port;
      for (const auto& [k, v] : job[0].env)
        if (k == "COLL_MASTER_PORT") port = v;
      std::vector<Outcome> outs;
      std::thread runner([&] { outs = colltest::runAll(job, 180); });
      const bool leader = victim % 16 == 0;
      const std::string stopped = "\\n +" + std::to_string(victim) + " +- +- +NOT ANSWERING within \\d+ ms";
      std::string view, namedView;
      bool named = false, waitedFor = false;
      double took = 99;
      int exitCode = -1;
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(12);
      while (!(named && waitedFor) && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        Outcome o = colltest::runOne(
            {{COLL_TOP_PATH, "--master", "127.0.0.1:" + port}, {{"COLL_BOOTSTRAP_SECRET", "5eed"}}}, 20);
        view = o.output;
        if (!std::regex_search(view, std::regex(stopped))) continue;
        named = true;
        namedView = view;
        exitCode = o.exitCode();
        std::smatch m;
        took = std::regex_search(view, m, std::regex("asked through \\S+ in ([0-9.]+) s")) ? std::stod(m[1]) : 99;
        // Whom the others wait for: the victim, by a rank of another host when the victim is a
        // leader (its own host's ranks are unknown then).
        waitedFor = count(view, "rank " + std::to_string(victim) + " at step \\d+ for \\d+\\.\\d+ s") >= 1;
      }
      INFO(namedView);
      CHECK(named);
      CHECK(waitedFor);
      CHECK(took < 2.0);
      CHECK(exitCode == 1);
      CHECK_THAT(namedView, Catch::Contains("coll-top: 64 ranks on 4 host(s)"));
      int answered = count(namedView, "\\n +\\d+ +\\d+ +\\S+ +collAllReduce \\(#\\d+\\)");
      if (leader) {
        // Its host's other 15 ranks are unknown behind it; the other 48 answer.
        CHECK(count(namedView, "unknown: its host's leader, rank " + std::to_string(victim) + ", does not answer") ==
              15);
        CHECK(answered == 48);
      } else {
        CHECK(answered == 63);
        CHECK(count(namedView, "unknown") == 0);
      }
      runner.join();
      REQUIRE(outs.size() == 64);
      CHECK(outs[static_cast<size_t>(victim)].exitCode() == 128 + SIGKILL);
    }
  }
}

TEST_CASE(
    "emulated device: coll-top shows whom the launches wait for and at which step; a stopped rank is blamed and the "
    "flight recorder written, as on the host path",
    "[processes][failure][top][device]") {
  // 3 ranks on emulated device buffers; rank 1 stops after one all-reduce (killed 12 s later), the
  // others' launches wait for it until COLL_TIMEOUT_MS (5 s), then follow the chain of waits.
  char dir[] = "/tmp/coll-flight-test-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::vector<Command> job =
      directJob(3, {"device-stop-in", "1", "262144", "12"},
                {{"COLL_DEVICE_EMULATION", "1"}, {"COLL_TIMEOUT_MS", "5000"}, {"COLL_FLIGHT_RECORDER_DIR", dir}});
  std::string port;
  for (const auto& [k, v] : job[0].env)
    if (k == "COLL_MASTER_PORT") port = v;
  std::vector<Outcome> outs;
  std::thread runner([&] { outs = colltest::runAll(job, 120); });
  std::string view;
  bool seen = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (!seen && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    view = colltest::runOne({{COLL_TOP_PATH, "--master", "127.0.0.1:" + port}, {{"COLL_BOOTSTRAP_SECRET", "5eed"}}}, 20)
               .output;
    seen = std::regex_search(view, std::regex("\\n +1 +- +- +NOT ANSWERING")) &&
           count(view, " +collAllReduce \\(#2\\) +rank 1 at step \\d+ for \\d+\\.\\d+ s") >= 1;
  }
  INFO(view);
  CHECK(seen);
  runner.join();
  REQUIRE(outs.size() == 3);
  CHECK(outs[1].exitCode() == 128 + SIGKILL);
  int blamed = 0;
  for (int r : {0, 2}) {
    INFO("rank " << r << ": " << outs[r].output);
    CHECK(outs[r].exitCode() == 3);
    // The timed-out rank follows the chain of waits to the stopped rank; the other may end first
    // with its sentence (the notice), which names it the same way.
    blamed += count(outs[r].output, "rank 1 \\(pid \\d+ on [^)]*\\) stopped making progress: it does not answer") >= 1;
  }
  CHECK(blamed == 2);
  std::string report = runFlight(dir);
  CHECK_THAT(report, Catch::Contains("no file from rank(s) 1"));
  CHECK(count(report, "#2 collAllReduce\\(count 262144, float, sum\\) failed after") == 2);
  CHECK(count(report, "rank [02] \\(pid \\d+\\): 2 operations started") == 2);
  // The eager all-reduce before the stop completed on the survivors (the proxy ended its entry).
  std::string files = colltest::runOne({{"/bin/sh", "-c", std::string("cat ") + dir + "/*.json"}}, 20).output;
  CHECK(count(files, "\"state\": ?\"completed\"") == 2);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST_CASE("a rank stopped mid all-reduce: every survivor names it after COLL_TIMEOUT_MS; flight recorder",
          "[collectives][processes][failure]") {
  for (const char* mode : {"shm", "tcp"}) {
    DYNAMIC_SECTION("transport " << mode) {
      char dir[] = "/tmp/coll-flight-test-XXXXXX";
      REQUIRE(mkdtemp(dir) != nullptr);
      auto outs = colltest::runAll(directJob(5, {"stop-in", "2", "12"},
                                             {{"COLL_TIMEOUT_MS", "2000"},
                                              {"COLL_SHM_DISABLE", std::string(mode) == "tcp" ? "1" : "0"},
                                              {"COLL_FLIGHT_RECORDER_DIR", dir}}),
                                   120);
      CHECK(outs[2].exitCode() == 128 + SIGKILL);
      for (int r : {0, 1, 3, 4}) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 3);
        // Whichever neighbour it waited for, each survivor names the stopped rank as the cause.
        CHECK(count(outs[r].output, "rank 2 \\(pid \\d+ on [^)]*\\) stopped making progress: it does not answer") == 1);
        CHECK(outs[r].seconds < 2.0 + 6.0);
      }
      std::string report = runFlight(dir);
      CHECK_THAT(report, Catch::Contains("no file from rank(s) 2"));
      CHECK(count(report, "#\\d+ collAllReduce\\(count 1048576, float, sum\\) failed after") == 4);
      // The files are the job's own.
      DIR* d = opendir(dir);
      REQUIRE(d);
      int files = 0;
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        struct stat st {};
        std::string path = std::string(dir) + "/" + e->d_name;
        REQUIRE(stat(path.c_str(), &st) == 0);
        CHECK((st.st_mode & 0777) == 0600);
        ::unlink(path.c_str());
        ++files;
      }
      closedir(d);
      ::rmdir(dir);
      CHECK(files == 4);
    }
  }
}

TEST_CASE("ranks calling different collectives: an error, and coll-flight shows where they diverged",
          "[collectives][processes][failure]") {
  char dir[] = "/tmp/coll-flight-test-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  auto outs = colltest::runAll(
      directJob(3, {"mismatch", "1"}, {{"COLL_TIMEOUT_MS", "2000"}, {"COLL_FLIGHT_RECORDER_DIR", dir}}), 120);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << outs[r].output);
    CHECK(outs[r].exitCode() == 3);
  }
  std::string report = runFlight(dir);
  CHECK_THAT(report, Catch::Contains("ranks diverge at operation #2:"));
  CHECK_THAT(report, Catch::Contains("rank(s) 1: collAllGather(count 1000, float)"));
  CHECK_THAT(report, Catch::Contains("rank(s) 0, 2: collAllReduce(count 4096, float, sum)"));
  std::system((std::string("rm -rf ") + dir).c_str());
}

// The in-band call check (COLL_CHECK_CALLS's default) as processes: a sample of the matrix the
// thread tests run whole (multiproc/test_mismatch.cc), over shm and TCP.
TEST_CASE("processes: mismatched calls are named on every rank by the in-band check",
          "[collectives][processes][mismatch]") {
  struct Case {
    int n, collective, mismatch, odd;
    bool tcp;
  };
  // collective: 0 all-reduce .. 5 all-to-all; mismatch: colltest::Mismatch (0 op, 1 type, 2 count,
  // 3 root, 4 collective, 5 skipped call).
  for (Case c : {Case{3, 0, 0, 2, false}, Case{3, 3, 3, 1, false}, Case{3, 2, 5, 0, false}, Case{2, 1, 1, 1, true},
                 Case{3, 4, 4, 2, true}}) {
    DYNAMIC_SECTION(c.n << " ranks, collective " << c.collective << ", mismatch " << c.mismatch << " on rank " << c.odd
                        << (c.tcp ? ", tcp" : ", shm")) {
      auto outs = colltest::runAll(
          directJob(
              c.n, {"inband-mismatch", std::to_string(c.collective), std::to_string(c.mismatch), std::to_string(c.odd)},
              {{"COLL_SHM_DISABLE", c.tcp ? "1" : "0"}, {"COLL_CHECK_CALLS", c.mismatch == 3 ? "full" : ""}}),
          120);
      for (int r = 0; r < c.n; ++r) {
        INFO("rank " << r << ": " << outs[r].output);
        CHECK(outs[r].exitCode() == 0);
        CHECK(count(outs[r].output, "worker rank \\d+/\\d+ ok") == 1);
      }
    }
  }
}

TEST_CASE("processes: host streams over shm and TCP, 1..4 ranks", "[streams][processes]") {
  for (int n : {1, 2, 3, 4}) {
    DYNAMIC_SECTION("shm, nranks " << n) { expectAllOk(n, {"streams"}, {}, 120); }
  }
  for (int n : {2, 3}) {
    DYNAMIC_SECTION("tcp, nranks " << n) { expectAllOk(n, {"streams"}, {{"COLL_SHM_DISABLE", "1"}}, 120); }
  }
}

// NCCL's non-blocking communicators in processes, turned on by COLL_COMM_BLOCKING=0 or by NCCL's
// own variable where the twins are on (as under the drop-in): init, calls, a group, a split and
// finalize each return collInProgress.
TEST_CASE("processes: non-blocking communicators over shm and TCP", "[nonblocking][processes]") {
  for (int n : {2, 3}) {
    DYNAMIC_SECTION("shm, nranks " << n) {
      expectAllOk(n, {"nonblocking"}, {{"COLL_NCCL_TWINS", "1"}, {"NCCL_COMM_BLOCKING", "0"}}, 120);
    }
  }
  DYNAMIC_SECTION("tcp, nranks 4") {
    expectAllOk(4, {"nonblocking"}, {{"COLL_COMM_BLOCKING", "0"}, {"COLL_SHM_DISABLE", "1"}}, 120);
  }
}

TEST_CASE("processes: destroy with host-stream work queued; the survivor's error names the call and a peer",
          "[streams][processes][destroy]") {
  for (const char* shm : {"0", "1"}) {
    DYNAMIC_SECTION("COLL_SHM_DISABLE=" << shm) {
      expectAllOk(3, {"streams-peer-gone", "1500"}, {{"COLL_SHM_DISABLE", shm}, {"COLL_TIMEOUT_MS", "1500"}}, 60);
    }
  }
}
