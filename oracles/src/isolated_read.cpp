#include "hcpsim/oracles/isolated_read.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

void probe_in_child(const std::string& path, const std::function<void()>& probe) {
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = fork();
  if (pid < 0) return;  // no child: the caller's own read still runs every check
  if (pid == 0) {
    int code = 0;
    try {
      probe();
    } catch (...) {
      code = 1;  // an ordinary error: the parent's read reports it
    }
    _exit(code);  // no atexit handlers, no flushing of the parent's streams
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return;
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    throw InputError(SourceLoc{path, 0, 0, {}}, "",
                     "reading this HDF5 file crashed the HDF5 library (signal " + std::to_string(sig) + ", " +
                         (name ? name : "unknown") + "); nothing of it was used",
                     "the file is corrupt: rewrite it (hcpsim verify --dump, or the README's h5py recipe)");
  }
  if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 1))
    throw InputError(SourceLoc{path, 0, 0, {}}, "",
                     "reading this HDF5 file ended its reader abnormally (status " + std::to_string(status) + ")",
                     "the file is corrupt: rewrite it (hcpsim verify --dump, or the README's h5py recipe)");
}

DumpContents read_dump_isolated(const std::string& path, const std::vector<std::string>& tensors) {
  probe_in_child(path, [&] { (void)read_dump(path, tensors); });
  return read_dump(path, tensors);
}

RankFile read_rank_file_isolated(const std::string& path) {
  probe_in_child(path, [&] { (void)read_rank_file(path); });
  return read_rank_file(path);
}

}  // namespace hcpsim
