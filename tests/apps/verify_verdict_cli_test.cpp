// `hcpsim verify` verdicts as a user sees them: precision_limited (exit 0, with evidence) for inputs that exceed
// the precision on a correct schedule, exit 1 for every must-fail fault, and non-finite values shown as such.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "run_command.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using hcpsim::test::run_hcpsim;

const std::string kScenario = "verify scenarios/llama32_1b_cp4_a2a_p2p.yaml --threads 2 ";
/// The reproducer's shapes: the bundled Llama 3.2 1B scenario at S = 256 on [1,2] with logits near ±110.
const std::string kAdversarial12 = kScenario +
                                   "model.seq_length=256 oracle.input_distribution=adversarial "
                                   "parallel.context_parallel_size=2 'parallel.hierarchical_context_parallel_sizes=[1,2]' ";

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(hcpsim::test::slurp(p)); }

fs::path temp_dir(const std::string& name) { return hcpsim::test::scratch_dir(name); }

}  // namespace

TEST_CASE("apps: fp32 adversarial [1,2] S 256 on the correct schedule is precision_limited, not FAIL", "[apps]") {
  const fs::path dir = temp_dir("verdict_fp32");
  const auto r = run_hcpsim(kAdversarial12 + "oracle.dtype=fp32 --json " + (dir / "v.json").string());
  INFO(r.output);
  // before: exit 1, "dq 6.062e-05 vs tolerance 2.96e-05"
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("result: PRECISION_LIMITED: the schedule is exact (fp64 run of the same schedule: "
                        "rel_l2_err 1.137e-13 <= 1e-10); these inputs exceed fp32 (logit range max|softmax_lse| "
                        "115.9 > ln(FLT_MAX) 88.72") != std::string::npos);
  REQUIRE(r.output.find("dq: rel_l2_err 6.062e-05 = 4.10 x the fp32 non-CP baseline 1.480e-05 (tolerance "
                        "2.96e-05, precision bound 2.37e-04)") != std::string::npos);
  REQUIRE(r.output.find("over tolerance (precision)") != std::string::npos);
  const auto j = read_json(dir / "v.json");
  REQUIRE(j["result"] == "precision_limited");
  REQUIRE(j["pass"] == false);
  const auto& run = j["runs"][0];
  REQUIRE(run["result"] == "precision_limited");
  REQUIRE(run["precision"]["lse_error_dominates"] == true);
  REQUIRE(run["precision"]["baseline_factor"].get<double>() == 16.0);
  REQUIRE(run["precision"]["logit_range"].get<double>() == Approx(115.9).epsilon(1e-3));
  REQUIRE(run["tensors"][2]["rel_l2_err"].get<double>() == Approx(6.062e-5).epsilon(1e-3));
  // before, the naive merge also exited 1 here for the same rounding-level dq; now it fails by overflow
  const auto naive = run_hcpsim(kAdversarial12 + "oracle.dtype=fp32 --inject naive_lse_merge");
  INFO(naive.output);
  REQUIRE(naive.exit_code == 1);
  REQUIRE(naive.output.find("softmax_lse  [1, 4, 256]                    nan         nan         nan") !=
          std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: bf16 adversarial on [1,2] and with no CP at all is precision_limited (exit 0)", "[apps]") {
  auto r = run_hcpsim(kAdversarial12 + "oracle.dtype=bf16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("result: PRECISION_LIMITED") != std::string::npos);
  REQUIRE(r.output.find("the non-CP baseline exceeds the capped tolerance, bound 2 x baseline") != std::string::npos);
  // CP = 1: before, exit 1 "worst tensor dq ... cp_rank 0" with an error equal to the baseline
  r = run_hcpsim(kScenario +
                 "model.seq_length=256 oracle.input_distribution=adversarial oracle.dtype=bf16 "
                 "parallel.context_parallel_size=1 parallel.cp_comm_type=p2p "
                 "parallel.hierarchical_context_parallel_sizes=null");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("dq: rel_l2_err 6.513e-02 = 1.00 x the bf16 non-CP baseline 6.513e-02 (tolerance "
                        "3.50e-02, precision bound 1.32e-01)") != std::string::npos);
}

TEST_CASE("apps: naive_lse_merge fails by overflow at every precision, and passes benign inputs in fp64", "[apps]") {
  for (const char* dtype : {"fp64", "fp32", "bf16", "fp16"}) {
    const auto r = run_hcpsim(kScenario + "model.seq_length=512 oracle.input_distribution=adversarial oracle.dtype=" +
                              dtype + " --inject naive_lse_merge");
    INFO(dtype << "\n" << r.output);
    REQUIRE(r.exit_code == 1);
    REQUIRE(r.output.find("result: FAIL: worst tensor softmax_lse (rel_l2_err nan") != std::string::npos);
  }
  // before: exit 1 in fp64 on benign inputs, only because the injector merged in fp32
  const auto r = run_hcpsim(kScenario + "model.seq_length=512 oracle.dtype=fp64 --inject naive_lse_merge");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("result: PASS") != std::string::npos);
  // The PASS is explained, so it does not read as the oracle missing the fault.
  REQUIRE(r.output.find("  note: naive_lse_merge goes wrong only when exp overflows (logits beyond 88.7 in fp32); "
                        "clamped_normal inputs keep the logits far below that, so it computes the same attention and "
                        "PASS is expected: use oracle.input_distribution=adversarial to see it fail\n") !=
          std::string::npos);
}

