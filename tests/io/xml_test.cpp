#include "catch_compat.hpp"
#include "hcpsim/io/xml.hpp"

using namespace hcpsim;

TEST_CASE("io: xml_escape replaces exactly the four markup characters", "[io]") {
  REQUIRE(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c'");
  REQUIRE(xml_escape("") == "");
  REQUIRE(xml_escape("[8, 2] TP2") == "[8, 2] TP2");
  // Already-escaped text is escaped again (the writers escape raw labels once).
  REQUIRE(xml_escape("&amp;") == "&amp;amp;");
}
