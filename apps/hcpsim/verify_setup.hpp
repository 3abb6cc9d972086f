#pragma once
/// Everything `hcpsim verify` checks before it runs anything: its options, the scenario, the backend and the
/// `--reference` dump (all validation before any output file is opened).

#include <optional>
#include <string>

#include "app_common.hpp"
#include "gpu_runner.hpp"
#include "hcpsim/config/scenario.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/oracles/dump.hpp"

namespace hcpsim::app {

/// Options of `hcpsim verify` besides the scenario.
struct VerifyArgs {
  std::string backend = "cpu";
  int threads = 1;  ///< --threads; the command sets default_threads() (admission.hpp) before parsing
  std::string dtype;   ///< empty: oracle.dtype
  std::string inject;  ///< empty: oracle.inject (or none); "list" prints the injectors
  std::string json_path;
  std::string dump_path;  ///< empty: no HDF5 dump
  int devices = 1;             ///< GPU backend: 1 = single-device, N = NCCL on N GPUs (one per CP rank)
  std::string kernels = "auto";  ///< GPU backend: auto (tensor cores where supported) | clear
  std::string reference_path;  ///< a dump whose inputs and fp64 reference replace the generated ones
  std::string trace_path;      ///< GPU backend: measured Chrome trace
  std::string ops_csv_path;    ///< GPU backend: measured per-op CSV (hcpsim calibrate input)
  std::string max_memory;      ///< --max-memory text; empty: the machine's default (admission.hpp)
};

/// The inputs and reference of a `--reference` dump, checked against the run.
struct LoadedReference {
  DumpContents dump;
  bool loaded = false;
};

/// A checked `verify` invocation, ready to run.
struct VerifySetup {
  Scenario scenario;
  ValidationReport report;
  Dtype dtype = Dtype::fp32;       ///< --dtype, else oracle.dtype
  std::optional<FaultKind> fault;  ///< --inject, else oracle.inject
  bool on_gpu = false;
  GpuVerifyOptions gpu_options;
  LoadedReference reference;
};

/// Loads and validates the scenario and checks every option, then (GPU backend) that a device is usable and
/// (--reference) reads the dump. @throws InputError naming the option or scenario key and the fix; DeviceError
/// when the GPU backend has no device.
VerifySetup prepare_verify(const Common& c, const VerifyArgs& args);

/// What the oracle cannot check is refused before any work, for verify and replay alike: a sliding window
/// (model.window_size with left >= 0), which neither the schedules nor the reference apply.
/// @throws InputError at model.window_size
void check_verifiable(const Scenario& scenario);

/// Checks that a reference dump matches the problem the scenario defines: dtype, seed, input distribution, mask,
/// softmax scale and tensor shapes (the reference is a function of exactly these).
void check_reference(const DumpContents& d, const std::string& path, const AttentionShape& shape, Dtype dtype,
                     uint64_t seed, const std::string& input_distribution);

/// Checks that a reference dump's /inputs are bit for bit the inputs this run generates (options: seed,
/// distribution and head selection; rounded to `dtype` as the run rounds them). A dump of another oracle.heads,
/// hierarchical split or model shape can pass check_reference's shape test with other heads' data: its reference
/// would then be judged against another problem, and a new --dump would record a scenario that does not
/// reproduce it. @throws InputError (--reference) naming the first tensor that differs and the fix.
void check_reference_inputs(const AttentionInputs& dumped, const std::string& path, const AttentionShape& shape,
                            const VerifyOptions& options, Dtype dtype);

/// One line per fault injector: name and description.
std::string injector_list();

}  // namespace hcpsim::app
