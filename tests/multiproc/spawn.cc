#include "multiproc/spawn.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

namespace colltest {

int Outcome::exitCode() const {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::vector<Outcome> runAll(const std::vector<Command>& commands, double timeoutSec) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::vector<Outcome> out(commands.size());
  std::vector<pid_t> pids(commands.size(), -1);
  std::vector<int> fds(commands.size(), -1);
  for (size_t i = 0; i < commands.size(); ++i) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) continue;
    pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      dup2(p[1], STDOUT_FILENO);
      dup2(p[1], STDERR_FILENO);
      for (const auto& [k, v] : commands[i].env) setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      for (const auto& a : commands[i].argv) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    ::close(p[1]);
    pids[i] = pid;
    fds[i] = p[0];
  }
  auto deadline = start + std::chrono::milliseconds(static_cast<int>(timeoutSec * 1000));
  size_t left = commands.size();
  std::vector<bool> done(commands.size(), false);
  std::vector<bool> exited(commands.size(), false);
  while (left > 0) {
    std::vector<pollfd> pf;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i] >= 0) pf.push_back({fds[i], POLLIN, static_cast<short>(i)});
    ::poll(pf.data(), pf.size(), 50);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0) continue;
      pollfd one{fds[i], POLLIN, 0};
      if (::poll(&one, 1, 0) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i], buf, sizeof(buf));
      if (n > 0)
        out[i].output.append(buf, static_cast<size_t>(n));
      else {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i] || pids[i] < 0) continue;
      // Reaping and reading EOF happen in either order; the status must be kept once reaped.
      int st;
      if (!exited[i] && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        out[i].status = st;
        out[i].seconds = std::chrono::duration<double>(Clock::now() - start).count();
        exited[i] = true;
      }
      if (exited[i] && fds[i] < 0) {
        done[i] = true;
        --left;
      }
    }
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i] || pids[i] < 0) continue;
        ::kill(-pids[i], SIGKILL);
        int st;
        if (!exited[i] && waitpid(pids[i], &st, 0) == pids[i]) {
          out[i].status = st;
          out[i].killedAtDeadline = true;
          out[i].seconds = timeoutSec;
        }
        if (fds[i] >= 0) ::close(fds[i]);
        fds[i] = -1;
        done[i] = true;
        --left;
      }
    }
  }
  return out;
}

Outcome runOne(const Command& command, double timeoutSec) { return runAll({command}, timeoutSec)[0]; }

std::vector<Command> directJob(const std::string& program, int n, const std::vector<std::string>& args,
                               const std::vector<std::pair<std::string, std::string>>& extra) {
  int port = freePort();
  std::vector<Command> cmds;
  for (int r = 0; r < n; ++r) {
    std::vector<std::pair<std::string, std::string>> env{{"COLL_RANK", std::to_string(r)},
                                                         {"COLL_WORLD_SIZE", std::to_string(n)},
                                                         {"COLL_MASTER_ADDR", "127.0.0.1"},
                                                         {"COLL_MASTER_PORT", std::to_string(port)},
                                                         {"COLL_BOOTSTRAP_SECRET", "5eed"}};
    env.insert(env.end(), extra.begin(), extra.end());
    std::vector<std::string> argv{program};
    argv.insert(argv.end(), args.begin(), args.end());
    cmds.push_back({argv, env});
  }
  return cmds;
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::vector<std::string> processesMatching(const std::string& needle) {
  std::vector<std::string> found;
  DIR* d = opendir("/proc");
  if (!d) return found;
  while (dirent* e = readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) found.push_back(std::to_string(pid) + ": " + cmd);
  }
  closedir(d);
  return found;
}

}  // namespace colltest
