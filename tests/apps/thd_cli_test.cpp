// Packed-sequence (qkv_format thd) scenarios through the real hcpsim binary: validate --schedule, simulate, plan.
#include <string>

#include "catch_compat.hpp"
#include "run_command.hpp"

using hcpsim::test::run_hcpsim;

TEST_CASE("apps: validate --schedule and simulate run on a thd scenario", "[apps][thd]") {
  const std::string f = "scenarios/ci/thd_hcp_2x2_causal_gqa.yaml";
  auto r = run_hcpsim("validate " + f + " --schedule");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("qkv_format=thd") != std::string::npos);
  REQUIRE(r.output.find("cp_rank 3 (") != std::string::npos);
  r = run_hcpsim("simulate " + f);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_hcpsim("simulate scenarios/ci/thd_p2p_cp4_causal.yaml --kernels");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_hcpsim("diff " + f + " \"parallel.hierarchical_context_parallel_sizes=[1,4]\"");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("apps: plan re-pads the packed sequences for every CP size and skips what TE cannot run", "[apps][thd]") {
  // --gpus 8: TP 1 gives CP 8 (lengths padded to multiples of 16), TP 2 CP 4. TE 2.18 runs THD with p2p and a2a,
  // and all_gather, not with a2a+p2p.
  const auto r = run_hcpsim("plan scenarios/ci/thd_p2p_cp4_causal.yaml parallel.te_version=2.18 --gpus 8 --tp 1,2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* expected : {"needs Transformer Engine >= 2.19", "all_gather TP1 ", "p2p TP1 ", "p2p TP2 "})
    CHECK(r.output.find(expected) != std::string::npos);
}
