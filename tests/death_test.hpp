#pragma once
// Runs a callable in a forked child and reports how it ended, for tests of HCPSIM_ASSERT aborts.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

namespace hcpsim::test {

struct ChildEnd {
  bool aborted = false;  ///< died of SIGABRT
  std::string stderr_text;
};

/// Runs `fn` in a child process with stderr captured; the child's SIGABRT is not seen by Catch2.
template <class Fn>
ChildEnd run_in_child(Fn fn) {
  int fds[2];
  ChildEnd end;
  if (pipe(fds) != 0) return end;
  const pid_t pid = fork();
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    fn();
    _exit(0);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) end.stderr_text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  end.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return end;
}

}  // namespace hcpsim::test
