// Runs programs as separate processes for the process tests: concurrently, with extra
// environment variables, capturing their merged output, killing them at a deadline.
#pragma once

#include <string>
#include <vector>

namespace colltest {

struct Command {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env = {};  // added to (or replacing in) ours
};

struct Outcome {
  int status = -1;  // as from waitpid
  std::string output;
  double seconds = 0;
  bool killedAtDeadline = false;
  int exitCode() const;  // exit status, or 128+signal
};

/// Starts every command at once and waits for all, up to timeoutSec (then SIGKILL).
std::vector<Outcome> runAll(const std::vector<Command>& commands, double timeoutSec);
/// runAll of one command.
Outcome runOne(const Command& command, double timeoutSec);
/// A free TCP port on 127.0.0.1 (free when asked; good enough for tests).
int freePort();
/// A job of n ranks of `program args...` started directly with the launcher contract's variables
/// (master 127.0.0.1 on a free port, secret 5eed) plus extra: not through coll-run, which would
/// end the survivors as soon as one rank fails.
std::vector<Command> directJob(const std::string& program, int n, const std::vector<std::string>& args,
                               const std::vector<std::pair<std::string, std::string>>& extra);
/// Names of processes whose command line mentions `needle` (stray-process checks).
std::vector<std::string> processesMatching(const std::string& needle);

}  // namespace colltest
