#pragma once
/// The one output writer every command uses. A file is written completely under a unique temporary name created
/// exclusively in the target's directory (mkstemp: a planted name or symlink is never followed, two runs never share
/// a temporary), flushed and fsynced, then renamed onto the final path, so a reader never sees a half-written file
/// and a failed run leaves the previous file (or none) in place. Only an absent path or a regular file is replaced;
/// a character device or FIFO (/dev/null, /dev/stdout, a pipe with a reader) is written in place; anything else
/// (a directory, a dangling symlink, a socket) is refused. A symlink to a regular file is replaced through its
/// target, so the link stays. The temporary is removed on every error path and on SIGINT / SIGTERM.

#include <string>
#include <vector>

namespace hcpsim {

/// What an output path names, as the writer treats it.
enum class OutputKind { absent, regular, character_device, fifo, refused };
/// "a new file" | "a regular file" | "a character device" | "a FIFO" | "refused".
std::string to_string(OutputKind k);

/// An output path classified: `path` is the file to write (a symlink resolved to its target), `reason` says why a
/// `refused` path is refused.
struct OutputTarget {
  OutputKind kind = OutputKind::absent;
  std::string path;
  std::string reason;
};

/// Classifies `path` (lstat, then stat through a symlink). Never throws.
OutputTarget classify_output(const std::string& path);

/// Refuses to write over one of this process's inputs (core/input_file.hpp input_files_read: the same file by
/// device and inode, through any path or link). create_output_temp and write_output_file call it.
/// @throws InputError at `path` (key `key`) naming the input.
void refuse_if_input(const std::string& path, const std::string& what, const std::string& key = "");

/// One output a command was asked to write: its path (empty: not asked for), the option that named it ("--trace",
/// "-o") and what it is ("trace", "summary"), for messages.
struct RequestedOutput {
  std::string path;
  std::string option;
  std::string what;
  /// True for outputs that must be regular files (HDF5 files, which are written with seeks): a character device
  /// or FIFO (/dev/null, /dev/stdout) is then refused here, before the work, not when the file is written.
  bool regular_file_only = false;
};

/// The checks a command runs on all its outputs before any work, so that a bad path costs nothing: each
/// non-empty path's directory exists, the path is not refused (classify_output: a directory, a dangling
/// symlink, a socket), it is not one of the command's inputs read so far (refuse_if_input), and no two outputs
/// name the same file (by path, or by device and inode when both exist), which would otherwise leave only the one
/// written last. Character devices and FIFOs (/dev/null) may be named by several outputs, except by a
/// regular_file_only output.
/// @throws InputError located at the offending path, keyed by its option, with a fix.
void check_requested_outputs(const std::vector<RequestedOutput>& outputs);

/// Creates an empty, uniquely named temporary file next to `path` (`path` + ".XXXXXX", exclusively, permissions
/// 0666 less the umask) and registers it for removal on SIGINT / SIGTERM. For writers with their own file API
/// (HDF5): write it, then commit_output_file, or discard_output_temp on failure.
/// @throws InputError located at `path`, with the OS reason, when it cannot be created, or when `path` is one of
///   the command's inputs (refuse_if_input).
std::string create_output_temp(const std::string& path, const std::string& what, const std::string& key = "");

/// Writes `text` to `path` as the header describes.
/// @param what  what the file is, for the message ("trace", "summary", "JUnit file", ...).
/// @param key   the command-line option that named the file ("--trace"), or empty.
/// @throws InputError located at `path`, with the OS reason and a fix, if the path is refused, the temporary file
///   cannot be created, written, fsynced or closed (it is removed), or cannot be renamed onto `path`, or when `path`
///   is one of the command's inputs (refuse_if_input).
void write_output_file(const std::string& path, const std::string& text, const std::string& what,
                       const std::string& key = "");

/// write_output_file for the one output that replaces the command's own input on request (`replay --update`
/// rewriting a scenario's goldens): the same temporary-then-rename semantics, without refuse_if_input.
void rewrite_input_file(const std::string& path, const std::string& text, const std::string& what,
                        const std::string& key = "");

/// Renames a completed temporary file (from create_output_temp) onto `path` (through a symlink to its target).
/// @throws InputError located at `path` if `path` is not absent or a regular file, or the rename fails;
///   `temp_path` is removed first.
void commit_output_file(const std::string& temp_path, const std::string& path, const std::string& what,
                        const std::string& key = "");

/// Removes a temporary file from create_output_temp and forgets it (an error path of a writer).
void discard_output_temp(const std::string& temp_path);

}  // namespace hcpsim
