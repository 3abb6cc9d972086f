// compare, shard and gather as a user runs them, and the provenance every output carries: the built binary on dumps
// the tests make themselves.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "hcpsim/io/provenance.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/rank_file.hpp"
#include "run_command.hpp"

namespace {

using hcpsim::test::run_hcpsim;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Every dataset of two dumps holds the same values, bit for bit (/meta and /metrics aside).
void require_same_tensors(const hcpsim::DumpContents& a, const hcpsim::DumpContents& b) {
  const hcpsim::HostTensor* xa[] = {&a.inputs.q, &a.inputs.k, &a.inputs.v, &a.inputs.dout, &a.reference.out,
                                    &a.reference.softmax_lse, &a.reference.dq, &a.reference.dk, &a.reference.dv,
                                    &a.hcp.out, &a.hcp.softmax_lse, &a.hcp.dq, &a.hcp.dk, &a.hcp.dv};
  const hcpsim::HostTensor* xb[] = {&b.inputs.q, &b.inputs.k, &b.inputs.v, &b.inputs.dout, &b.reference.out,
                                    &b.reference.softmax_lse, &b.reference.dq, &b.reference.dk, &b.reference.dv,
                                    &b.hcp.out, &b.hcp.softmax_lse, &b.hcp.dq, &b.hcp.dk, &b.hcp.dv};
  for (size_t i = 0; i < std::size(xa); ++i) {
    INFO("dataset " << i);
    REQUIRE(xa[i]->elements() > 0);
    REQUIRE(xa[i]->same_shape(*xb[i]));
    REQUIRE(xa[i]->values() == xb[i]->values());
  }
}

}  // namespace

