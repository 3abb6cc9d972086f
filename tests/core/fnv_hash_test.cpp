#include <string>

#include "catch_compat.hpp"
#include "hcpsim/core/fnv_hash.hpp"

using namespace hcpsim;

TEST_CASE("core: FNV-1a 64 matches the published test vectors and chains like concatenation", "[core]") {
  // Test vectors of the FNV reference (fnv_test.c, FNV1A_64): "" → offset basis, "a" → 0xaf63dc4c8601ec8c,
  // "foobar" → 0x85944171f73967e8.
  REQUIRE(fnv1a64(std::string_view{}) == 0xcbf29ce484222325ULL);
  REQUIRE(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  REQUIRE(fnv1a64("foobar") == 0x85944171f73967e8ULL);
  const std::string foo = "foo", bar = "bar";
  const auto* f = reinterpret_cast<const unsigned char*>(foo.data());
  const auto* b = reinterpret_cast<const unsigned char*>(bar.data());
  // Chaining the state over two buffers equals hashing their concatenation, and the byte and text forms agree.
  REQUIRE(fnv1a64(b, bar.size(), fnv1a64(f, foo.size())) == fnv1a64("foobar"));
  REQUIRE(fnv1a64(f, foo.size()) == fnv1a64("foo"));
  // Bytes above 0x7f hash as unsigned values (a signed char would sign-extend and differ).
  REQUIRE(fnv1a64("\xff") == ((kFnvOffsetBasis ^ 0xffULL) * kFnvPrime));
}
