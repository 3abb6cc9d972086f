#include <string>

#include "catch_compat.hpp"
#include "hcpsim/io/yaml_text.hpp"

using namespace hcpsim;

TEST_CASE("io: YAML scalars are escaped by one rule (yaml-cpp's emitter)", "[io]") {
  REQUIRE(yaml_double_quoted("m.csv") == "\"m.csv\"");
  REQUIRE(yaml_double_quoted("say \"hi\"") == "\"say \\\"hi\\\"\"");
  REQUIRE(yaml_double_quoted("a\\b") == "\"a\\\\b\"");
  REQUIRE(yaml_double_quoted("tab\there") == "\"tab\\there\"");
  REQUIRE(yaml_scalar("a2a+p2p") == "a2a+p2p");
  REQUIRE(yaml_scalar("llama3_8b_128k_launch") == "llama3_8b_128k_launch");
  REQUIRE(yaml_scalar("a: b") == "\"a: b\"");  // a plain "a: b" would read back as a map
  REQUIRE(yaml_scalar("x # y") == "\"x # y\"");  // a plain " #" would start a comment
  REQUIRE(yaml_scalar("null") == "\"null\"");
  REQUIRE(yaml_scalar("") == "\"\"");
}
