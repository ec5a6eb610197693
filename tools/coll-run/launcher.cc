#include "coll-run/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/option_error.h"

namespace collrun {
namespace {

using Clock = std::chrono::steady_clock;

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// One stream (stdout or stderr) of one rank under --tag-output.
struct Stream {
  int fd = -1;
  int rank = 0;
  FILE* sink = nullptr;
  std::string partial;
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

void writeLine(Stream& s, const std::string& line) {
  std::string out = fmt::format("[{}] {}\n", s.rank, line);
  std::fwrite(out.data(), 1, out.size(), s.sink);
  std::fflush(s.sink);
}

// Drains a tagged stream; returns false at EOF.
bool pump(Stream& s) {
  char buf[65536];
  ssize_t n = ::read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!s.partial.empty()) writeLine(s, s.partial);
    s.partial.clear();
    ::close(s.fd);
    s.fd = -1;
    return false;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  size_t pos;
  while ((pos = s.partial.find('\n')) != std::string::npos) {
    writeLine(s, s.partial.substr(0, pos));
    s.partial.erase(0, pos + 1);
  }
  return true;
}

// A port that was free a moment ago on loopback. Rank 0 rebinds it with SO_REUSEADDR.
int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return "stopped";
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

class Job {
 public:
  explicit Job(const Options& o) : o_(o), ranks_(o.nproc) {}
  int run();

 private:
  bool spawnAll(const std::string& addr, int port, const std::string& secret);
  void childExec(int local, const std::string& addr, int port, const std::string& secret, int outFd, int errFd);
  void signalAll(int sig);
  void reap();
  int liveCount() const;

  const Options& o_;
  std::vector<Rank> ranks_;
  std::vector<Stream> streams_;
  sigset_t oldMask_{};
  std::optional<int> failedLocal_;  // the first rank that failed
  int exitCode_ = 0;
  std::optional<Clock::time_point> killAt_;  // SIGKILL stragglers after this
};

int Job::liveCount() const {
  int n = 0;
  for (const auto& r : ranks_) n += r.running;
  return n;
}

void Job::signalAll(int sig) {
  // Each rank leads its own process group, so the signal also reaches anything it started.
  for (const auto& r : ranks_)
    if (r.running) ::kill(-r.pid, sig);
}

void Job::childExec(int local, const std::string& addr, int port, const std::string& secret, int outFd, int errFd) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphan ranks if coll-run itself is killed
  sigprocmask(SIG_SETMASK, &oldMask_, nullptr);
  if (outFd >= 0) dup2(outFd, STDOUT_FILENO);
  if (errFd >= 0) dup2(errFd, STDERR_FILENO);
  if (local != 0) {  // stdin goes to the first rank only, as with mpirun
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  }
  int rank = o_.nodeRank * o_.nproc + local;
  setenv("COLL_RANK", std::to_string(rank).c_str(), 1);
  setenv("COLL_WORLD_SIZE", std::to_string(o_.nnodes * o_.nproc).c_str(), 1);
  setenv("COLL_LOCAL_RANK", std::to_string(local).c_str(), 1);
  setenv("COLL_LOCAL_SIZE", std::to_string(o_.nproc).c_str(), 1);
  setenv("COLL_MASTER_ADDR", addr.c_str(), 1);
  setenv("COLL_MASTER_PORT", std::to_string(port).c_str(), 1);
  if (!secret.empty()) setenv("COLL_BOOTSTRAP_SECRET", secret.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& a : o_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::string msg = fmt::format("coll-run: rank {}: cannot execute '{}': {}\n", rank, argv[0], std::strerror(errno));
  (void)!::write(STDERR_FILENO, msg.data(), msg.size());
  _exit(127);
}

bool Job::spawnAll(const std::string& addr, int port, const std::string& secret) {
  for (int local = 0; local < o_.nproc; ++local) {
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (o_.tagOutput && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
      std::fprintf(stderr, "coll-run: pipe failed: %s\n", std::strerror(errno));
      return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "coll-run: fork failed: %s\n", std::strerror(errno));
      return false;
    }
    if (pid == 0) childExec(local, addr, port, secret, out[1], err[1]);
    setpgid(pid, pid);  // also in the parent, so that signalAll cannot race the child's setpgid
    ranks_[local].pid = pid;
    ranks_[local].running = true;
    if (o_.tagOutput) {
      ::close(out[1]);
      ::close(err[1]);
      int rank = o_.nodeRank * o_.nproc + local;
      streams_.push_back(Stream{out[0], rank, stdout, {}});
      streams_.push_back(Stream{err[0], rank, stderr, {}});
    }
  }
  return true;
}

void Job::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (int local = 0; local < o_.nproc; ++local) {
      Rank& r = ranks_[local];
      if (r.pid != pid || !r.running) continue;
      r.running = false;
      r.status = status;
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && !failedLocal_ && !killAt_) {
        failedLocal_ = local;
        exitCode_ = exitCodeOf(status);
        int others = liveCount();
        std::fprintf(stderr, "coll-run: rank %d (pid %d) %s%s\n", o_.nodeRank * o_.nproc + local, pid,
                     describeStatus(status).c_str(),
                     others ? fmt::format("; terminating the other {} rank(s)", others).c_str() : "");
        signalAll(SIGTERM);
        killAt_ = Clock::now() + std::chrono::milliseconds(static_cast<int>(o_.killGraceSec * 1000));
      }
    }
  }
}

