#pragma once
/// Subcommands of the hcpsim command line.

namespace hcpsim::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;    ///< verification or regression failed
inline constexpr int kExitBadInput = 2;  ///< bad scenario, override, option or configuration
inline constexpr int kExitDevice = 3;    ///< device error or no device
inline constexpr int kExitInternal = 4;  ///< a bug in hcpsim

/// Parses argv and runs one subcommand. @return the exit code. @throws InputError, DeviceError.
int run(int argc, char** argv);

}  // namespace hcpsim::app
