#include "base/process.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace coll {

bool processGone(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;  // no /proc: only kill() can tell
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the state follows the last ')'.
  const char* close = std::strrchr(buf, ')');
  if (!close || close[1] != ' ') return false;
  const char state = close[2];
  return state == 'Z' || state == 'X';
}

}  // namespace coll
