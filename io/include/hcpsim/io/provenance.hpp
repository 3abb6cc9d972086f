#pragma once
/// Provenance values that outputs record about what produced them: the hcpsim version, the x86 level the binary
/// was built for (results of the CPU oracle may differ in the last bits between levels), and content digests.

#include <string>
#include <string_view>

namespace hcpsim {

/// The hcpsim version (the CMake project version), e.g. "0.1.0".
std::string hcpsim_version();

/// The x86 level this binary was built for (CMake option HCPSIM_X86_LEVEL), e.g. "x86-64-v3", or "none".
std::string build_x86_level();

/// A digest of `text` for outputs to name their inputs: "fnv1a64:" and 16 lowercase hex digits of FNV-1a 64
/// (core/fnv_hash.hpp). Not cryptographic: it tells files apart, it does not authenticate them.
std::string content_digest(std::string_view text);

}  // namespace hcpsim
