// Inputs found by fuzzing the dump reader (scripts/fuzz.sh), kept as regression tests.
#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/dump.hpp"

TEST_CASE("oracles: a dump whose header claims an absurd dataset size is rejected before allocating", "[oracles]") {
  // A mutated dump header whose /inputs dataset claims ~2^57 elements: reading it used to try to allocate them.
  const std::string path =
      std::string(HCPSIM_SOURCE_DIR) + "/tests/fuzz/corpus/dump_reader/regression_huge_dataset_dims.h5";
  std::string message;
  try {
    hcpsim::read_dump(path);
  } catch (const hcpsim::InputError& e) {
    message = e.what();
  }
  INFO(message);
  REQUIRE(message.find(path) != std::string::npos);
  const bool structural = message.find("claims") != std::string::npos ||
                          message.find("corrupt") != std::string::npos ||
                          message.find("truncated") != std::string::npos;
  REQUIRE(structural);
}
