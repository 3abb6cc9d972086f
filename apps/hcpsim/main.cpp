// hcpsim command line: the only place that catches exceptions and picks exit codes.
// Exit codes: 0 ok, 1 verification or regression failed, 2 bad input, 3 device error or no device,
// 4 internal error (a bug in hcpsim).

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <exception>

#include "app_common.hpp"
#include "commands.hpp"
#include "hcpsim/core/error.hpp"

int main(int argc, char** argv) {
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
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", e.what());
    return hcpsim::app::kExitInternal;
  }
}
