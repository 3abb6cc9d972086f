#pragma once
/// Provenance values that outputs record about what produced them: the hcpsim version, the build (compiler, the x86
/// level the binary was built for, whether the CUDA parts were built: results of the CPU oracle may differ in the
/// last bits between x86 levels), content digests, and the run's effective scenario. Everything here is
/// deterministic (no wall clock, no host name), so the same run gives byte-identical outputs.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hcpsim {

/// The hcpsim version (the CMake project version), e.g. "0.1.0".
std::string hcpsim_version();

/// The x86 level this binary was built for (CMake option HCPSIM_X86_LEVEL), e.g. "x86-64-v3", or "none".
std::string build_x86_level();

/// The C++ compiler that built this binary, e.g. "gcc 12.2.0" or "clang 14.0.6" (from its predefined macros).
std::string build_compiler();

/// Whether this binary was built with the CUDA parts (CMake HCPSIM_HAVE_CUDA).
bool build_cuda();

/// A digest of `text` for outputs to name their inputs: "fnv1a64:" and 16 lowercase hex digits of FNV-1a 64
/// (core/fnv_hash.hpp). Not cryptographic: it tells files apart, it does not authenticate them.
std::string content_digest(std::string_view text);

/// What produced an output: the build, and the scenario the run used after every override.
struct Provenance {
  std::string hcpsim_version;          ///< hcpsim_version()
  std::string compiler;                ///< build_compiler()
  std::string x86_level;               ///< build_x86_level()
  bool cuda = false;                   ///< build_cuda()
  std::string scenario_yaml;           ///< the effective scenario (config to_yaml of the loaded scenario)
  std::vector<std::string> overrides;  ///< the `key.path=value` overrides as given, in order
  uint64_t seed = 0;                   ///< oracle.seed
  std::string scenario_digest;         ///< content_digest(scenario_yaml)
};

/// The provenance of this binary's run of `effective_yaml` with `overrides` and `seed` (fills the build fields and
/// the digest).
Provenance make_provenance(std::string effective_yaml, std::vector<std::string> overrides, uint64_t seed);

/// `provenance` as a JSON object text, keys in the order of the struct (indent as nlohmann's dump: -1 compact).
std::string provenance_json(const Provenance& provenance, int indent = -1);

/// `json_object` (a JSON object's text) with a last key "provenance" holding provenance_json, re-printed with
/// `indent` (key order and number text of the input are kept) and ended by a newline.
/// @throws std::invalid_argument when `json_object` is not a JSON object (a bug in the caller).
std::string with_provenance(const std::string& json_object, const Provenance& provenance, int indent = 2);

}  // namespace hcpsim
