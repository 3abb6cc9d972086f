#pragma once
/// The one output writer every command uses: a file is written completely under a temporary name in the
/// same directory, then renamed onto its final path, so a reader never sees a half-written file and a failed
/// run leaves the previous file (or none) in place.

#include <string>

namespace hcpsim {

/// The temporary name an output is written under before the rename: `path` + ".tmp".
std::string output_temp_path(const std::string& path);

/// Writes `text` to `path` through output_temp_path(path) and a rename.
/// @param what  what the file is, for the message ("trace", "summary", "JUnit file", ...).
/// @param key   the command-line option that named the file ("--trace"), or empty.
/// @throws InputError located at `path`, with the OS reason and a fix, if the temporary file cannot be opened,
///   written or closed, or cannot be renamed onto `path`; the temporary file is removed first.
void write_output_file(const std::string& path, const std::string& text, const std::string& what,
                       const std::string& key = "");

/// Renames a completed temporary file (written by a library with its own writer, e.g. HDF5) onto `path`.
/// @throws InputError located at `path` if the rename fails; `temp_path` is removed first.
void commit_output_file(const std::string& temp_path, const std::string& path, const std::string& what,
                        const std::string& key = "");

}  // namespace hcpsim
