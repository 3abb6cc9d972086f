#include "hcpsim/io/yaml_text.hpp"

#include <yaml-cpp/yaml.h>

namespace hcpsim {

std::string yaml_double_quoted(const std::string& text) {
  YAML::Emitter out;
  out << YAML::DoubleQuoted << text;
  return out.c_str();
}

std::string yaml_scalar(const std::string& text) {
  YAML::Emitter out;
  out << text;
  return out.c_str();
}

}  // namespace hcpsim
