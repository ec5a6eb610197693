// Logging: COLL_LOG(level, subsys, "format {}", args...).
//
// The level and subsystem are checked before anything is formatted, so a disabled TRACE line
// costs one relaxed atomic load. Format strings are checked at compile time (FMT_STRING). Each
// line is written with one write() call so that lines of concurrent threads and processes do not
// interleave. Configuration comes from COLL_DEBUG, COLL_DEBUG_SUBSYS and COLL_DEBUG_FILE on
// first use.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace coll::log {

enum class Level : int { NONE = 0, WARN = 1, INFO = 2, TRACE = 3 };

enum Subsys : uint32_t {
  INIT = 1u << 0,
  BOOTSTRAP = 1u << 1,
  NET = 1u << 2,
  ENV = 1u << 3,
  COLL = 1u << 4,
  TOPO = 1u << 5,
  ALL = ~0u,
};

/// Parsed logging configuration.
struct Config {
  Level level = Level::WARN;
  uint32_t subsysMask = ALL;
  std::string file;      // empty: stderr; otherwise a path with %h / %p already expanded
  bool version = false;  // COLL_DEBUG=VERSION: the version line only (as NCCL_DEBUG=VERSION)
};

/// Parses COLL_DEBUG-style text ("WARN", case-insensitive); false if unknown. "VERSION" is
/// Level::NONE with *version set (pass nullptr to refuse it).
bool parseLevel(const std::string& text, Level* out, bool* version = nullptr);
/// Parses COLL_DEBUG_SUBSYS-style text ("INIT,NET", "^NET"); false naming nothing if a name is unknown.
bool parseSubsys(const std::string& text, uint32_t* mask, std::string* badName);
/// Expands %h (host name) and %p (pid) in a COLL_DEBUG_FILE pattern.
std::string expandFilePattern(const std::string& pattern);

/// Replaces the active configuration (tests, and the first use from the environment).
void configure(const Config& config);
/// Re-reads COLL_DEBUG* from the environment; malformed values fall back to defaults with a warning.
void configureFromEnv();

/// Writes `line` once per process (the first call wins) when COLL_DEBUG is VERSION, INFO or TRACE:
/// the version line NCCL users look for at the top of a log, without adding a line per process
/// at the default level.
void versionOnce(const std::string& line);

namespace detail {
extern std::atomic<int> gLevel;
extern std::atomic<uint32_t> gMask;
extern std::atomic<bool> gConfigured;
void ensureConfigured();
void emit(Level level, Subsys subsys, fmt::string_view format, fmt::format_args args);
}  // namespace detail

/// True when a line of this level and subsystem would be written.
inline bool enabled(Level level, Subsys subsys) {
  if (!detail::gConfigured.load(std::memory_order_acquire)) detail::ensureConfigured();
  return static_cast<int>(level) <= detail::gLevel.load(std::memory_order_relaxed) &&
         (detail::gMask.load(std::memory_order_relaxed) & subsys) != 0;
}

/// Formats and writes one line; call through COLL_LOG, which checks enabled() first.
template <typename... Args>
void write(Level level, Subsys subsys, fmt::format_string<Args...> format, Args&&... args) {
  detail::emit(level, subsys, format, fmt::make_format_args(args...));
}

/// Lets through at most one line a second from one source, counting the lines held back, so that
/// a flood of bad connections does not become a flood of log lines. Not thread-safe: one owner.
class RateLimit {
 public:
  /// True when a line may be written now; *held is then the number held back since the last one.
  bool allow(uint64_t* held) {
    auto now = std::chrono::steady_clock::now();
    if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < std::chrono::seconds(1)) {
      ++held_;
      return false;
    }
    *held = held_;
    held_ = 0;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::time_point last_{};
  uint64_t held_ = 0;
};

}  // namespace coll::log

#define COLL_LOG(level, subsys, format, ...)                                                                 \
  do {                                                                                                       \
    if (::coll::log::enabled(::coll::log::Level::level, ::coll::log::subsys))                                \
      ::coll::log::write(::coll::log::Level::level, ::coll::log::subsys, FMT_STRING(format), ##__VA_ARGS__); \
  } while (0)
