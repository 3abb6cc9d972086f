#pragma once
/// Reading user-supplied HDF5 files in a child process first, so that a crash inside libhdf5 on a corrupt file (a
/// heap overflow or segfault the library's own checks miss, docs/robustness.md "HDF5 inputs") becomes an
/// InputError naming the file (exit 2) instead of killing hcpsim with a signal.

#include <functional>
#include <string>
#include <vector>

#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/rank_file.hpp"

namespace hcpsim {

/// Runs `probe` in a forked child process (which only reads, writes nothing and ends with _exit) and waits for it.
/// A probe that returns or throws is a clean outcome: the caller then reads the file itself, and gets the same
/// result or error deterministically. When fork() is unavailable the probe is skipped.
/// @throws InputError located at `path` when the child was killed by a signal (naming it) or ended abnormally.
void probe_in_child(const std::string& path, const std::function<void()>& probe);

/// probe_in_child with an explicit limit: a child still running after `timeout_s` seconds is killed (SIGKILL).
/// @throws InputError located at `path` naming the limit when the child did not finish in time (a hang inside
///   libhdf5), besides the errors above.
void probe_in_child(const std::string& path, const std::function<void()>& probe, double timeout_s);

/// The seconds a probe of `path` may take: kIsolatedReadBaseTimeout_s + file size / kIsolatedReadSlowestBytesPerS
/// (a missing file counts as empty).
double isolated_read_timeout_s(const std::string& path);
/// Fixed part of the probe's limit: far above the < 1 s a valid dump of the tests takes (bench/RESULTS.md).
inline constexpr double kIsolatedReadBaseTimeout_s = 60.0;
/// Slowest read rate the limit allows for: 20 MB/s, a tenth of a spinning disk's sequential rate (assumption), so a
/// valid large dump is never cut off.
inline constexpr double kIsolatedReadSlowestBytesPerS = 20e6;

/// read_dump(path, tensors, with_reference) after a probe of the same read in a child process (probe_in_child).
/// @throws InputError as read_dump does, or when the read crashes the child.
DumpContents read_dump_isolated(const std::string& path, const std::vector<std::string>& tensors = {},
                                bool with_reference = true);

/// read_rank_file(path) after a probe of the same read in a child process (probe_in_child).
/// @throws InputError as read_rank_file does, or when the read crashes the child.
RankFile read_rank_file_isolated(const std::string& path);

}  // namespace hcpsim
