#include "hcpsim/oracles/isolated_read.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <system_error>

#include <algorithm>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

double isolated_read_timeout_s(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  const double size = ec ? 0.0 : static_cast<double>(bytes);
  return kIsolatedReadBaseTimeout_s + size / kIsolatedReadSlowestBytesPerS;
}

namespace {

/// Waits for `pid` up to `timeout_s` (polling with a sleep that grows to 50 ms); false on timeout, the child still
/// running. Only the error path depends on the clock: a child that finishes gives the same result at any speed.
bool wait_for_child(pid_t pid, int& status, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  long sleep_ns = 1'000'000;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) {
      status = 0;  // not our child any more: treat as a clean exit, the caller's own read still checks the file
      return true;
    }
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    if (waited.count() > timeout_s) return false;
    const timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min(sleep_ns * 2, 50'000'000L);
  }
}

/// `s` with three significant digits ("0.2", "60", "1.23e+03").
std::string seconds_text(double s) {
  std::ostringstream out;
  out << std::setprecision(3) << s;
  return out.str();
}

}  // namespace

void probe_in_child(const std::string& path, const std::function<void()>& probe) {
  probe_in_child(path, probe, isolated_read_timeout_s(path));
}

void probe_in_child(const std::string& path, const std::function<void()>& probe, double timeout_s) {
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
  if (!wait_for_child(pid, status, timeout_s)) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw InputError(SourceLoc{path, 0, 0, {}}, "",
                     "reading this HDF5 file did not finish within " + seconds_text(timeout_s) +
                         " s (the HDF5 library hangs on it); nothing of it was used",
                     "the file is corrupt: rewrite it (hcpsim verify --dump, or the README's h5py recipe)");
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

DumpContents read_dump_isolated(const std::string& path, const std::vector<std::string>& tensors,
                                bool with_reference) {
  probe_in_child(path, [&] { (void)read_dump(path, tensors, with_reference); });
  return read_dump(path, tensors, with_reference);
}

RankFile read_rank_file_isolated(const std::string& path) {
  probe_in_child(path, [&] { (void)read_rank_file(path); });
  return read_rank_file(path);
}

}  // namespace hcpsim
