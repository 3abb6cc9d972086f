#pragma once
/// YAML scalars for the hand-laid-out YAML files hcpsim writes (the imported scenario with its aligned source
/// comments, the calibration file, replay's `expect:` block): their layout is written as text, but every string
/// scalar goes through yaml-cpp's emitter here, so all of them escape the same way (one rule, YAML 1.2).

#include <string>

namespace hcpsim {

/// `text` as a double-quoted YAML scalar, escaped by yaml-cpp's emitter: \" and \\ for quote and backslash, \t,
/// \n and \x.. for control characters; UTF-8 text is kept as it is. E.g. `say "hi"` → `"say \"hi\""`.
std::string yaml_double_quoted(const std::string& text);

/// `text` as a YAML scalar the way yaml-cpp's emitter chooses: plain when it reads back as the same string
/// (`a2a+p2p`, `dgx-h100`, `llama3_8b`), double-quoted when it would not (`"a: b"`, `"x # y"`, `"null"`, `""`).
std::string yaml_scalar(const std::string& text);

}  // namespace hcpsim
