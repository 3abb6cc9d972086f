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

TEST_CASE("io: xml_strip_invalid drops exactly what the XML 1.0 Char production excludes", "[io]") {
  // Tab, newline and carriage return stay; the other C0 controls (NUL, ESC, BEL, form feed) go.
  REQUIRE(xml_strip_invalid(std::string("a\tb\nc\rd", 7)) == std::string("a\tb\nc\rd", 7));
  REQUIRE(xml_strip_invalid(std::string("x\0y\x1b[31mz\x07\x0c", 11)) == "xy[31mz");
  // Multi-byte UTF-8 is kept whole: é (2 bytes), € (3 bytes), U+1F600 (4 bytes); DEL (0x7F) is a Char.
  REQUIRE(xml_strip_invalid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f") == "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f");
  // U+FFFE and U+FFFF are not Chars; a surrogate (ED A0 80), an overlong '/' (C0 AF), a lone continuation byte and
  // a truncated sequence are not UTF-8.
  REQUIRE(xml_strip_invalid("a\xef\xbf\xbe" "b\xef\xbf\xbf" "c") == "abc");
  REQUIRE(xml_strip_invalid("a\xed\xa0\x80" "b\xc0\xaf" "c\x80" "d\xe2\x82") == "abcd");
  REQUIRE(xml_strip_invalid("") == "");
  // The two compose: strip first, then escape.
  REQUIRE(xml_escape(xml_strip_invalid("<\x01&>")) == "&lt;&amp;&gt;");
}
