// coll-top: a live view of a running job, as NCCL's RAS client gives, through the bootstrap links
// the job already has. Given where the job's root listens (--master, the address and port its
// ranks were started with) or any rank's bootstrap inbox (--rank), and the job's secret, it asks
// for the table of ranks, then one leader per host (its lowest rank) for its host's ranks, which
// the leader asks at once: each rank's state is the operation it runs and its sequence number,
// whom it waits for and for how long, bytes moved, its transports, the communicators in its
// process. A rank that does not answer its leader within --timeout-ms is marked NOT ANSWERING
// (stopped or hung: its inbox is frozen with it); one whose inbox refuses the connection is
// MISSING (its process is gone); the ranks of a host whose leader does not answer are unknown.
// Only a holder of the job's secret gets an answer: the others' questions are dropped unread.
// The bytes of a view grow with the ranks, not their square (bootstrap/status_wire.h).
//
//   COLL_BOOTSTRAP_SECRET=5eed coll-top --master 10.0.0.1:29500
//   coll-top --rank 10.0.0.7:41233 --secret-file ~/.coll-secret --json
//
// The secret comes from COLL_BOOTSTRAP_SECRET or from a file only readable by its owner, never
// from the command line, where `ps` shows it to every user of the host.
// Exit status: 0 when every rank answered, 1 when some did not, 2 for a usage error or when the
// job could not be reached at all.
#include <getopt.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/socket.h"
#include "bootstrap/bootstrap_wire.h"
#include "bootstrap/status_wire.h"

namespace cb = coll::bootstrap;
using coll::Result;
using coll::Status;

