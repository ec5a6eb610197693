#include <unistd.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "base/log.h"

using namespace coll::log;

namespace {
int gFormatCalls = 0;
struct Counted {};
}  // namespace

template <>
struct fmt::formatter<Counted> : fmt::formatter<std::string> {
  template <typename Ctx>
  auto format(const Counted&, Ctx& ctx) const {
    ++gFormatCalls;
    return fmt::formatter<std::string>::format("counted", ctx);
  }
};

TEST_CASE("log levels and subsystems parse", "[log]") {
  Level l;
  CHECK(parseLevel("info", &l));
  CHECK(l == Level::INFO);
  CHECK(parseLevel("TRACE", &l));
  CHECK_FALSE(parseLevel("LOUD", &l));

  uint32_t m = 0;
  std::string bad;
  CHECK(parseSubsys("INIT,NET", &m, &bad));
  CHECK(m == (INIT | NET));
  CHECK(parseSubsys("^NET", &m, &bad));
  CHECK((m & NET) == 0);
  CHECK((m & INIT) != 0);
  CHECK(parseSubsys("all", &m, &bad));
  CHECK(m == ALL);
  CHECK_FALSE(parseSubsys("INIT,BOGUS", &m, &bad));
  CHECK(bad == "BOGUS");
}

TEST_CASE("COLL_DEBUG_FILE patterns expand host and pid", "[log]") {
  std::string s = expandFilePattern("/tmp/coll.%h.%p.log");
  CHECK(s.find("%") == std::string::npos);
  CHECK_THAT(s, Catch::Contains(std::to_string(getpid())));
  CHECK(expandFilePattern("100%%") == "100%");
}

TEST_CASE("disabled lines are never formatted; enabled ones reach the file", "[log]") {
  std::string path = "/tmp/coll-test-log-" + std::to_string(getpid()) + ".txt";
  ::unlink(path.c_str());
  Config c;
  c.level = Level::WARN;
  c.subsysMask = ALL & ~NET;
  c.file = path;
  configure(c);

  gFormatCalls = 0;
  COLL_LOG(INFO, INIT, "hidden {}", Counted{});  // below the level
  COLL_LOG(WARN, NET, "hidden {}", Counted{});   // subsystem masked
  CHECK(gFormatCalls == 0);
  COLL_LOG(WARN, INIT, "shown {} {}", Counted{}, 7);
  CHECK(gFormatCalls == 1);

  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK_THAT(ss.str(), Catch::Contains("coll WARN INIT shown counted 7"));
  CHECK(ss.str().find("hidden") == std::string::npos);

  configure(Config{});  // back to stderr, WARN
  ::unlink(path.c_str());
}

TEST_CASE("COLL_DEBUG=VERSION prints the version line once and nothing else", "[log]") {
  Level level = Level::WARN;
  bool version = false;
  REQUIRE(parseLevel("version", &level, &version));
  CHECK(level == Level::NONE);
  CHECK(version);
  CHECK_FALSE(parseLevel("VERSION", &level));  // callers that cannot show it refuse it
  REQUIRE(parseLevel("INFO", &level, &version));
  CHECK_FALSE(version);

  std::string path = "/tmp/coll-test-version-" + std::to_string(getpid()) + ".txt";
  ::unlink(path.c_str());
  Config c;
  c.level = Level::NONE;
  c.version = true;
  c.file = path;
  configure(c);
  COLL_LOG(WARN, INIT, "a warning {}", 1);
  versionOnce("coll version test");
  versionOnce("coll version again");  // once per process
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  CHECK_THAT(ss.str(), Catch::Contains("coll VERSION INIT coll version test"));
  CHECK(ss.str().find("again") == std::string::npos);
  CHECK(ss.str().find("a warning") == std::string::npos);
  configure(Config{});
  ::unlink(path.c_str());
}
