#pragma once
/// XML text helpers shared by the SVG chart and JUnit report writers.

#include <string>

namespace hcpsim {

/// `text` with the XML special characters & < > " replaced by their entities (&amp; &lt; &gt; &quot;), for
/// attribute values and character data. Source: XML 1.0 §2.4 (character data and markup).
std::string xml_escape(const std::string& text);

/// `text` (UTF-8) without what XML 1.0 cannot carry: code points outside the Char production
/// (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF], XML 1.0 §2.2), e.g. ESC or NUL, and
/// bytes that are not well-formed UTF-8 (RFC 3629: overlong forms and surrogates included) are dropped; every
/// other byte is kept in order. Never throws.
std::string xml_strip_invalid(const std::string& text);

}  // namespace hcpsim