TEST_CASE("apps: compare takes the tolerance from the reference file and refuses an empty comparison", "[apps]") {
  const fs::path dir = fresh_dir("hcpsim_compare_f12");
  const std::string good = (dir / "good.h5").string();
  auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --dump " + good);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // B = A * (1 + 1e-3), once claiming fp32 and once bf16 in its own /meta.
  hcpsim::DumpContents b = hcpsim::read_dump(good);
  for (hcpsim::HostTensor* t : {&b.hcp.out, &b.hcp.softmax_lse, &b.hcp.dq, &b.hcp.dk, &b.hcp.dv})
    for (double& v : t->values()) v *= 1 + 1e-3;
  const std::string fp32 = (dir / "perturb_fp32.h5").string(), bf16 = (dir / "perturb_bf16.h5").string();
  hcpsim::write_dump(fp32, b);
  b.meta_text["dtype"] = "bf16";
  b.dtype = hcpsim::Dtype::bf16;
  hcpsim::write_dump(bf16, b);
  for (const std::string& claimed : {fp32, bf16}) {
    r = run_hcpsim("compare " + good + " " + claimed);
    INFO(r.output);
    REQUIRE(r.exit_code == 1);  // A is fp32: rtol = atol = 1e-5 whatever B claims
    REQUIRE(r.output.find("atol 1.00e-05, rtol 1.00e-05 (the default of A's dtype fp32)") != std::string::npos);
    REQUIRE(r.output.find("result: FAIL: worst tensor") != std::string::npos);
  }
  // The claim changes the verdict only where that file is the reference, and then the table says so.
  r = run_hcpsim("compare " + bf16 + " " + good);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("atol 2.50e-02, rtol 2.50e-02 (the default of A's dtype bf16)") != std::string::npos);
  REQUIRE(r.output.find("* dtype             bf16") != std::string::npos);  // the claim is shown as a difference
  REQUIRE(r.output.find("* hcpsim_version") == std::string::npos);
  r = run_hcpsim("compare " + good + " " + bf16 + " --rtol 2e-3");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("atol 2.00e-03, rtol 2.00e-03 (--rtol, and atol as it)") != std::string::npos);
  // --atol alone: rtol is still A's dtype's, and the header says so (it said "command line" for both).
  r = run_hcpsim("compare " + good + " " + bf16 + " --atol 1e-3");
  REQUIRE(r.output.find("atol 1.00e-03, rtol 1.00e-05 (--atol; rtol the default of A's dtype fp32)") !=
          std::string::npos);
  // A reference without /meta dtype (a user's own file) is judged at fp64's tolerance, and the header says why.
  hcpsim::DumpContents plain = hcpsim::read_dump(good);
  plain.meta_text.erase("dtype");
  const std::string no_dtype = (dir / "no_dtype.h5").string();
  hcpsim::write_dump(no_dtype, plain);
  r = run_hcpsim("compare " + no_dtype + " " + good);
  REQUIRE(r.exit_code == 0);  // the same values
  REQUIRE(r.output.find("atol 1.00e-10, rtol 1.00e-10 (the default of fp64: A's /meta names no dtype)") !=
          std::string::npos);
  // A dump whose tensors all have 0 elements compares nothing: refused, not PASS.
  hcpsim::DumpContents zero;
  zero.dtype = hcpsim::Dtype::fp32;
  zero.meta_text["dtype"] = "fp32";
  for (hcpsim::HostTensor* t : {&zero.inputs.q, &zero.inputs.k, &zero.inputs.v, &zero.inputs.dout, &zero.reference.out,
                                &zero.reference.dq, &zero.reference.dk, &zero.reference.dv, &zero.hcp.out, &zero.hcp.dq,
                                &zero.hcp.dk, &zero.hcp.dv})
    *t = hcpsim::HostTensor(1, 0, 2, 4);
  zero.reference.softmax_lse = zero.hcp.softmax_lse = hcpsim::HostTensor(1, 0, 2, 1);
  const std::string empty = (dir / "zero_seq.h5").string();
  hcpsim::write_dump(empty, zero);
  r = run_hcpsim("compare " + empty + " " + empty);
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: " + empty + ": nothing to compare: every compared tensor of /hcp has 0 elements") !=
          std::string::npos);
  REQUIRE(r.output.find("PASS") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: compare --tensors compares a subset, so a file without softmax_lse can be checked", "[apps]") {
  const fs::path dir = fresh_dir("hcpsim_compare_subset");
  const std::string a = (dir / "a.h5").string(), nolse = (dir / "nolse.h5").string();
  auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --dump " + a);
  REQUIRE(r.exit_code == 0);
  hcpsim::write_dump(nolse, hcpsim::read_dump(a), {"/hcp/lse", "/reference/lse"});
  r = run_hcpsim("compare " + a + " " + nolse);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find(nolse + ": missing dataset /hcp/lse; fix: write it (the README's 'HDF5 dump layout', e.g. "
                        "with h5py; a rank file of 'hcpsim shard' goes through 'hcpsim gather' first); 'hcpsim "
                        "compare' can leave 'softmax_lse' out (--tensors out,dq,dk,dv), while verify --reference, "
                        "shard and gather need all five tensors") !=
          std::string::npos);
  r = run_hcpsim("compare " + a + " " + nolse + " --tensors out,dq,dk,dv");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("softmax_lse") == std::string::npos);
  REQUIRE(r.output.find("  dv           [1, 64, 2, 64]") != std::string::npos);
  REQUIRE(r.output.find("result: PASS") != std::string::npos);
  r = run_hcpsim("compare " + a + " " + a + " --tensors lse");  // the dataset's name is accepted too
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("  softmax_lse  [1, 8, 64]") != std::string::npos);
  REQUIRE(r.output.find("  out ") == std::string::npos);
  r = run_hcpsim("compare " + a + " " + a + " --tensors out,dz");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("--tensors: unknown tensor 'dz'") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: a dump's /meta holds the effective scenario, and re-running it reproduces the dump", "[apps]") {
  const fs::path dir = fresh_dir("hcpsim_provenance");
  const std::string d1 = (dir / "d1.h5").string(), d2 = (dir / "d2.h5").string(), js = (dir / "v.json").string();
  const std::string overrides = "model.seq_length=64 oracle.seed=7 \"parallel.hierarchical_context_parallel_sizes=[2,2]\"";
  auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml " + overrides + " --dtype bf16 --dump " + d1 +
                      " --json " + js);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const hcpsim::DumpContents a = hcpsim::read_dump(d1);
  const std::string yaml = a.meta_text.at("scenario_yaml");
  // The effective values, not the file's: seq_length 64, seed 7, the --dtype of the run.
  REQUIRE(yaml.find("seq_length: 64\n") != std::string::npos);
  REQUIRE(yaml.find("seed: 7\n") != std::string::npos);
  REQUIRE(yaml.find("dtype: bf16\n") != std::string::npos);
  REQUIRE(a.meta_text.at("overrides") ==
          "[\"model.seq_length=64\",\"oracle.seed=7\",\"parallel.hierarchical_context_parallel_sizes=[2,2]\"]");
  REQUIRE(a.meta_text.at("scenario_digest") == hcpsim::content_digest(yaml));
  REQUIRE(a.meta_text.at("hcpsim_version") == hcpsim::hcpsim_version());
  REQUIRE(a.meta_text.at("compiler") == hcpsim::build_compiler());
  REQUIRE(a.meta_text.at("x86_level") == hcpsim::build_x86_level());
  REQUIRE(a.meta_text.at("cuda") == (hcpsim::build_cuda() ? "on" : "off"));
  REQUIRE(a.meta_number.at("seed") == 7);
  const auto j = nlohmann::json::parse(slurp(js));
  REQUIRE(j.at("provenance").at("scenario_digest") == a.meta_text.at("scenario_digest"));
  REQUIRE(j.at("provenance").at("scenario_yaml") == yaml);
  REQUIRE(j.at("provenance").at("seed") == 7);
  REQUIRE(j.at("provenance").at("overrides").size() == 3);
  REQUIRE(j.at("provenance").at("compiler") == hcpsim::build_compiler());
  // The effective YAML alone, no overrides, no --dtype: the same tensors bit for bit.
  const fs::path eff = dir / "effective.yaml";
  std::ofstream(eff) << yaml;
  r = run_hcpsim("verify " + eff.string() + " --dump " + d2);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const hcpsim::DumpContents b = hcpsim::read_dump(d2);
  require_same_tensors(a, b);
  REQUIRE(b.meta_text.at("scenario_yaml") == yaml);  // to_yaml is a fixed point
  REQUIRE(b.meta_text.at("overrides") == "[]");
  // compare shows where the two files' provenance differs: the overrides, not the scenario.
  r = run_hcpsim("compare " + d1 + " " + d2);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("provenance differs (/meta; * marks a difference)") != std::string::npos);
  REQUIRE(r.output.find("* overrides ") != std::string::npos);
  REQUIRE(r.output.find("  scenario_digest   " + a.meta_text.at("scenario_digest")) != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: simulate --summary and --trace carry the provenance of the run", "[apps]") {
  const fs::path dir = fresh_dir("hcpsim_provenance_sim");
  const std::string sum = (dir / "s.json").string(), trace = (dir / "t.json").string();
  auto r = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=4096 --summary " + sum +
                      " --trace " + trace);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto s = nlohmann::json::parse(slurp(sum));
  const auto t = nlohmann::json::parse(slurp(trace));
  for (const auto& p : {s.at("provenance"), t.at("otherData")}) {
    REQUIRE(p.at("hcpsim_version") == hcpsim::hcpsim_version());
    REQUIRE(p.at("overrides") == nlohmann::json::array({"model.seq_length=4096"}));
    REQUIRE(p.at("seed") == 1234);
    REQUIRE(p.at("scenario_digest") == hcpsim::content_digest(p.at("scenario_yaml").get<std::string>()));
    REQUIRE(p.at("scenario_yaml").get<std::string>().find("seq_length: 4096\n") != std::string::npos);
  }
  REQUIRE(s.at("total_ps").get<int64_t>() > 0);  // the summary itself is unchanged around it
  fs::remove_all(dir);
}

