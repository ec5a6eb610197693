#include "bootstrap/launch_env.h"

#include <cerrno>
#include <cstdlib>

#include "base/param.h"
#include "bootstrap/unique_id.h"

namespace coll {
namespace {

struct Launcher {
  const char* name;
  const char* rankVar;
  const char* sizeVar;
  const char* localVar;  // nullptr: the launcher has none
};

constexpr Launcher kLaunchers[] = {
    {"coll-run", "COLL_RANK", "COLL_WORLD_SIZE", "COLL_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"PMI", "PMI_RANK", "PMI_SIZE", nullptr},
};

// Job identifiers that differ between jobs, mixed into a derived secret so that two jobs that
// reuse a master port do not accept each other's ranks.
constexpr const char* kJobIdVars[] = {"SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID", "PMI_JOBID",
                                      "PMIX_NAMESPACE"};

const char* get(const EnvLookup& lookup, const char* name) {
  const char* v = lookup(name);
  return (v && *v) ? v : nullptr;
}

Result<int> intVar(const EnvLookup& lookup, const char* name, int64_t lo, int64_t hi) {
  const char* v = get(lookup, name);
  int64_t x;
  if (!v || !param::parseInt(v, &x))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("{}='{}' is not an integer"), name, v ? v : "");
  if (x < lo || x > hi)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("{}={} is outside [{}, {}]"), name, x, lo, hi);
  return static_cast<int>(x);
}

Status resolveMaster(const EnvLookup& lookup, LaunchEnv* env) {
  const char* pairs[][2] = {{"COLL_MASTER_ADDR", "COLL_MASTER_PORT"}, {"MASTER_ADDR", "MASTER_PORT"}};
  for (const auto& p : pairs) {
    const char* addr = get(lookup, p[0]);
    const char* port = get(lookup, p[1]);
    if (!addr && !port) continue;
    if (!addr) return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is set but {} is not"), p[1], p[0]);
    if (!port) return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is set but {} is not"), p[0], p[1]);
    COLL_ASSIGN_OR_RETURN(env->masterPort, intVar(lookup, p[1], 1, 65535));
    env->masterAddr = addr;
    return Status::ok();
  }
  if (env->worldSize == 1) return Status::ok();  // a single rank needs nobody to find it
  return COLL_ERROR(collInvalidArgument,
                    FMT_STRING("no master address: {} gives rank and size but not where rank 0 listens; set "
                               "COLL_MASTER_ADDR and COLL_MASTER_PORT (or MASTER_ADDR and MASTER_PORT)"),
                    env->source);
}

Status resolveSecret(const EnvLookup& lookup, LaunchEnv* env) {
  if (const char* s = get(lookup, "COLL_BOOTSTRAP_SECRET")) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 16);
    if (errno != 0 || end == s || *end != '\0')
      return COLL_ERROR(collInvalidArgument, FMT_STRING("COLL_BOOTSTRAP_SECRET='{}' is not a hexadecimal number"), s);
    env->secret = v;
    return Status::ok();
  }
  std::string material = fmt::format("{}|{}|{}", env->masterAddr, env->masterPort, env->worldSize);
  for (const char* var : kJobIdVars)
    if (const char* v = get(lookup, var)) material += fmt::format("|{}={}", var, v);
  env->secret = fnv1a(material.data(), material.size());
  env->secretDerived = true;
  return Status::ok();
}

}  // namespace

Result<LaunchEnv> resolveLaunchEnv(const EnvLookup& lookup) {
  for (const Launcher& l : kLaunchers) {
    bool hasRank = get(lookup, l.rankVar) != nullptr;
    bool hasSize = get(lookup, l.sizeVar) != nullptr;
    if (!hasRank && !hasSize) continue;
    if (!hasRank)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is set but {} is not ({} environment)"), l.sizeVar,
                        l.rankVar, l.name);
    if (!hasSize)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is set but {} is not ({} environment)"), l.rankVar,
                        l.sizeVar, l.name);
    LaunchEnv env;
    env.source = l.name;
    COLL_ASSIGN_OR_RETURN(env.worldSize, intVar(lookup, l.sizeVar, 1, 1 << 24));
    COLL_ASSIGN_OR_RETURN(env.rank, intVar(lookup, l.rankVar, 0, 1 << 24));
    if (env.rank >= env.worldSize)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("{}={} contradicts {}={}: a rank must be below the size"),
                        l.rankVar, env.rank, l.sizeVar, env.worldSize);
    if (l.localVar && get(lookup, l.localVar)) {
      COLL_ASSIGN_OR_RETURN(env.localRank, intVar(lookup, l.localVar, 0, env.worldSize - 1));
    }
    COLL_TRY(resolveMaster(lookup, &env));
    COLL_TRY(resolveSecret(lookup, &env));
    return env;
  }
  return COLL_ERROR(collInvalidArgument,
                    FMT_STRING("no launcher environment: none of COLL_RANK/COLL_WORLD_SIZE (coll-run), RANK/WORLD_SIZE "
                               "(torchrun), OMPI_COMM_WORLD_RANK/_SIZE (Open MPI), SLURM_PROCID/SLURM_NTASKS (Slurm) "
                               "or PMI_RANK/PMI_SIZE (PMI) is set"));
}

}  // namespace coll