TEST_CASE("apps: every must-fail fault injector still exits 1 in fp32 and bf16", "[apps]") {
  const auto list = run_hcpsim("verify --inject list");
  REQUIRE(list.exit_code == 0);
  int checked = 0;
  std::istringstream lines(list.output);
  std::string line;
  const std::regex name_re(R"(^\s+([a-z0-9_]+)\s)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, name_re)) continue;
    const std::string fault = m[1];
    if (fault == "bf16_accumulation") continue;  // measured, not a failure
    if (line.find("THD only") != std::string::npos) {  // packed-sequence faults refuse this bshd scenario
      const auto r = run_hcpsim(kScenario + "model.seq_length=512 --inject " + fault);
      INFO(fault << "\n" << r.output);
      REQUIRE(r.exit_code == 2);
      REQUIRE(r.output.find("needs packed sequences") != std::string::npos);
      continue;
    }
    const std::string dist = fault == "naive_lse_merge" ? "adversarial" : "clamped_normal";
    for (const char* dtype : {"fp32", "bf16"}) {
      const auto r = run_hcpsim(kScenario + "model.seq_length=512 oracle.input_distribution=" + dist +
                                " oracle.dtype=" + dtype + " --inject " + fault);
      INFO(fault << " " << dtype << "\n" << r.output);
      REQUIRE(r.exit_code == 1);
      REQUIRE(r.output.find("result: FAIL") != std::string::npos);
      REQUIRE(r.output.find("PRECISION_LIMITED") == std::string::npos);
    }
    ++checked;
  }
  REQUIRE(checked == 7);
}

TEST_CASE("apps: tensors with non-finite values show nan and their count in the table and JSON", "[apps]") {
  const fs::path dir = temp_dir("verdict_nan");
  const auto r = run_hcpsim(kScenario + "model.seq_length=512 --inject missing_dkv_hop --json " +
                            (dir / "v.json").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  // before: "dk ... 0.000e+00 ... FAIL (non-finite)"
  REQUIRE(std::regex_search(r.output, std::regex(R"(dk +\[1, 512, 2, 64\] +nan +nan +nan .*FAIL \(16384 non-finite mismatches of 65536\))")));
  REQUIRE(r.output.find("worst tensor dk (rel_l2_err nan vs tolerance") != std::string::npos);
  const auto j = read_json(dir / "v.json");
  const auto& dk = j["runs"][0]["tensors"][3];
  REQUIRE(dk["tensor"] == "dk");
  REQUIRE(dk["rel_l2_err"].is_null());
  REQUIRE(dk["max_abs_err"].is_null());
  REQUIRE(dk["nonfinite"] == 16384);
  REQUIRE(j["runs"][0]["tensors"][2]["rel_l2_err"].is_number());
  REQUIRE(j["result"] == "fail");
  // worst_index follows "shape" for every tensor: softmax_lse [b, h, s] (it was [b, s, h, w], s out of range).
  for (const auto& t : j["runs"][0]["tensors"]) {
    INFO(t.dump());
    REQUIRE(t["worst_index"].size() == t["shape"].size());
    for (size_t d = 0; d < t["shape"].size(); ++d) CHECK(t["worst_index"][d].get<int64_t>() < t["shape"][d].get<int64_t>());
  }
  fs::remove_all(dir);
}

TEST_CASE("apps: replay checks expect verify result precision_limited and rejects unknown results", "[apps]") {
  const fs::path dir = temp_dir("verdict_replay");
  const std::string text = hcpsim::test::slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci/p2p_cp2_adversarial_fp32.yaml");
  REQUIRE(text.find("result: precision_limited") != std::string::npos);
  REQUIRE(run_hcpsim("replay scenarios/ci/p2p_cp2_adversarial_fp32.yaml").exit_code == 0);
  // The golden with `pattern` replaced by `with`, replayed from a copy.
  auto replay_edited = [&](const std::string& pattern, const std::string& with) {
    const fs::path f = dir / "edited.yaml";
    std::ofstream(f, std::ios::binary) << std::regex_replace(text, std::regex(pattern), with);
    return run_hcpsim("replay " + f.string());
  };
  // a golden that claims pass for it is a regression the replay names
  auto r = replay_edited("result: precision_limited", "result: pass");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("expect.verify.result: golden pass, actual precision_limited") != std::string::npos);
  r = replay_edited("result: precision_limited", "result: maybe");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("expect.verify.result") != std::string::npos);
  REQUIRE(r.output.find("use pass, precision_limited or fail") != std::string::npos);
  // a .nan golden requires the tensor to be non-finite
  r = replay_edited("dq: [0-9.e+-]+", "dq: .nan");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("expect.verify.max_rel_l2.dq: golden .nan (non-finite), actual") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: bf16_accumulation refuses --dump before work and reports result 'report' in JSON", "[apps]") {
  // It measures error growth over P = 1..8 and runs no single schedule: --dump was dropped without a word and the
  // JSON said "result": "pass" next to the text's REPORT.
  const std::string base = kScenario + "model.seq_length=128 --inject bf16_accumulation";
  auto r = run_hcpsim(base + " --dump /tmp/hcpsim_bf16_accumulation_never_written.h5");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  CHECK(r.output.find("--dump: bf16_accumulation measures how the dQ/dK/dV error grows") != std::string::npos);
  CHECK(r.output.find("REPORT") == std::string::npos);  // refused before the work
  CHECK_FALSE(std::filesystem::exists("/tmp/hcpsim_bf16_accumulation_never_written.h5"));
  const std::string json = (std::filesystem::temp_directory_path() /
                            ("hcpsim_bf16_report_" + std::to_string(::getpid()) + ".json")).string();
  r = run_hcpsim(base + " --json " + json);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j.at("result") == "report");
  CHECK(j.at("pass") == false);
  std::filesystem::remove(json);
}