namespace {

/// What shard and gather refuse, on the dump and rank files "shard then gather" left in `dir`: a rank file without
/// the framework's outputs, a missing rank, a rank given twice, a rank file where a dump belongs, a rank outside
/// the group; each named, exit 2.
void check_gather_refusals(const fs::path& dir) {
  const std::string dump = (dir / "dump.h5").string(), inputs_only = (dir / "in0.h5").string();
  auto r = run_hcpsim("shard " + dump + " --cp-rank 0 -o " + inputs_only);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("/outputs") == std::string::npos);
  r = run_hcpsim("gather " + dump + " " + inputs_only + " -o " + (dir / "x.h5").string());
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find(inputs_only + ": missing dataset /outputs/out") != std::string::npos);
  r = run_hcpsim("gather " + dump + " " + (dir / "rank0.h5").string() + " -o " + (dir / "x.h5").string());
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("1 of the dump's 4 CP ranks given") != std::string::npos);
  // The same rank file twice is called that, with the file that gave the rank first ("outside ... or given twice").
  const std::string rank0 = (dir / "rank0.h5").string();
  r = run_hcpsim("gather " + dump + " " + rank0 + " " + rank0 + " -o " + (dir / "x.h5").string());
  REQUIRE(r.exit_code == 2);
  CHECK(r.output.find(rank0 + ": /meta cp_rank 0 was given already, by '" + rank0 + "'") != std::string::npos);
  // A rank file where a dump belongs is named as such (shard and compare gave compare's --tensors advice).
  for (const std::string& cmd : {"shard " + inputs_only + " --cp-rank 0 -o " + (dir / "y.h5").string(),
                                 "compare " + dump + " " + inputs_only}) {
    r = run_hcpsim(cmd);
    INFO(cmd << "\n" << r.output);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.output.find(inputs_only + ": this is a rank file of 'hcpsim shard'") != std::string::npos);
  }
  r = run_hcpsim("shard " + dump + " --cp-rank 4 -o " + inputs_only);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("--cp-rank: cp_rank 4 is outside the dump's CP group") != std::string::npos);
}

}  // namespace