int Job::run() {
  std::string addr = "127.0.0.1";
  int port = 0;
  std::string secret;
  if (const char* s = std::getenv("COLL_BOOTSTRAP_SECRET")) secret = s;
  if (o_.master.empty()) {
    port = freeLoopbackPort();
    if (port <= 0) {
      std::fprintf(stderr, "coll-run: cannot find a free port on 127.0.0.1\n");
      return 1;
    }
    uint64_t r = 0;
    if (secret.empty() && getrandom(&r, sizeof(r), 0) == sizeof(r)) secret = fmt::format("{:016x}", r);
  } else {
    // Every node must agree on the secret, and coll-run on one node cannot hand a drawn one to
    // the others; a value derived from the address, port and size would let anyone who can reach
    // the root forge bootstrap messages. So the user exports one random value to every node.
    if (secret.empty()) {
      std::fprintf(stderr,
                   "coll-run: --nnodes > 1 needs COLL_BOOTSTRAP_SECRET, the same random hexadecimal value on every "
                   "node (e.g. export COLL_BOOTSTRAP_SECRET=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')), so that "
                   "no other process can join or disturb the job's bootstrap\n");
      return 2;
    }
    size_t colon = o_.master.rfind(':');
    addr = o_.master.substr(0, colon);
    if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
    parseInt(o_.master.c_str() + colon + 1, 1, 65535, &port);
  }

  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, &oldMask_);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0 || !spawnAll(addr, port, secret)) {
    signalAll(SIGKILL);
    return 1;
  }

  std::optional<Clock::time_point> deadline;
  if (o_.timeoutSec > 0) deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(o_.timeoutSec * 1000));
  std::optional<Clock::time_point> drainUntil;  // after the last rank exits, stop waiting for pipes
  for (;;) {
    bool streamsOpen = false;
    for (const auto& s : streams_) streamsOpen |= s.fd >= 0;
    if (liveCount() == 0 && (!streamsOpen || (drainUntil && Clock::now() > *drainUntil))) break;
    if (liveCount() == 0 && !drainUntil) drainUntil = Clock::now() + std::chrono::seconds(1);

    std::vector<pollfd> fds{{sfd, POLLIN, 0}};
    for (const auto& s : streams_)
      if (s.fd >= 0) fds.push_back({s.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);

    signalfd_siginfo si;
    while (::read(sfd, &si, sizeof(si)) == sizeof(si)) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped below
      if (!killAt_) {
        std::fprintf(stderr, "coll-run: received %s; forwarding it to all ranks\n", strsignal(sig));
        exitCode_ = 128 + sig;
        killAt_ = Clock::now() + std::chrono::milliseconds(static_cast<int>(o_.killGraceSec * 1000));
      }
      signalAll(sig);
    }
    for (auto& s : streams_)
      if (s.fd >= 0) {
        pollfd p{s.fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) pump(s);
      }
    reap();

    if (deadline && Clock::now() > *deadline && !killAt_) {
      std::fprintf(stderr, "coll-run: --timeout of %g s reached with %d rank(s) running; terminating them\n",
                   o_.timeoutSec, liveCount());
      exitCode_ = 124;
      signalAll(SIGTERM);
      killAt_ = Clock::now() + std::chrono::milliseconds(static_cast<int>(o_.killGraceSec * 1000));
    }
    if (killAt_ && Clock::now() > *killAt_ && liveCount() > 0) {
      signalAll(SIGKILL);
      killAt_ = Clock::now() + std::chrono::hours(1);  // once
    }
  }
  ::close(sfd);
  return exitCode_;
}

}  // namespace

std::string usage() {
  return "usage: coll-run -n N [--nnodes M --node-rank I --master HOST:PORT] [--tag-output] [--timeout S] [--] "
         "prog [args...]\n"
         "\n"
         "Starts N ranks of prog on this node with COLL_RANK, COLL_WORLD_SIZE, COLL_LOCAL_RANK, COLL_LOCAL_SIZE,\n"
         "COLL_MASTER_ADDR, COLL_MASTER_PORT (and COLL_BOOTSTRAP_SECRET) set for collCommInitFromEnv.\n"
         "\n"
         "  -n, -np, --nproc N   ranks on this node\n"
         "  --nnodes M           nodes in the job (default 1); run coll-run once per node\n"
         "  --node-rank I        this node's index in [0, M); its ranks are I*N .. I*N+N-1\n"
         "  --master HOST:PORT   where global rank 0 hosts the rendezvous (required with --nnodes > 1;\n"
         "                       default 127.0.0.1 and a free port)\n"
         "  --tag-output         prefix every output line with [rank]\n"
         "  --timeout S          terminate all ranks after S seconds (exit status 124)\n"
         "  -h, --help           this text\n"
         "\n"
         "SIGINT and SIGTERM are forwarded to every rank. When a rank fails (non-zero status or a signal),\n"
         "the others are sent SIGTERM, then SIGKILL after 3 s, and coll-run exits with that rank's status\n"
         "(128+signal if it was killed).\n";
}

