#include <filesystem>
#include <string>

#include <sys/stat.h>

#include <csignal>

#include "catch_compat.hpp"
#include "death_test.hpp"
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
  // Only the output is left in the directory: no temporary.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() == "out.txt" ? 1 : 100;
  REQUIRE(entries == 1);
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
    CHECK(m.find("cannot create a temporary file for trace") != std::string::npos);
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

TEST_CASE("io: outputs never clobber what they should not", "[io]") {
  const fs::path dir = test::scratch_dir("io_output_targets");
  // A symlink planted where an old writer put its temporary ("PATH.tmp") is never followed.
  const fs::path victim = dir / "victim";
  write_output_file(victim.string(), "keep", "test file");
  fs::create_symlink(victim, dir / "out.json.tmp");
  write_output_file((dir / "out.json").string(), "{}", "summary", "--summary");
  CHECK(test::slurp(victim.string()) == "keep");
  CHECK(test::slurp((dir / "out.json").string()) == "{}");
  // A symlink to a regular file: the target gets the text, the link stays a link.
  fs::create_symlink(victim, dir / "link");
  write_output_file((dir / "link").string(), "new", "test file");
  CHECK(fs::is_symlink(dir / "link"));
  CHECK(test::slurp(victim.string()) == "new");
  // A dangling symlink and a directory are refused with the reason.
  fs::create_symlink(dir / "nothing", dir / "dangling");
  try {
    write_output_file((dir / "dangling").string(), "x", "trace", "--trace");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("it is a symbolic link to nothing") != std::string::npos);
  }
  CHECK(fs::is_symlink(dir / "dangling"));
  fs::create_directory(dir / "adir");
  try {
    write_output_file((dir / "adir").string(), "x", "trace", "--trace");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("it is a directory") != std::string::npos);
  }
  // /dev/null is written in place and stays a character device.
  write_output_file("/dev/null", "discarded", "trace", "--trace");
  CHECK(fs::is_character_file("/dev/null"));
  CHECK(classify_output("/dev/null").kind == OutputKind::character_device);
  // A FIFO without a reader is an error at once, not a hang.
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  try {
    write_output_file(fifo.string(), "x", "trace", "--trace");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("no process is reading the FIFO") != std::string::npos);
  }
  CHECK(fs::is_fifo(fifo));
  fs::remove_all(dir);
}

TEST_CASE("io: a run killed by SIGTERM, SIGINT or SIGHUP while writing leaves no temporary file", "[io]") {
  // SIGHUP (a closed terminal) left the temporary next to the dump.
  for (const int sig : {SIGTERM, SIGINT, SIGHUP}) {
    INFO("signal " << sig);
    const fs::path dir = test::scratch_dir("io_output_signal");
    const std::string path = (dir / "dump.h5").string();
    (void)test::run_in_child([&] {
      (void)create_output_temp(path, "dump", "--dump");
      std::raise(sig);
    });
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir)) entries += e.is_regular_file() ? 1 : 0;
    CHECK(entries == 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("io: replacing a file keeps its permissions", "[io]") {
  // A 0600 file came back 0644 (the temporary's mode) after the rename. 0640 is neither what a umask of 022 nor
  // one of 077 gives a new file, so the check fails without the fix under either.
  const fs::path dir = test::scratch_dir("io_output_mode");
  const std::string path = (dir / "private.json").string();
  write_output_file(path, "old", "summary", "--summary");
  const fs::perms mode = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read;
  fs::permissions(path, mode, fs::perm_options::replace);
  write_output_file(path, "new", "summary", "--summary");
  CHECK(fs::status(path).permissions() == mode);
  fs::remove_all(dir);
}
