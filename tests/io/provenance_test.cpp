#include <stdexcept>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/io/chrome_trace.hpp"
#include "hcpsim/io/provenance.hpp"

using namespace hcpsim;

TEST_CASE("io: provenance names the build and digests content", "[io]") {
  REQUIRE(hcpsim_version() == HCPSIM_VERSION_STRING);
  REQUIRE_FALSE(build_x86_level().empty());
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the FNV reference vectors).
  REQUIRE(content_digest("a") == "fnv1a64:af63dc4c8601ec8c");
  REQUIRE(content_digest("") == "fnv1a64:cbf29ce484222325");
}

TEST_CASE("io: provenance is deterministic and travels in JSON outputs and trace metadata", "[io]") {
  const Provenance p = make_provenance("name: x\n", {"model.seq_length=64"}, 7);
  REQUIRE(p.hcpsim_version == hcpsim_version());
  REQUIRE(p.compiler == build_compiler());
  REQUIRE((p.compiler.rfind("gcc ", 0) == 0 || p.compiler.rfind("clang ", 0) == 0));
  REQUIRE(p.scenario_digest == content_digest("name: x\n"));
  const std::string expected_tail =
      "\"seed\":7,\"overrides\":[\"model.seq_length=64\"],\"scenario_digest\":\"" + p.scenario_digest +
      "\",\"scenario_yaml\":\"name: x\\n\"}";
  const std::string j = provenance_json(p);
  REQUIRE(j.rfind("{\"hcpsim_version\":\"" + hcpsim_version() + "\",\"compiler\":\"" + p.compiler, 0) == 0);
  REQUIRE(j.substr(j.size() - expected_tail.size()) == expected_tail);
  REQUIRE(provenance_json(make_provenance("name: x\n", {"model.seq_length=64"}, 7)) == j);  // no clock, no host
  // with_provenance keeps the object's keys in order and adds "provenance" last.
  const std::string w = with_provenance("{\"b\": 1, \"a\": 2.5}", p, -1);
  REQUIRE(w == "{\"b\":1,\"a\":2.5,\"provenance\":" + j + "}\n");
  REQUIRE_THROWS_AS(with_provenance("[1]", p), std::invalid_argument);
  // A trace with a provenance ends with its "otherData" object; without one it is unchanged.
  TraceTimeline t;
  t.processes.push_back({0, "gpu 0", 0});
  const std::string plain = chrome_trace_json(t);
  REQUIRE(plain.find("otherData") == std::string::npos);
  t.provenance = p;
  const std::string with = chrome_trace_json(t);
  REQUIRE(with.find("\"otherData\": {\n  \"hcpsim_version\": \"" + hcpsim_version() + "\"") != std::string::npos);
  REQUIRE(with.find("\"scenario_digest\": \"" + p.scenario_digest + "\"") != std::string::npos);
}
