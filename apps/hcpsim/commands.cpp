#include "commands.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "admission.hpp"
#include "app_common.hpp"
#include "gpu_runner.hpp"
#include "hcpsim/io/provenance.hpp"

namespace hcpsim::app {

int run(int argc, char** argv) {
  CLI::App app{"hcpsim: hierarchical context parallelism (a2a+p2p) simulator and correctness oracle"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");
  add_quiet_flag(&app);  // before the command (hcpsim --quiet plan ...); long commands also take it after
  int exit_code = -1;
  add_validate_command(app, exit_code);
  add_verify_command(app, exit_code);
  add_simulate_command(app, exit_code);
  add_compare_command(app, exit_code);
  add_shard_command(app, exit_code);
  add_gather_command(app, exit_code);
  add_replay_command(app, exit_code);
  add_import_command(app, exit_code);
  add_check_log_command(app, exit_code);
  add_calibrate_command(app, exit_code);
  add_plan_command(app, exit_code);
  add_diff_command(app, exit_code);
  add_collective_command(app, exit_code);
  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // In the form of every other bad-input message: what is wrong, then where to look for the fix.
    std::string command = "hcpsim";
    for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
      sub = sub->get_subcommands().front();
      command += " " + sub->get_name();
    }
    std::string what = e.what();
    // CLI11's words for an option given twice, also through an alias (simulate's --summary and --json).
    const auto twice = what.find(": At Most 1 required but received ");
    if (twice != std::string::npos) {
      const std::string option = what.substr(0, twice);
      fmt::print(stderr,
                 "error: command line: {} is given more than once (an option and its alias are one option); fix: "
                 "give it once (see '{} --help')\n",
                 option, command);
      return kExitBadInput;
    }
    fmt::print(stderr, "error: command line: {}; fix: see '{} --help' for the options and the values they take\n",
               what, command);
    return kExitBadInput;
  }
  if (version) {
    fmt::print("hcpsim {} (x86 level {}, CUDA {})\n", hcpsim_version(), build_x86_level(),
               gpu_backend_built() ? "on" : "off");
    return kExitOk;
  }
  if (exit_code >= 0) return exit_code;
  fmt::print("{}", app.help());
  return kExitBadInput;
}

}  // namespace hcpsim::app