namespace {

enum : int { kNnodes = 256, kNodeRank, kMaster, kTagOutput, kTimeout };

const struct option kLongOptions[] = {
    {"nproc", required_argument, nullptr, 'n'},
    {"np", required_argument, nullptr, 'n'},  // -np, rewritten to --np before getopt
    {"nnodes", required_argument, nullptr, kNnodes},
    {"node-rank", required_argument, nullptr, kNodeRank},
    {"master", required_argument, nullptr, kMaster},
    {"tag-output", no_argument, nullptr, kTagOutput},
    {"timeout", required_argument, nullptr, kTimeout},
    {"help", no_argument, nullptr, 'h'},
    {nullptr, 0, nullptr, 0},
};
// '+': stop at the first non-option (the program to start, whose options are its own); ':': a
// missing value is ':' rather than '?'.
const char kShortOptions[] = "+:hn:";

// Whether `a` is one of coll-run's options that takes its value from the next argument (long ones
// may be abbreviated, as getopt_long allows).
bool takesSeparateValue(const std::string& a) {
  if (a == "-n" || a == "-np") return true;
  if (a.size() < 3 || a.compare(0, 2, "--") != 0 || a.find('=') != std::string::npos) return false;
  for (const option* lo = kLongOptions; lo->name; ++lo)
    if (lo->has_arg == required_argument && std::strncmp(lo->name, a.c_str() + 2, a.size() - 2) == 0) return true;
  return false;
}

// getopt cannot take "-np 4" (it reads -n with the value "p"): rewrite coll-run's own -np (never the
// program's, after the first non-option) to --np.
std::vector<std::string> normalize(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    const std::string& a = out[i];
    if (a == "--" || a.empty() || a[0] != '-' || a == "-") break;
    if (a == "-np") out[i] = "--np";
    if (takesSeparateValue(a)) ++i;
  }
  return out;
}

}  // namespace

bool parseArgs(int argc, char** argv, Options* o, std::string* error, bool* help) {
  std::vector<std::string> args = normalize(argc, argv);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  optind = 0;  // start over (glibc), and print no errors of getopt's own: ours name the option
  opterr = 0;
  for (;;) {
    int longIndex = -1;
    int c = getopt_long(argc, cargs.data(), kShortOptions, kLongOptions, &longIndex);
    if (c == -1) break;
    // The option as the user wrote it (-np, not the --np it was rewritten to; no "=value").
    std::string name = std::string("-") + char(c);
    if (longIndex >= 0) {
      name = argv[optind - (optarg == cargs[optind - 1] ? 2 : 1)];
      name = name.substr(0, name.find('='));
    }
    const char* v = optarg;
    switch (c) {
      case 'h':
        *help = true;
        return true;
      case ':':
      case '?':
        // The original argv: without permutation ('+') its indices are those of cargs.
        *error = c == ':' && std::strcmp(argv[optind - 1], "-np") == 0 ? "-np needs a value"
                                                                       : colltools::optionError(c, argv, kLongOptions);
        return false;
      case 'n':
        if (!parseInt(v, 1, 1 << 16, &o->nproc)) return *error = fmt::format("{} {}: not a rank count", name, v), false;
        break;
      case kNnodes:
        if (!parseInt(v, 1, 1 << 16, &o->nnodes))
          return *error = fmt::format("--nnodes {}: not a node count", v), false;
        break;
      case kNodeRank:
        if (!parseInt(v, 0, 1 << 16, &o->nodeRank))
          return *error = fmt::format("--node-rank {}: not a node index", v), false;
        break;
      case kMaster: {
        o->master = v;
        int port;
        size_t colon = o->master.rfind(':');
        if (colon == std::string::npos || colon == 0 || !parseInt(o->master.c_str() + colon + 1, 1, 65535, &port))
          return *error = fmt::format("--master {}: expected HOST:PORT", v), false;
        break;
      }
      case kTagOutput:
        o->tagOutput = true;
        break;
      case kTimeout: {
        char* end = nullptr;
        o->timeoutSec = std::strtod(v, &end);
        if (end == v || *end || o->timeoutSec <= 0) return *error = fmt::format("--timeout {}: not seconds", v), false;
        break;
      }
      default:
        return *error = fmt::format("unknown option {}", name), false;
    }
  }
  for (int i = optind; i < argc; ++i) o->command.push_back(argv[i]);
  if (o->nproc == 0) return *error = "-n N is required", false;
  if (o->command.empty()) return *error = "no program to run", false;
  if (o->nodeRank >= o->nnodes)
    return *error = fmt::format("--node-rank {} is not below --nnodes {}", o->nodeRank, o->nnodes), false;
  if (o->nnodes > 1 && o->master.empty()) return *error = "--nnodes > 1 needs --master HOST:PORT", false;
  return true;
}

int run(const Options& options) { return Job(options).run(); }

}  // namespace collrun
