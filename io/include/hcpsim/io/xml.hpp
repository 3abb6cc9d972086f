#pragma once
/// XML text helpers shared by the SVG chart and JUnit report writers.

#include <string>

namespace hcpsim {

/// `text` with the XML special characters & < > " replaced by their entities (&amp; &lt; &gt; &quot;), for
/// attribute values and character data. Source: XML 1.0 §2.4 (character data and markup).
std::string xml_escape(const std::string& text);

}  // namespace hcpsim