TEST_CASE("apps: shard then gather reproduces the dump's outputs for every builder", "[apps]") {
  const fs::path dir = fresh_dir("hcpsim_shard_gather");
  struct Case {
    const char* scenario;
    const char* first_tokens;  ///< /tokens of cp_rank 0's q
  };
  // S = 64 in 2·cp zigzag chunks of 8: cp_rank 0 holds chunks 0 and 7 (p2p, a2a+p2p ring of 2: chunks of 16).
  const Case cases[] = {{"scenarios/ci/p2p_cp4_causal_mha.yaml", "tokens 0-7,56-63"},
                        {"scenarios/ci/a2a_cp4_causal_gqa.yaml", "tokens 0-7,56-63"},
                        {"scenarios/ci/hcp_2x2_causal_gqa.yaml", "tokens 0-7,56-63"},
                        {"scenarios/ci/all_gather_cp4_causal.yaml", "tokens 0-7,56-63"}};
  for (const Case& c : cases) {
    INFO(c.scenario);
    const std::string dump = (dir / "dump.h5").string(), gathered = (dir / "gathered.h5").string();
    auto r = run_hcpsim(std::string("verify ") + c.scenario + " model.seq_length=64 --dump " + dump);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::string ranks;
    for (int g = 0; g < 4; ++g) {
      const std::string rank = (dir / ("rank" + std::to_string(g) + ".h5")).string();
      r = run_hcpsim("shard " + dump + " --cp-rank " + std::to_string(g) + " --outputs -o " + rank);
      INFO(r.output);
      REQUIRE(r.exit_code == 0);
      if (g == 0) REQUIRE(r.output.find(c.first_tokens) != std::string::npos);
      // /outputs/lse printed as it is stored, [b, h, s] (it printed the internal [b, s, h, 1]).
      if (g == 0) {
        const size_t at = r.output.find("/outputs lse      [1, ");
        REQUIRE(at != std::string::npos);
        const std::string shape = r.output.substr(at + 17, r.output.find(']', at) - at - 16);
        CHECK(std::count(shape.begin(), shape.end(), ',') == 2);  // [b, h, s], not [b, s, h, 1]
      }
      ranks += " " + rank;
    }
    r = run_hcpsim("gather " + dump + ranks + " -o " + gathered);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    require_same_tensors(hcpsim::read_dump(dump), hcpsim::read_dump(gathered));
    r = run_hcpsim("compare " + dump + " " + gathered + " --rtol 0 --atol 0");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.output.find("* backend ") != std::string::npos);
  }
  check_gather_refusals(dir);
  const std::string dump = (dir / "dump.h5").string();
  hcpsim::test::CommandRun r;
  // softmax_lse of the wrong shape is named in the file's own layout, [b, h, s], not the internal [b, s, h, 1].
  {
    hcpsim::RankFile f = hcpsim::read_rank_file((dir / "rank0.h5").string());
    auto lse = std::find_if(f.outputs.begin(), f.outputs.end(), [](const auto& t) { return t.name == "lse"; });
    REQUIRE(lse != f.outputs.end());
    const int64_t rows = lse->values.rows(), heads = lse->values.heads();
    lse->values = hcpsim::HostTensor(1, rows / 2, heads * 2, 1, 0.0);  // [1, 2h, s/2] in the file
    lse->tokens.resize(static_cast<size_t>(rows / 2));
    const std::string bad_lse = (dir / "bad_lse0.h5").string();
    hcpsim::write_rank_file(bad_lse, f);
    std::string mixed = " " + bad_lse;
    for (int g = 1; g < 4; ++g) mixed += " " + (dir / ("rank" + std::to_string(g) + ".h5")).string();
    r = run_hcpsim("gather " + dump + mixed + " -o " + (dir / "x.h5").string());
    INFO(r.output);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.output.find(fmt::format("/outputs/lse is [1, {}, {}] but cp_rank 0 holds [1, {}, {}]", heads * 2,
                                      rows / 2, heads, rows)) != std::string::npos);
  }
  // Rank files of another dump (another seed): named, not gathered into a FAIL that looks like an HCP bug.
  const std::string other = (dir / "seed99.h5").string();
  r = run_hcpsim("verify scenarios/ci/all_gather_cp4_causal.yaml model.seq_length=64 oracle.seed=99 --dump " + other);
  REQUIRE(r.exit_code == 0);
  std::string other_ranks;
  for (int g = 0; g < 4; ++g) {
    const std::string rank = (dir / ("other" + std::to_string(g) + ".h5")).string();
    REQUIRE(run_hcpsim("shard " + other + " --cp-rank " + std::to_string(g) + " --outputs -o " + rank).exit_code == 0);
    other_ranks += " " + rank;
  }
  r = run_hcpsim("gather " + dump + other_ranks + " -o " + (dir / "x.h5").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("other0.h5: this rank file was cut from another dump (") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: shard prints a one-token run of packed sequences as the token", "[apps]") {
  // Packed sequences of 1, 9 and 17 tokens (padded to 8, 16, 24): one-token runs print as the token ("0", not
  // "0-0"); cp_rank 0 holds each sequence's first chunk, then its last.
  const fs::path dir = fresh_dir("hcpsim_shard_thd_" + std::to_string(getpid()));
  const std::string thd = (dir / "thd.h5").string();
  REQUIRE(run_hcpsim("verify scenarios/ci/thd_p2p_cp4_causal.yaml \"model.packed_sequence_lengths=[1,9,17]\" --dump " +
                     thd).exit_code == 0);
  const auto r = run_hcpsim("shard " + thd + " --cp-rank 0 -o " + (dir / "thd0.h5").string());
  INFO(r.output);
  CHECK(r.output.find("tokens 0,8-9,24-26,7,22-23,45-47\n") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: a dump stores an effective scenario larger than an HDF5 compact attribute (64 KiB)", "[apps]") {
  const fs::path dir = fresh_dir("hcpsim_provenance_large");
  std::string yaml = slurp(std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  const std::string long_name(70000, 'x');
  yaml.replace(yaml.find("name: llama32_1b_cp4_a2a_p2p"), 28, "name: " + long_name);
  const fs::path scenario = dir / "large.yaml";
  std::ofstream(scenario) << yaml;
  const std::string a = (dir / "a.h5").string(), b = (dir / "b.h5").string();
  for (const std::string& d : {a, b}) {
    const auto r = run_hcpsim("verify " + scenario.string() + " model.seq_length=64 --dump " + d);
    REQUIRE(r.exit_code == 0);
  }
  const hcpsim::DumpContents c = hcpsim::read_dump(a);
  REQUIRE(c.meta_text.at("scenario_yaml").size() > 70000);
  REQUIRE(c.meta_text.at("scenario_yaml").find("name: " + long_name + "\n") != std::string::npos);
  REQUIRE(slurp(a) == slurp(b));  // still byte-identical run to run
  fs::remove_all(dir);
}

TEST_CASE("apps: a rank file keeps the dump's seed exactly, above 2^53 too", "[apps]") {
  // The seed went through a double: 2^53 + 1 was written as 2^53.
  const fs::path dir = fresh_dir("hcpsim_rank_seed");
  const std::string dump = (dir / "d.h5").string(), rank = (dir / "r0.h5").string();
  auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 oracle.seed=9007199254740993 "
                      "--dump " + dump);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_hcpsim("shard " + dump + " --cp-rank 0 --outputs -o " + rank);
  REQUIRE(r.exit_code == 0);
  const hcpsim::RankFile f = hcpsim::read_rank_file(rank);
  REQUIRE(f.seed.has_value());
  CHECK(*f.seed == 9007199254740993ULL);
  // The dump's provenance, whole (the scenario, the backend, the injector, the mask and layout were left out).
  const hcpsim::DumpContents source = hcpsim::read_dump(dump);
  for (const char* key : {"backend", "inject", "attn_mask_type", "qkv_format", "input_distribution", "scenario_yaml",
                          "scenario_digest", "overrides", "dtype", "cp_comm_type"}) {
    INFO(key);
    REQUIRE(source.meta_text.count(key) == 1);
    REQUIRE(f.meta_text.count(key) == 1);
    CHECK(f.meta_text.at(key) == source.meta_text.at(key));
  }
  CHECK(f.meta_text.at("attn_mask_type") == "causal");
  CHECK(f.meta_text.at("scenario_yaml").find("seed: 9007199254740993") != std::string::npos);
  std::string ranks;
  for (int g = 0; g < 4; ++g) {
    const std::string p = (dir / fmt::format("r{}.h5", g)).string();  // not "r" + ...: GCC 12 -Wrestrict
    if (g > 0) REQUIRE(run_hcpsim("shard " + dump + " --cp-rank " + std::to_string(g) + " --outputs -o " + p).exit_code == 0);
    ranks += " " + p;
  }
  CHECK(run_hcpsim("gather " + dump + ranks + " -o " + (dir / "g.h5").string()).exit_code == 0);
  fs::remove_all(dir);
}

TEST_CASE("apps: HDF5 outputs refuse a device before any work, named by their own option", "[apps]") {
  // verify ran the whole check and printed PASS before refusing /dev/null; gather's message named --dump.
  const fs::path dir = fs::temp_directory_path() / ("hcpsim_hdf5_device_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string dump = (dir / "dump.h5").string();
  auto r = run_hcpsim("verify scenarios/ci/hcp_2x2_causal_gqa.yaml model.seq_length=64 --dump " + dump);
  REQUIRE(r.exit_code == 0);
  std::string all_ranks;
  for (int g = 0; g < 4; ++g) {
    const std::string rank = (dir / ("rank" + std::to_string(g) + ".h5")).string();
    r = run_hcpsim("shard " + dump + " --cp-rank " + std::to_string(g) + " --outputs -o " + rank);
    REQUIRE(r.exit_code == 0);
    all_ranks += " " + rank;
  }
  for (const auto& [cmd, option] :
       {std::pair{std::string("verify scenarios/ci/hcp_2x2_causal_gqa.yaml model.seq_length=64 --dump /dev/null"),
                  std::string("--dump")},
        std::pair{"shard " + dump + " --cp-rank 0 -o /dev/null", std::string("-o")},
        std::pair{"gather " + dump + all_ranks + " -o /dev/null", std::string("-o")}}) {
    r = run_hcpsim(cmd);
    INFO(cmd << "\n" << r.output);
    REQUIRE(r.exit_code == 2);
    CHECK(r.output.find("/dev/null: " + option + ": will not write the ") != std::string::npos);
    CHECK(r.output.find("(a character device): an HDF5 ") != std::string::npos);
    CHECK(r.output.find("result:") == std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("apps: compare's FAIL line gives both values at the worst element and names the file in error",
          "[apps]") {
  // It gave only the index, and a NaN in the baseline A read as B's failure.
  const fs::path dir = fresh_dir("hcpsim_compare_worst_" + std::to_string(getpid()));
  auto dumps = [&](const std::string& scenario, const std::string& stem) {
    const std::string text = slurp(fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci" / scenario);
    const auto at = text.find("  inject: ");
    REQUIRE(at != std::string::npos);
    std::ofstream(dir / (stem + "_clean.yaml")) << text.substr(0, at) + text.substr(text.find('\n', at) + 1);
    for (const std::string& which : {std::string("_clean.yaml"), std::string("_fault.yaml")}) {
      const fs::path yaml =
          which == "_clean.yaml" ? dir / (stem + which) : fs::path(HCPSIM_SOURCE_DIR) / "scenarios/ci" / scenario;
      const auto r = run_hcpsim("verify --quiet --dump '" + (dir / (stem + which + ".h5")).string() + "' '" +
                                yaml.string() + "'");
      INFO(r.output);
      CHECK(r.exit_code == (which == "_clean.yaml" ? 0 : 1));  // verify finds the injected fault: exit 1
      REQUIRE(fs::exists(dir / (stem + which + ".h5")));
    }
    return std::pair{(dir / (stem + "_clean.yaml.h5")).string(), (dir / (stem + "_fault.yaml.h5")).string()};
  };
  const auto [clean, fault] = dumps("fault_dropped_lse_merge.yaml", "lse");
  auto r = run_hcpsim("compare '" + clean + "' '" + fault + "'");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  // fp64 dumps: allowed = 1e-10 + 1e-10·|A|; A is the clean run, equal to its fp64 reference at this element.
  const std::regex line(
      "result: FAIL: worst tensor out \\(6144 elements outside tolerance\\), element \\[b=0, s=87, h=3, w=1\\]: "
      "B (-?[0-9.e-]+), A (-?[0-9.e-]+) \\(allowed \\|B - A\\| <= 1\\.03e-10\\), A's /reference (-?[0-9.e-]+)\n");
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, line));
  CHECK(m[2].str() == m[3].str());
  CHECK(std::abs(std::stod(m[1].str()) - std::stod(m[2].str())) > 0.3);  // max_abs_err 3.776e-01
  // Packed sequences with an unguarded empty merge: NaN softmax_lse where the reference holds -inf (empty rows).
  const auto [thd_clean, thd_fault] = dumps("thd_fault_unguarded_empty_merge.yaml", "thd");
  r = run_hcpsim("compare '" + thd_fault + "' '" + thd_clean + "'");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("B -inf, A nan, A's /reference -inf; the error is A's: the baseline is not finite where the "
                      "reference is\n") != std::string::npos);
  r = run_hcpsim("compare '" + thd_clean + "' '" + thd_fault + "'");
  CHECK(r.output.find("B nan, A -inf, A's /reference -inf; B is not finite where the reference is\n") !=
        std::string::npos);
  fs::remove_all(dir);
}
