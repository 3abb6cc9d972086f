// hcpsim command line: the only place that catches exceptions and picks exit codes.
// Exit codes: 0 ok, 1 verification or regression failed, 2 bad input, 3 device error or no device,
// 4 internal error (a bug in hcpsim).

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "app_common.hpp"
#include "huge_pages.hpp"
#include "commands.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/dump.hpp"

namespace {

/// Set when main() returns: an exit() before that came from a library, e.g. libgomp ends the process with exit(1)
/// when it cannot start an OpenMP thread ("libgomp: Thread creation failed: ..." on stderr). That is not a
/// verification failure (exit 1) but an internal error with its reason: exit 4.
bool main_returned = false;

void exit_guard() {
  if (main_returned) return;
  std::fflush(nullptr);
  std::fputs("internal error: the process was ended from inside a library (the message above says why, e.g. an "
             "OpenMP thread that could not start); fix: use fewer --threads or free memory\n",
             stderr);
  _exit(hcpsim::app::kExitInternal);
}

/// Keeps freed memory in the process for the rest of the command (glibc only; elsewhere nothing changes).
/// The oracle and the simulator free and reallocate large buffers (per-rank tensors, op and flow arrays) many
/// times; glibc's defaults serve every block above 128 KiB - 32 MiB (the dynamic threshold) with its own mmap and
/// return it on free, and trim the heap top above 128 KiB, so each reuse pays the kernel's page faults again on
/// fresh zero pages. mallopt(3): M_MMAP_MAX = 0 serves large blocks from the heap, M_TRIM_THRESHOLD stops
/// returning its top. Peak resident memory is unchanged (freed blocks are reused, not added); results do not
/// depend on it. Measured in bench/RESULTS.md ("Allocator settings"): default verify 12.5 -> 8.4-8.9 s, page
/// faults 396k -> 164-168k; simulate at CP = 1024 3.6 -> 2.2 s.
void keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

/// Restarts the process once with glibc's malloc asked to back its heap with transparent huge pages
/// (GLIBC_TUNABLES glibc.malloc.hugetlb=1, glibc >= 2.35: malloc madvise(MADV_HUGEPAGE)s the memory it takes from
/// the kernel). The simulator touches hundreds of MB to GB of fresh heap (every rank's ops, the engine's per-op
/// state, the flow records) and, with 4 KiB pages, pays one page fault per 4 KiB and a TLB miss on most accesses
/// to another rank's ops; with 2 MiB pages both drop ~500x. A tunable is read only at process start, hence the
/// restart (execv of /proc/self/exe with the same arguments and the environment plus the tunable), done before
/// anything else. Nothing changes when the tunable is already set (also by the user, to any value), when
/// HCPSIM_NO_HUGEPAGES is set, when the kernel's THP mode is "never" (the advice is then ignored), or when the
/// restart fails (the command goes on in this process). Results do not depend on it. Measured in
/// bench/RESULTS.md ("Huge pages for the heap").
void restart_with_huge_pages(char** argv) {
#if defined(__GLIBC__) && defined(__linux__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  const char* set = std::getenv("GLIBC_TUNABLES");
  const std::optional<std::string> value =
      hcpsim::app::huge_page_tunables(set, std::getenv("HCPSIM_NO_HUGEPAGES") != nullptr);
  if (!value) return;
  const bool had = set != nullptr;
  const std::string before = had ? set : "";
  if (setenv("GLIBC_TUNABLES", value->c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Only reached when execv failed: go on without huge pages, and leave the environment as it was.
  if (had) {
    setenv("GLIBC_TUNABLES", before.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
#else
  (void)argv;
#endif
}

int run_main(int argc, char** argv) {
  try {
    return hcpsim::app::run(argc, argv);
  } catch (const hcpsim::InputError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return hcpsim::app::kExitBadInput;
  } catch (const hcpsim::DeviceError& e) {
    fmt::print(stderr, "device error: {}\n", e.what());
    return hcpsim::app::kExitDevice;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory; fix: shorten model.seq_length or use fewer heads for the oracle\n");
    return hcpsim::app::kExitInternal;
  } catch (const std::filesystem::filesystem_error& e) {  // a path the user gave (a symlink loop, a bad directory)
    const std::string path = e.path1().empty() ? std::string("command line") : e.path1().string();
    fmt::print(stderr, "error: {}: {}; fix: check the path\n", path, e.code().message());
    return hcpsim::app::kExitBadInput;
  } catch (const std::system_error& e) {  // std::thread could not start one (EAGAIN: the thread limit)
    fmt::print(stderr, "internal error: could not start a thread: {}; fix: use fewer --threads\n", e.what());
    return hcpsim::app::kExitInternal;
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", e.what());
    return hcpsim::app::kExitInternal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  restart_with_huge_pages(argv);
  // Before any output: piped or redirected stdout flushes at every newline, so CI logs follow the run (fmt::print
  // and std::cout, synchronised with stdio, both write through this FILE). A terminal is line-buffered already.
  if (isatty(STDOUT_FILENO) != 1) std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::atexit(exit_guard);
  hcpsim::skip_hdf5_shutdown_at_exit();  // before any HDF5 call
  keep_freed_memory();
  const int code = run_main(argc, argv);
  main_returned = true;
  return code;
}
