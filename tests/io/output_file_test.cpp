#include <filesystem>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/io/output_file.hpp"
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