namespace {

constexpr const char* kUsage =
    "usage: coll-top (--master HOST:PORT | --rank HOST:PORT) [--secret-file PATH] [--timeout-ms MS] [--json]\n"
    "  --master HOST:PORT  where the job's bootstrap root listens (COLL_MASTER_ADDR:COLL_MASTER_PORT,\n"
    "                      coll-run's --master), in rank 0's process\n"
    "  --rank HOST:PORT    any rank's bootstrap inbox (logged at COLL_DEBUG=INFO)\n"
    "  --secret-file PATH  a file holding the job's secret in hex, readable by its owner only\n"
    "                      (default: the COLL_BOOTSTRAP_SECRET variable; never on the command line)\n"
    "  --timeout-ms MS     how long a rank may take to answer (default 1000)\n"
    "  --json              one JSON object on stdout instead of the table, for scripts\n";

// What a leader may take beyond --timeout-ms to compose and send its host's answer.
constexpr int64_t kLeaderGraceMs = 500;

// One rank's line: what it answered, or why it did not.
struct View {
  enum State { kAnswered, kNotAnswering, kMissing, kUnknown } state = kUnknown;
  std::string problem;  // why it did not answer
  int leader = -1;      // its host's leader, which was asked for it
  cb::JobStatus st{};
};

const char* stateName(View::State s) {
  switch (s) {
    case View::kAnswered:
      return "answered";
    case View::kNotAnswering:
      return "not answering";
    case View::kMissing:
      return "missing";
    default:
      return "unknown";
  }
}

Result<coll::net::Address> parseAddress(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return Status(collInvalidArgument, "'" + text + "' is not HOST:PORT");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = std::atoi(text.substr(colon + 1).c_str());
  if (port <= 0 || port > 65535) return Status(collInvalidArgument, "'" + text + "' has no valid port");
  return coll::net::Address::resolve(host, static_cast<uint16_t>(port));
}

// The problem text of a question that got no answer.
std::string unanswered(const Status& why, int64_t timeoutMs, View::State* state) {
  if (why.code() == collTimeout) {
    *state = View::kNotAnswering;
    return fmt::format("NOT ANSWERING within {} ms (stopped or hung)", timeoutMs);
  }
  *state = View::kMissing;
  return "MISSING (" + why.message() + ")";
}

// Every rank's view: each host's leader asked at once for its host's ranks.
// *received counts the answers' bytes (headers included), for the view's cost.
std::vector<View> gather(const std::vector<cb::TableEntry>& table, uint64_t secret, int64_t timeoutMs, int* hosts,
                         uint64_t* received) {
  const int n = static_cast<int>(table.size());
  std::vector<View> views(table.size());
  std::vector<int> leaders;  // in order of their first rank
  std::vector<uint64_t> hashes;
  for (int r = 0; r < n; ++r) {
    auto it = std::find(hashes.begin(), hashes.end(), table[r].hostHash);
    if (it == hashes.end()) {
      hashes.push_back(table[r].hostHash);
      leaders.push_back(r);
      views[r].leader = r;
    } else {
      views[r].leader = leaders[static_cast<size_t>(it - hashes.begin())];
    }
  }
  *hosts = static_cast<int>(leaders.size());
  std::vector<coll::net::Address> addrs;
  for (int l : leaders) addrs.push_back(*table[l].listen.unpack());  // decodeTableAnswer checked them
  auto answers = cb::askStatusAll(addrs, secret, cb::StatusQuestion{cb::kAskHost, static_cast<uint32_t>(timeoutMs)},
                                  timeoutMs + kLeaderGraceMs, uint64_t(n) * sizeof(cb::HostEntry));
  for (size_t h = 0; h < leaders.size(); ++h) {
    const int leader = leaders[h];
    if (answers[h].isOk()) *received += sizeof(cb::MsgHeader) + answers[h]->size();
    Result<std::vector<cb::HostEntry>> entries =
        answers[h].isOk()
            ? cb::decodeHostAnswer(reinterpret_cast<const uint8_t*>(answers[h]->data()), answers[h]->size(), n)
            : Result<std::vector<cb::HostEntry>>(answers[h].status());
    if (!entries.isOk()) {
      View::State state;
      views[leader].problem = unanswered(entries.status(), timeoutMs + kLeaderGraceMs, &state);
      views[leader].state = state;
      continue;
    }
    for (const cb::HostEntry& e : *entries) {
      View& v = views[static_cast<size_t>(e.rank)];
      if (v.leader != leader) continue;  // not of this host: ignored
      v.st = e.st;
      if (e.state == cb::kAnswered) {
        v.state = View::kAnswered;
      } else {
        View::State state;
        v.problem = unanswered(Status(e.state == cb::kNotAnswering ? collTimeout : collRemoteError, e.st.detail),
                               timeoutMs, &state);
        v.state = state;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    View& v = views[r];
    if (v.state != View::kUnknown) continue;
    v.problem = views[v.leader].state == View::kAnswered
                    ? fmt::format("unknown: left out of its host leader's (rank {}) answer", v.leader)
                    : fmt::format("unknown: its host's leader, rank {}, does not answer", v.leader);
  }
  return views;
}

// The secret from a file: its first word, hex. The file must be readable by its owner alone.
bool secretFromFile(const char* path, std::string* out, std::string* why) {
  struct stat st {};
  if (stat(path, &st) != 0) return *why = fmt::format("{}: {}", path, std::strerror(errno)), false;
  if (st.st_mode & 077)
    return *why = fmt::format("{} may be read by other users (mode {:o}): chmod 600 it", path, st.st_mode & 0777),
           false;
  FILE* f = std::fopen(path, "r");
  if (!f) return *why = fmt::format("{}: {}", path, std::strerror(errno)), false;
  char buf[128] = {};
  bool got = std::fscanf(f, "%127s", buf) == 1;
  std::fclose(f);
  if (!got) return *why = fmt::format("{} holds no secret", path), false;
  *out = buf;
  return true;
}

// s as a JSON string.
std::string jsonString(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += static_cast<char>(c);
    else if (c < 0x20)
      o += fmt::format("\\u{:04x}", c);
    else
      o += static_cast<char>(c);
  }
  return o + "\"";
}

std::string bytesText(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / 1073741824.0);
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

}  // namespace

int main(int argc, char** argv) {
  std::string master, rankAddr, secretFile;
  const char* env = std::getenv("COLL_BOOTSTRAP_SECRET");
  std::string secretText = env ? env : "";
  int64_t timeoutMs = 1000;
  bool json = false;
  static const struct option kLong[] = {{"master", required_argument, nullptr, 'm'},
                                        {"rank", required_argument, nullptr, 'r'},
                                        {"secret", required_argument, nullptr, 's'},
                                        {"secret-file", required_argument, nullptr, 'f'},
                                        {"timeout-ms", required_argument, nullptr, 't'},
                                        {"json", no_argument, nullptr, 'j'},
                                        {"help", no_argument, nullptr, 'h'},
                                        {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "h", kLong, nullptr)) != -1;) {
    if (c == 'm')
      master = optarg;
    else if (c == 'r')
      rankAddr = optarg;
    else if (c == 's')
      return std::fputs(
                 "coll-top: the secret is not taken from the command line, where ps shows it to every user "
                 "of the host: set COLL_BOOTSTRAP_SECRET or give --secret-file PATH\n",
                 stderr),
             2;
    else if (c == 'f')
      secretFile = optarg;
    else if (c == 't')
      timeoutMs = std::atoll(optarg);
    else if (c == 'j')
      json = true;
    else if (c == 'h')
      return std::fputs(kUsage, stdout), 0;
    else
      return std::fputs(kUsage, stderr), 2;
  }
  if (master.empty() == rankAddr.empty() || timeoutMs <= 0)
    return std::fprintf(stderr, "coll-top: give --master or --rank (one of them)\n%s", kUsage), 2;
  if (!secretFile.empty()) {
    std::string why;
    if (!secretFromFile(secretFile.c_str(), &secretText, &why))
      return std::fprintf(stderr, "coll-top: %s\n", why.c_str()), 2;
  }
  if (secretText.empty())
    return std::fprintf(stderr,
                        "coll-top: the job's secret is needed (COLL_BOOTSTRAP_SECRET, or --secret-file PATH)\n"),
           2;
  char* end = nullptr;
  uint64_t secret = std::strtoull(secretText.c_str(), &end, 16);
  if (*end) return std::fprintf(stderr, "coll-top: the secret is not a hexadecimal number\n"), 2;
  auto start = std::chrono::steady_clock::now();

