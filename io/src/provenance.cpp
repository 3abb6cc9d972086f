#include "hcpsim/io/provenance.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hcpsim/core/fnv_hash.hpp"

namespace hcpsim {

namespace {
using Json = nlohmann::ordered_json;  // keys in insertion order: stable, readable output

Json to_json(const Provenance& p) {
  return Json{{"hcpsim_version", p.hcpsim_version}, {"compiler", p.compiler},       {"x86_level", p.x86_level},
              {"cuda", p.cuda},                     {"seed", p.seed},               {"overrides", p.overrides},
              {"scenario_digest", p.scenario_digest}, {"scenario_yaml", p.scenario_yaml}};
}
}  // namespace

// HCPSIM_VERSION_STRING and HCPSIM_X86_LEVEL_STRING are compile definitions of every hcpsim target
// (CMakeLists.txt, hcpsim_warnings), HCPSIM_CUDA_BUILT one of this file (io/CMakeLists.txt); this file is where
// outputs read them.
std::string hcpsim_version() { return HCPSIM_VERSION_STRING; }
std::string build_x86_level() { return HCPSIM_X86_LEVEL_STRING; }
bool build_cuda() { return HCPSIM_CUDA_BUILT != 0; }

std::string build_compiler() {
#if defined(__clang__)
  return fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("gcc {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

std::string content_digest(std::string_view text) { return fmt::format("fnv1a64:{:016x}", fnv1a64(text)); }

Provenance make_provenance(std::string effective_yaml, std::vector<std::string> overrides, uint64_t seed) {
  Provenance p;
  p.hcpsim_version = hcpsim_version();
  p.compiler = build_compiler();
  p.x86_level = build_x86_level();
  p.cuda = build_cuda();
  p.scenario_digest = content_digest(effective_yaml);
  p.scenario_yaml = std::move(effective_yaml);
  p.overrides = std::move(overrides);
  p.seed = seed;
  return p;
}

std::string provenance_json(const Provenance& provenance, int indent) { return to_json(provenance).dump(indent); }

std::string with_provenance(const std::string& json_object, const Provenance& provenance, int indent) {
  Json j = Json::parse(json_object);
  if (!j.is_object()) throw std::invalid_argument("with_provenance: not a JSON object");
  j["provenance"] = to_json(provenance);
  return j.dump(indent) + "\n";
}

}  // namespace hcpsim
