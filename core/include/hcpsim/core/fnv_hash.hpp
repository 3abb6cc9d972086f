#pragma once
/// The one FNV-1a hash of the project: tags of the input streams (oracles) and digests of results (replay).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hcpsim {

/// FNV-1a 64-bit offset basis and prime. Source: Fowler, Noll, Vo, "FNV hash",
/// http://www.isthe.com/chongo/tech/comp/fnv/ (64-bit FNV-1a parameters).
inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

/// FNV-1a 64 of `size_bytes` bytes at `data`, continuing from `state` (kFnvOffsetBasis for a fresh hash), so a
/// sequence of buffers hashes like their concatenation. FNV-1a 64 of no bytes is the offset basis.
constexpr uint64_t fnv1a64(const unsigned char* data, size_t size_bytes, uint64_t state = kFnvOffsetBasis) {
  for (size_t i = 0; i < size_bytes; ++i) {
    state ^= data[i];
    state *= kFnvPrime;
  }
  return state;
}

/// fnv1a64 of the bytes of `text`.
constexpr uint64_t fnv1a64(std::string_view text, uint64_t state = kFnvOffsetBasis) {
  for (char c : text) {
    state ^= static_cast<unsigned char>(c);
    state *= kFnvPrime;
  }
  return state;
}

}  // namespace hcpsim