  // The table of ranks, from the root or from the rank asked: O(n) bytes, asked once.
  std::string from = master.empty() ? rankAddr : master;
  auto where = parseAddress(from);
  if (!where.isOk()) return std::fprintf(stderr, "coll-top: %s\n", where.status().message().c_str()), 2;
  auto first = cb::askStatus(*where, secret, cb::StatusQuestion{cb::kAskTable, 0}, std::max<int64_t>(timeoutMs, 2000),
                             uint64_t(cb::kMaxRanks) * sizeof(cb::TableEntry));
  if (!first.isOk())
    return std::fprintf(stderr,
                        "coll-top: no answer from %s: it %s (a wrong secret is dropped unanswered, as is a port that "
                        "is no coll job's)\n",
                        from.c_str(), first.status().message().c_str()),
           2;
  if (first->empty()) return std::fprintf(stderr, "coll-top: %s: the job has not formed yet\n", from.c_str()), 2;
  auto table = cb::decodeTableAnswer(reinterpret_cast<const uint8_t*>(first->data()), first->size());
  if (!table.isOk())
    return std::fprintf(stderr, "coll-top: %s sent %s\n", from.c_str(), table.status().message().c_str()), 2;

  int hosts = 0;
  uint64_t received = sizeof(cb::MsgHeader) + first->size();
  std::vector<View> views = gather(*table, secret, timeoutMs, &hosts, &received);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  int silent = 0;
  if (json) {
    // One object: the view's figures, every rank's answer or why it gave none.
    std::string o = fmt::format(
        "{{\"ranks\": {}, \"hosts\": {}, \"through\": {}, \"seconds\": {:.6f}, \"bytes_received\": {}, \"views\": [",
        views.size(), hosts, jsonString(from), took, received);
    for (size_t r = 0; r < views.size(); ++r) {
      const View& v = views[r];
      if (r) o += ", ";
      if (v.state != View::kAnswered) {
        ++silent;
        o += fmt::format(
            "{{\"rank\": {}, \"answered\": false, \"state\": \"{}\", \"host_leader\": {}, \"problem\": {}}}", r,
            stateName(v.state), v.leader, jsonString(v.problem));
        continue;
      }
      const cb::JobStatus& s = v.st;
      const cb::WaitAnswer& w = s.wait;
      o += fmt::format(
          "{{\"rank\": {}, \"answered\": true, \"state\": \"answered\", \"host_leader\": {}, \"pid\": {}, "
          "\"host\": {}, \"in_operation\": {}, \"operation\": {}, "
          "\"seq\": {}, \"waits_for\": {}, \"wait_step\": {}, \"waited_ms\": {}, \"bytes\": {}, \"transports\": {}, "
          "\"communicators\": {}}}",
          s.rank, v.leader, s.pid, jsonString(s.host), w.inOp ? "true" : "false", jsonString(w.opName), w.opSeq,
          w.waitingFor, w.waitStep, w.waitedMs, s.bytes, jsonString(s.detail), s.communicators);
    }
    std::printf("%s], \"not_answering\": %d}\n", o.c_str(), silent);
    return silent ? 1 : 0;
  }
  std::printf("coll-top: %zu ranks on %d host(s), asked through %s in %.2f s (%s received)\n", views.size(), hosts,
              from.c_str(), took, bytesText(received).c_str());
  std::printf("%5s %8s %-14s %-26s %-32s %10s  %s\n", "rank", "pid", "host", "operation (#seq)", "waits for", "moved",
              "transports; communicators in its process");
  for (size_t r = 0; r < views.size(); ++r) {
    const View& v = views[r];
    if (v.state != View::kAnswered) {
      ++silent;
      std::printf("%5zu %8s %-14s %s\n", r, "-", "-", v.problem.c_str());
      continue;
    }
    const cb::JobStatus& s = v.st;
    const cb::WaitAnswer& w = s.wait;
    std::string op = w.inOp ? fmt::format("{} (#{})", w.opName, w.opSeq) : fmt::format("idle (after #{})", w.opSeq);
    std::string waits = w.waitingFor < 0 ? std::string("-")
                        : w.waitStep < 0 ? fmt::format("rank {} for {:.2f} s", w.waitingFor, w.waitedMs / 1000.0)
                                         : fmt::format("rank {} at step {} for {:.2f} s", w.waitingFor, w.waitStep,
                                                       w.waitedMs / 1000.0);
    std::printf("%5d %8d %-14s %-26s %-32s %10s  %s; %d\n", s.rank, s.pid, s.host, op.c_str(), waits.c_str(),
                bytesText(s.bytes).c_str(), s.detail, s.communicators);
  }
  if (silent) std::printf("coll-top: %d rank(s) did not answer\n", silent);
  return silent ? 1 : 0;
}
