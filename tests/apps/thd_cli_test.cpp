// Packed-sequence (qkv_format thd) scenarios through the real hcpsim binary: validate --schedule, simulate, plan.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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
  const auto r = run_hcpsim("plan scenarios/ci/thd_p2p_cp4_causal.yaml parallel.te_version=2.18 --gpus 8 --tp 1,2 "
                            "--fixed pp,vp,recompute,micro_batch");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* expected : {"needs Transformer Engine >= 2.19", "all_gather TP1 ", "p2p TP1 ", "p2p TP2 ",
                               "packed sequences: each option pads every sequence to a multiple of 2 x its own CP"})
    CHECK(r.output.find(expected) != std::string::npos);
}

TEST_CASE("apps: verify of a thd scenario passes, and each thd fault exits 1 naming the tensor and rank",
          "[apps][thd]") {
  const std::string f = "scenarios/ci/thd_hcp_2x2_padding_half.yaml oracle.dtype=fp64";
  auto r = run_hcpsim("verify " + f);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("result: PASS") != std::string::npos);
  // floor_cu_seqlens drops real tokens (a finite reference LSE becomes -inf); unguarded_empty_merge turns the
  // merged LSE of the all-padding rows into NaN.
  for (const char* fault : {"floor_cu_seqlens", "unguarded_empty_merge"}) {
    r = run_hcpsim("verify " + f + " oracle.inject=" + fault);
    INFO(fault << "\n" << r.output);
    REQUIRE(r.exit_code == 1);
    REQUIRE(r.output.find("result: FAIL: worst tensor softmax_lse") != std::string::npos);
    REQUIRE(r.output.find(", cp_rank ") != std::string::npos);
  }
  // tail_padding_blind needs only the last sequence padded: [16, 24, 13] at cp 4 is [16, 24, 16].
  r = run_hcpsim("verify scenarios/ci/thd_fault_tail_padding_blind.yaml oracle.dtype=fp64");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("result: FAIL: worst tensor ") != std::string::npos);
  REQUIRE(r.output.find(", cp_rank ") != std::string::npos);
  // ... and is refused where it cannot act (every sequence padded).
  r = run_hcpsim("verify " + f + " oracle.inject=tail_padding_blind");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
}

TEST_CASE("apps: a thd verify over --max-memory names the packed lengths, not seq_length, as the fix",
          "[apps][thd]") {
  const auto r = run_hcpsim("verify scenarios/ci/thd_hcp_2x2_padding_half.yaml --max-memory 1K");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("use fewer or shorter packed sequences (model.packed_sequence_lengths: about ") !=
          std::string::npos);
  REQUIRE(r.output.find("model.seq_length=") == std::string::npos);
}

TEST_CASE("apps: simulate's tokens per second of packed sequences counts the real tokens, not the padding",
          "[apps][thd]") {
  // Three sequences of 4001 tokens, padded to 4032 (multiples of 2*cp = 32): 12003 real tokens per micro-batch of a
  // 12096-token packed length. tokens_per_s counted the padded length (0.8% more here; 88% more for 17-token
  // sequences) while the model FLOPs counted the real tokens.
  const auto json = std::filesystem::temp_directory_path() / ("hcpsim_thd_tokens_" + std::to_string(::getpid()) + ".json");
  const auto r = run_hcpsim("simulate scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml model.qkv_format=thd "
                            "\"model.packed_sequence_lengths=[4001,4001,4001]\" model.seq_length=null --summary " +
                            json.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("padded to multiples of 2*cp [4032, 4032, 4032]") != std::string::npos);
  std::ifstream in(json);
  const auto step = nlohmann::json::parse(in)["step"];
  const double step_s = step["step_time_ps"].get<double>() * 1e-12;
  const double gbs = step["global_batch_size"].get<double>();
  CHECK(step["tokens_per_s"].get<double>() == Approx(gbs * 12003 / step_s).epsilon(1e-12));
  std::filesystem::remove(json);
}
