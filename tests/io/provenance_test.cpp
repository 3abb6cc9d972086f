#include <string>

#include "catch_compat.hpp"
#include "hcpsim/io/provenance.hpp"

using namespace hcpsim;

TEST_CASE("io: provenance names the build and digests content", "[io]") {
  REQUIRE(hcpsim_version() == HCPSIM_VERSION_STRING);
  REQUIRE_FALSE(build_x86_level().empty());
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the FNV reference vectors).
  REQUIRE(content_digest("a") == "fnv1a64:af63dc4c8601ec8c");
  REQUIRE(content_digest("") == "fnv1a64:cbf29ce484222325");
}
