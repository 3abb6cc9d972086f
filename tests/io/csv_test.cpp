#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/io/csv.hpp"

using namespace hcpsim;

TEST_CASE("io: CSV fields are quoted per RFC 4180", "[io]") {
  REQUIRE(csv_quoted("a2a+p2p [8, 2] TP2") == "\"a2a+p2p [8, 2] TP2\"");
  REQUIRE(csv_quoted("say \"hi\"") == "\"say \"\"hi\"\"\"");
  REQUIRE(csv_quoted("") == "\"\"");
  REQUIRE(csv_field("p2p") == "p2p");
  REQUIRE(csv_field("a,b") == "\"a,b\"");
  REQUIRE(csv_field("two\nlines") == "\"two\nlines\"");
  REQUIRE(csv_field("q\"") == "\"q\"\"\"");
}

TEST_CASE("io: parse_csv reads what the writer writes, with line numbers", "[io]") {
  const std::string label = "x, \"y\"\nz";
  const std::string text = "# a comment\nop_kind,label,measured_s\n\ncopy," + csv_quoted(label) + ",1e-05\r\n" +
                           " gemm , plain ,2\nlast,,\n";
  const auto recs = parse_csv(text, "m.csv");
  REQUIRE(recs.size() == 4);
  REQUIRE(recs[0].line == 2);
  REQUIRE(recs[0].fields == std::vector<std::string>{"op_kind", "label", "measured_s"});
  REQUIRE(recs[1].line == 4);
  REQUIRE(recs[1].fields == std::vector<std::string>{"copy", label, "1e-05"});
  // The quoted field spans two lines, so the next record starts on line 6.
  REQUIRE(recs[2].line == 6);
  REQUIRE(recs[2].fields == std::vector<std::string>{"gemm", "plain", "2"});
  REQUIRE(recs[3].fields == std::vector<std::string>{"last", "", ""});  // trailing commas are empty fields
  CsvReadOptions raw;
  raw.skip_comment_lines = false;
  raw.trim_unquoted = false;
  const auto raw_recs = parse_csv("# not a comment, here\n a ,b\n", "r.csv", raw);
  REQUIRE(raw_recs.size() == 2);
  REQUIRE(raw_recs[0].fields == std::vector<std::string>{"# not a comment", " here"});
  REQUIRE(raw_recs[1].fields == std::vector<std::string>{" a ", "b"});
}

TEST_CASE("io: parse_csv rejects an open quote, text after a quote and NUL bytes, naming the line", "[io]") {
  auto message = [](const std::string& text) {
    try {
      parse_csv(text, "bad.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message("a,b\nc,\"open\n") .find("bad.csv:2: a quoted field is never closed") != std::string::npos);
  CHECK(message("a,\"q\"x\n").find("bad.csv:1: text after a closing quote") != std::string::npos);
  CHECK(message(std::string("a\nb\0c\n", 6)).find("bad.csv:2: binary data") != std::string::npos);
}
