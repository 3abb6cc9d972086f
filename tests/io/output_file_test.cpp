#include <filesystem>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/io/xml.hpp"
#include "hcpsim/io/provenance.hpp"
#include "hcpsim/io/yaml_text.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace hcpsim;

TEST_CASE("io: write_output_file writes the whole text, replaces the old file and leaves no temporary", "[io]") {
  const fs::path dir = test::scratch_dir("io_output_file");
  const std::string path = (dir / "out.txt").string();
  write_output_file(path, "first\n", "test file", "--out");
  REQUIRE(test::slurp(path) == "first\n");
  // Binary-safe: an embedded NUL and no trailing newline survive byte for byte.
  const std::string bytes("a\0b", 3);
  write_output_file(path, bytes, "test file", "--out");
  REQUIRE(test::slurp(path) == bytes);
  REQUIRE_FALSE(fs::exists(output_temp_path(path)));
  REQUIRE(output_temp_path(path) == path + ".tmp");
  fs::remove_all(dir);
}

TEST_CASE("io: write_output_file into a missing directory names the path, the option and the fix", "[io]") {
  const fs::path dir = test::scratch_dir("io_output_missing");
  const std::string path = (dir / "no_such_dir" / "trace.json").string();
  try {
    write_output_file(path, "{}", "trace", "--trace");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.find(path) != std::string::npos);
    CHECK(m.find("--trace") != std::string::npos);
    CHECK(m.find("cannot open trace temporary file") != std::string::npos);
    CHECK(m.find("check that the directory exists") != std::string::npos);
  }
  REQUIRE_FALSE(fs::exists(dir / "no_such_dir"));
  fs::remove_all(dir);
}

TEST_CASE("io: commit_output_file that cannot rename removes the temporary and keeps the target", "[io]") {
  const fs::path dir = test::scratch_dir("io_commit");
  const fs::path target = dir / "target";
  fs::create_directories(target / "child");  // a non-empty directory cannot be replaced by a rename
  const std::string tmp = (dir / "x.tmp").string();
  write_output_file(tmp + ".src", "data", "test file");
  fs::rename(tmp + ".src", tmp);
  REQUIRE_THROWS_AS(commit_output_file(tmp, target.string(), "dump", "--dump"), InputError);
  REQUIRE_FALSE(fs::exists(tmp));
  REQUIRE(fs::is_directory(target / "child"));
  fs::remove_all(dir);
}

TEST_CASE("io: xml_escape replaces exactly the four markup characters", "[io]") {
  REQUIRE(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c'");
  REQUIRE(xml_escape("") == "");
  REQUIRE(xml_escape("[8, 2] TP2") == "[8, 2] TP2");
  // Already-escaped text is escaped again (the writers escape raw labels once).
  REQUIRE(xml_escape("&amp;") == "&amp;amp;");
}

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

TEST_CASE("io: provenance names the build and digests content", "[io]") {
  REQUIRE(hcpsim_version() == HCPSIM_VERSION_STRING);
  REQUIRE_FALSE(build_x86_level().empty());
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the FNV reference vectors).
  REQUIRE(content_digest("a") == "fnv1a64:af63dc4c8601ec8c");
  REQUIRE(content_digest("") == "fnv1a64:cbf29ce484222325");
}
