#include "topo/cpu_place.h"

#include <dirent.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace coll::topo {
namespace {

int packageOfCpu(int cpu) {
  std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/physical_package_id";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return -1;
  int id = -1;
  if (std::fscanf(f, "%d", &id) != 1) id = -1;
  std::fclose(f);
  return id;
}

// sysfs links each CPU to its node as a "nodeN" entry in the CPU's directory.
int numaOfCpu(int cpu) {
  std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
  DIR* d = opendir(path.c_str());
  if (!d) return -1;
  int node = -1;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "node", 4) != 0) continue;
    char* end = nullptr;
    long v = std::strtol(e->d_name + 4, &end, 10);
    if (end != e->d_name + 4 && *end == '\0') {
      node = static_cast<int>(v);
      break;
    }
  }
  closedir(d);
  return node;
}

// The common value, -1 when values differ or one is unknown.
void merge(int* into, int value, bool first) {
  if (first)
    *into = value;
  else if (*into != value)
    *into = -1;
}

}  // namespace

CpuPlace cpuPlace() {
  CpuPlace p;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return p;
  bool first = true;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    merge(&p.package, packageOfCpu(cpu), first);
    merge(&p.numa, numaOfCpu(cpu), first);
    first = false;
  }
  return p;
}

}  // namespace coll::topo
