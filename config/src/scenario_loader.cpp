#include "hcpsim/config/scenario_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/core/input_file.hpp"
#include "scenario_overrides.hpp"
#include "scenario_sections.hpp"
#include "yaml_reader.hpp"

namespace hcpsim {

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

/// Refuses text that is not a YAML document: a NUL byte means a binary file (an HDF5 dump, an archive), which
/// yaml-cpp would report as a syntax error quoting the raw byte (a NUL cut the message short).
/// @throws InputError naming the file and the byte offset of the first NUL.
void require_text(const std::string& text, const std::string& display_name) {
  const size_t nul = text.find('\0');
  if (nul == std::string::npos) return;
  SourceLoc l;
  l.file = display_name;
  throw InputError(l, "",
                   "not a scenario: a binary file (a NUL byte at offset " + std::to_string(nul) +
                       "; an HDF5 dump or another binary file?)",
                   "give the scenario's YAML file (dumps are read by 'hcpsim compare' and 'hcpsim gather')");
}

/// yaml-cpp's message with control bytes and non-ASCII bytes written as \xNN, so that it prints whole.
std::string printable(const std::string& msg) {
  std::string out;
  for (const unsigned char ch : msg) {
    if (ch >= 0x20 && ch < 0x7f) {
      out.push_back(static_cast<char>(ch));
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[ch >> 4]);
      out.push_back(hex[ch & 15]);
    }
  }
  return out;
}

/// Reads one scenario tree (overrides already applied) into `sc`, section by section.
void read_scenario(YamlReader& r, const YAML::Node& root, Scenario& sc) {
  r.check_map(root, "", {"schema_version", "name", "model", "parallel", "cluster", "training", "oracle", "expect"});
  if (!root["schema_version"])
    r.fail(root, "schema_version", "missing", "add 'schema_version: 1' at the top of the file");
  const int64_t version = r.get_int(root["schema_version"], "schema_version");
  if (version != 1)
    r.fail(root["schema_version"], "schema_version", "version " + std::to_string(version) + " is not supported",
           "this hcpsim reads schema_version 1");
  sc.schema_version = 1;
  if (root["name"]) sc.name = r.get_string(root["name"], "name");
  if (!root["model"]) r.fail(root, "model", "missing section", "add a 'model:' section (see README, Scenario schema)");
  if (!root["parallel"])
    r.fail(root, "parallel", "missing section", "add a 'parallel:' section (see README, Scenario schema)");
  read_model(r, root["model"], sc.model);
  read_parallel(r, root["parallel"], sc.parallel);
  // qkv_format thd without seq_length (or null): the packed total, each sequence padded for this CP size.
  const YAML::Node seq_length = root["model"]["seq_length"];
  if (sc.model.qkv_format == QkvFormat::thd && (!seq_length || seq_length.IsNull()))
    sc.model.seq_length = thd_seq_length(sc);
  read_cluster(r, root["cluster"], sc.model.attention_backend, sc.parallel.te_version, sc.cluster);
  if (root["training"]) read_training(r, root["training"], sc.training);
  if (root["oracle"]) read_oracle(r, root["oracle"], sc.oracle);
  if (root["expect"]) read_expect(r, root["expect"], sc.expect);
}

Scenario load_from_node(YAML::Node root, const std::string& display_name, const std::vector<std::string>& overrides) {
  Scenario sc;
  sc.source_path = display_name;
  if (!root.IsDefined() || root.IsNull()) {
    SourceLoc l;
    l.file = display_name;
    throw InputError(l, "", "the scenario file is empty", "start from scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  }
  if (!root.IsMap()) {
    SourceLoc l;
    l.file = display_name;
    throw InputError(l, "", "the scenario must be a YAML mapping of sections", "see README, Scenario schema");
  }
  // Bridge spellings in the file move to their canonical keys first, so an override of either spelling wins.
  std::map<std::string, AliasUse> aliases = rewrite_alias_keys(root, display_name);
  YamlReader reader(display_name, apply_overrides(root, overrides, aliases), sc.locations);
  reader.set_aliases(std::move(aliases));
  try {
    read_scenario(reader, root, sc);
  } catch (const YAML::Exception& e) {
    SourceLoc l;
    l.file = display_name;
    l.line = e.mark.line + 1;
    l.column = e.mark.column + 1;
    throw InputError(l, "", "malformed YAML value (" + printable(e.msg) + ")", "check the syntax at that position");
  }
  if (sc.name.empty()) sc.name = std::filesystem::path(display_name).stem().string();
  return sc;
}

}  // namespace

Scenario load_scenario_text(const std::string& text, const std::string& display_name,
                            const std::vector<std::string>& overrides) {
  require_text(text, display_name);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    SourceLoc l;
    l.file = display_name;
    l.line = e.mark.line + 1;
    l.column = e.mark.column + 1;
    throw InputError(l, "", "not valid YAML (" + printable(e.msg) + ")", "fix the syntax at that position");
  }
  check_unique_keys(root, display_name);
  return load_from_node(root, display_name, overrides);
}

ExpectSpec load_expect(const std::string& path) {
  const std::string text = read_input_file({path, "scenario file", kMaxScenarioBytes, false, "check the path"});
  SourceLoc l;
  l.file = path;
  require_text(text, path);
  Scenario sc;
  sc.source_path = path;
  try {
    const YAML::Node root = YAML::Load(text);
    YamlReader reader(path, {}, sc.locations);
    if (root.IsMap() && root["expect"]) read_expect(reader, root["expect"], sc.expect);
  } catch (const YAML::Exception& e) {
    l.line = e.mark.line + 1;
    l.column = e.mark.column + 1;
    // The whole file does not parse: a syntax error anywhere, not one of the expect block.
    throw InputError(l, "", "not valid YAML (" + printable(e.msg) + ")", "fix the syntax at that position");
  }
  return sc.expect;
}

bool is_calibration_file(const std::string& path) {
  try {
    const std::string text = read_input_file({path, "scenario file", kMaxScenarioBytes, false, "check the path"});
    if (text.find('\0') != std::string::npos) return false;
    const YAML::Node root = YAML::Load(text);
    return root.IsMap() && root["source"] && root["gpu"] && !root["schema_version"];
  } catch (const std::exception&) {
    return false;
  }
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = read_input_file(
      {path, "scenario file", kMaxScenarioBytes, false, "check the path (bundled scenarios are in scenarios/)"});
  return load_scenario_text(text, path, overrides);
}

}  // namespace hcpsim
