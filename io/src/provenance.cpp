#include "hcpsim/io/provenance.hpp"

#include <fmt/format.h>

#include "hcpsim/core/fnv_hash.hpp"

namespace hcpsim {

// HCPSIM_VERSION_STRING and HCPSIM_X86_LEVEL_STRING are compile definitions of every hcpsim target
// (CMakeLists.txt, hcpsim_warnings); this file is where outputs read them.
std::string hcpsim_version() { return HCPSIM_VERSION_STRING; }
std::string build_x86_level() { return HCPSIM_X86_LEVEL_STRING; }

std::string content_digest(std::string_view text) { return fmt::format("fnv1a64:{:016x}", fnv1a64(text)); }

}  // namespace hcpsim
