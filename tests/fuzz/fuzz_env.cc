// Fuzzes the environment parsers: the input is an environment, one NAME=VALUE per line. It goes
// to resolveLaunchEnv (coll-run, torchrun, Open MPI, Slurm, PMI variables; collCommInitFromEnv),
// and every value to the parsers of COLL_* variables: param::parseInt/parseBool (every Int and
// Bool parameter), COLL_ALGO/COLL_PROTO (parseAlgoSpec/parseProtoSpec), COLL_SOCKET_IFNAME
// (IfnameFilter) and COLL_DEBUG/COLL_DEBUG_SUBSYS (log::parseLevel/parseSubsys).
#include <map>
#include <string>

#include "algorithms/tuner.h"
#include "base/ifaddr.h"
#include "base/log.h"
#include "base/param.h"
#include "bootstrap/launch_env.h"
#include "fuzz_check.h"

namespace coll::fuzz {
namespace {

void launcher(const std::map<std::string, std::string>& vars) {
  auto lookup = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  Result<LaunchEnv> env = resolveLaunchEnv(lookup);
  if (!env.isOk()) {
    COLL_FUZZ_CHECK(env.status().code() == collInvalidArgument);
    return;
  }
  // What collCommInitFromEnv relies on before it starts or reaches the root.
  COLL_FUZZ_CHECK(env->worldSize >= 1 && env->worldSize <= (1 << 24));
  COLL_FUZZ_CHECK(env->rank >= 0 && env->rank < env->worldSize);
  COLL_FUZZ_CHECK(env->localRank >= -1 && env->localRank < env->worldSize);
  if (env->masterAddr.empty())
    COLL_FUZZ_CHECK(env->worldSize == 1 && env->masterPort == 0);
  else
    COLL_FUZZ_CHECK(env->masterPort >= 1 && env->masterPort <= 65535);
}

void value(const std::string& v) {
  int64_t i;
  if (param::parseInt(v, &i)) {
    int64_t back;
    COLL_FUZZ_CHECK(param::parseInt(std::to_string(i), &back) && back == i);
  }
  bool b;
  (void)param::parseBool(v, &b);

  algorithms::AlgoFilter filter;
  std::string error, notes;
  if (algorithms::parseAlgoSpec(v, &filter, &error, &notes)) {
    // COLL_ALGO never leaves a collective without an algorithm: the tuner must find one.
    for (int c = 0; c < algorithms::kNumCollectives; ++c) {
      algorithms::Algorithm a;
      COLL_FUZZ_CHECK(algorithms::chooseAlgorithm(static_cast<algorithms::Collective>(c), 4, 4096,
                                                  algorithms::shmModel(), filter, &a));
      COLL_FUZZ_CHECK(algorithms::supports(a, static_cast<algorithms::Collective>(c)));
    }
  } else {
    COLL_FUZZ_CHECK(!error.empty());
  }
  algorithms::ProtoSet proto;
  error.clear();
  if (!algorithms::parseProtoSpec(v, &proto, &error, &notes)) COLL_FUZZ_CHECK(!error.empty());

  net::IfnameFilter f = net::IfnameFilter::parse(v);
  for (const char* name : {"eth0", "lo", "ib0", "docker0", ""}) (void)f.matches(name);

  log::Level level;
  bool version;
  (void)log::parseLevel(v, &level, &version);
  uint32_t mask;
  std::string bad;
  (void)log::parseSubsys(v, &mask, &bad);
}

}  // namespace

int env(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> vars;
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t eq = line.find('=');
    // As in a real environment, a value ends at its first NUL (getenv returns a C string).
    std::string name = line.substr(0, eq), v = eq == std::string::npos ? "" : line.substr(eq + 1);
    v = v.c_str();
    if (eq != std::string::npos) vars[name] = v;
    value(v);
    start = end + 1;
  }
  launcher(vars);
  return 0;
}

}  // namespace coll::fuzz

COLL_FUZZ_ENTRY(coll::fuzz::env)
