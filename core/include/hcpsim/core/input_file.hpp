#pragma once
/// Reading a user's input file: a scenario, a calibration file, a launch script, a training log, a measured CSV.
/// Only a regular file (or standard input, "-", where a command documents it) under a stated size is read, so a
/// FIFO never hangs a command, a device such as /dev/zero never fills memory and a directory is named as such.

#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim {

/// Size limits of the inputs, in bytes. Each is far above any real file of its kind.
inline constexpr uint64_t kMaxScenarioBytes = uint64_t{16} << 20;      ///< scenario YAML (a few KiB in practice)
inline constexpr uint64_t kMaxCalibrationBytes = uint64_t{64} << 20;   ///< `hcpsim calibrate` output (a few KiB)
inline constexpr uint64_t kMaxLaunchScriptBytes = uint64_t{16} << 20;  ///< launch script or Bridge config
inline constexpr uint64_t kMaxLogBytes = uint64_t{1} << 30;            ///< training log (MBs for long runs)
inline constexpr uint64_t kMaxCsvBytes = uint64_t{1} << 30;            ///< measured per-op CSV

/// What to read and how to name it in errors.
struct InputFileSpec {
  std::string path;          ///< as the user gave it; "-" is standard input when allow_stdin
  std::string what;          ///< e.g. "scenario file", named in errors
  uint64_t max_bytes = 0;    ///< larger inputs are refused
  bool allow_stdin = false;  ///< whether "-" means standard input
  std::string fix;           ///< the fix offered when the path cannot be read, e.g. "check the path"
};

/// The whole content of spec.path.
/// @throws InputError (file = spec.path, empty key; "cannot open the WHAT" when it does not exist or cannot be
///   opened) when the path does not exist, is a directory, is not a regular
///   file (a FIFO, a device, a socket), cannot be opened, or holds more than spec.max_bytes (standard input is
///   read up to the limit and refused beyond it).
std::string read_input_file(const InputFileSpec& spec);

/// Records `path` as an input of this process (read_input_file records every file it reads; readers that open a
/// file themselves, such as the HDF5 dump reader, call this), so that no output is written over it.
void note_input_file(const std::string& path);

/// The input files recorded so far, in the order first read. Used only to refuse outputs (never printed).
std::vector<std::string> input_files_read();

}  // namespace hcpsim
