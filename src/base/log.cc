#include "base/log.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sstream>

#include "base/params.h"

namespace coll::log {
namespace detail {
std::atomic<int> gLevel{static_cast<int>(Level::WARN)};
std::atomic<uint32_t> gMask{ALL};
std::atomic<bool> gConfigured{false};
std::atomic<bool> gVersion{false};
}  // namespace detail

namespace {

std::mutex gMutex;
int gFd = STDERR_FILENO;  // guarded by gMutex
std::string gHost;        // cached: gethostname per line would be a syscall per line

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

const char* levelName(Level l) {
  switch (l) {
    case Level::WARN:
      return "WARN";
    case Level::INFO:
      return "INFO";
    case Level::TRACE:
      return "TRACE";
    default:
      return "NONE";
  }
}

const char* subsysName(Subsys s) {
  switch (s) {
    case INIT:
      return "INIT";
    case BOOTSTRAP:
      return "BOOTSTRAP";
    case NET:
      return "NET";
    case ENV:
      return "ENV";
    case COLL:
      return "COLL";
    case TOPO:
      return "TOPO";
    default:
      return "ALL";
  }
}

std::string hostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  std::string h(buf);
  auto dot = h.find('.');
  return dot == std::string::npos ? h : h.substr(0, dot);
}

void writeAll(int fd, const std::string& line) {
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere left to report a failing log sink
    off += static_cast<size_t>(n);
  }
}

}  // namespace

bool parseLevel(const std::string& text, Level* out, bool* version) {
  std::string t = upper(text);
  if (version) *version = false;
  if (t == "VERSION" && version) {
    *out = Level::NONE;
    *version = true;
  } else if (t == "NONE")
    *out = Level::NONE;
  else if (t == "WARN")
    *out = Level::WARN;
  else if (t == "INFO")
    *out = Level::INFO;
  else if (t == "TRACE")
    *out = Level::TRACE;
  else
    return false;
  return true;
}

bool parseSubsys(const std::string& text, uint32_t* mask, std::string* badName) {
  std::string t = upper(text);
  bool invert = !t.empty() && t[0] == '^';
  if (invert) t = t.substr(1);
  uint32_t m = 0;
  std::stringstream ss(t);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    static const std::pair<const char*, uint32_t> kNames[] = {{"INIT", INIT}, {"BOOTSTRAP", BOOTSTRAP}, {"NET", NET},
                                                              {"ENV", ENV},   {"COLL", COLL},           {"TOPO", TOPO},
                                                              {"ALL", ALL}};
    auto it = std::find_if(std::begin(kNames), std::end(kNames), [&](const auto& p) { return name == p.first; });
    if (it == std::end(kNames)) {
      if (badName) *badName = name;
      return false;
    }
    m |= it->second;
  }
  *mask = invert ? ~m : m;
  return true;
}

std::string expandFilePattern(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') {
        out += hostName();
        ++i;
        continue;
      }
      if (c == 'p') {
        out += std::to_string(getpid());
        ++i;
        continue;
      }
      if (c == '%') {
        out += '%';
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

void configure(const Config& config) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gFd != STDERR_FILENO) ::close(gFd);
  gFd = STDERR_FILENO;
  if (!config.file.empty()) {
    int fd = ::open(config.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0)
      gFd = fd;
    else
      writeAll(STDERR_FILENO, fmt::format("coll WARN cannot open COLL_DEBUG_FILE {}: {}; logging to stderr\n",
                                          config.file, std::strerror(errno)));
  }
  if (gHost.empty()) gHost = hostName();
  detail::gLevel.store(static_cast<int>(config.level), std::memory_order_relaxed);
  detail::gMask.store(config.subsysMask, std::memory_order_relaxed);
  detail::gVersion.store(config.version, std::memory_order_relaxed);
  detail::gConfigured.store(true, std::memory_order_release);
}

void configureFromEnv() {
  Config c;
  std::string problems;
  if (!parseLevel(params::kDebug.get(), &c.level, &c.version)) {
    problems +=
        fmt::format("COLL_DEBUG='{}' is not NONE, VERSION, WARN, INFO or TRACE; using WARN. ", params::kDebug.get());
    c.level = Level::WARN;
  }
  std::string bad;
  if (!parseSubsys(params::kDebugSubsys.get(), &c.subsysMask, &bad)) {
    problems += fmt::format("COLL_DEBUG_SUBSYS names an unknown subsystem '{}'; logging all. ", bad);
    c.subsysMask = ALL;
  }
  if (params::kDebugFile.isSet()) c.file = expandFilePattern(params::kDebugFile.get());
  configure(c);
  if (!problems.empty()) COLL_LOG(WARN, ENV, "{}", problems);
}

namespace detail {

void ensureConfigured() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!gConfigured.load(std::memory_order_acquire)) configureFromEnv();
  });
}

void emit(Level level, Subsys subsys, fmt::string_view format, fmt::format_args args) {
  std::string line;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    line = fmt::format("{}:{}:{} coll {} {} ", gHost, getpid(), static_cast<long>(syscall(SYS_gettid)),
                       levelName(level), subsysName(subsys));
  }
  line += fmt::vformat(format, args);
  line += '\n';
  std::lock_guard<std::mutex> lock(gMutex);
  writeAll(gFd, line);
}

}  // namespace detail

void versionOnce(const std::string& text) {
  static std::atomic<bool> done{false};
  bool atInfo = enabled(Level::INFO, INIT);
  if (!atInfo && !detail::gVersion.load(std::memory_order_relaxed)) return;
  if (done.exchange(true)) return;
  std::string line;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    line = fmt::format("{}:{}:{} coll {} INIT {}\n", gHost, getpid(), static_cast<long>(syscall(SYS_gettid)),
                       atInfo ? "INFO" : "VERSION", text);
  }
  std::lock_guard<std::mutex> lock(gMutex);
  writeAll(gFd, line);
}

}  // namespace coll::log
