#pragma once
/// Entry point of the hcpsim command line. Exit codes are in app_common.hpp.

namespace hcpsim::app {

/// Parses argv and runs one subcommand. @return the exit code. @throws InputError, DeviceError.
int run(int argc, char** argv);

}  // namespace hcpsim::app
