// Whether a process on this host has died.
#pragma once

namespace coll {

/// True when pid no longer runs: gone (ESRCH), or exited and not yet reaped by its parent (a
/// zombie, state Z or X in /proc/<pid>/stat). kill(pid, 0) alone succeeds on a zombie, and a
/// launcher busy elsewhere (a Python multiprocessing parent, a shell script) may reap late.
bool processGone(int pid);

}  // namespace coll
