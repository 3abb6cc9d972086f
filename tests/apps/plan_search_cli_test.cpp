// `hcpsim plan` as a configuration search through the real binary: --json (parsed with nlohmann-json) and --csv
// byte-identical for 1 and 2 threads, the size on stderr first, the refusal above --max-configurations, the
// nothing-fits wording and bad list values.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <fmt/format.h>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

namespace fs = std::filesystem;
using hcpsim::test::run_hcpsim;

const std::string k70b = "scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml";
const std::string kNarrow = " --tp 4,8 --pp 1,2 --recompute none,full --micro-batch 1";

std::string slurp_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path scratch_dir() {
  const auto dir = fs::temp_directory_path() / "hcpsim_plan_search_cli_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("apps: plan --json and --csv of a PP and recompute search, identical on 1 and 2 threads",
          "[apps][plan]") {
  const auto dir = scratch_dir();
  std::string json_text[2], csv_text[2], stdout_text[2];
  for (int t = 1; t <= 2; ++t) {
    const std::string n = std::to_string(t);
    const fs::path js = dir / (n + ".json"), cs = dir / (n + ".csv");
    std::string cmd = "plan " + k70b + kNarrow;
    cmd += " --threads " + n;
    cmd += " --json " + js.string();
    cmd += " --csv " + cs.string();
    const auto r = run_hcpsim(cmd);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    json_text[t - 1] = slurp_file(js);
    csv_text[t - 1] = slurp_file(cs);
    // Without the size line on stderr, which names the thread count, and the "wrote" lines naming the files.
    const size_t from = r.output.find("\nscenario ") + 1;
    stdout_text[t - 1] = r.output.substr(from, r.output.find("\nwrote ") - from);
  }
  CHECK(json_text[0] == json_text[1]);
  CHECK(csv_text[0] == csv_text[1]);
  CHECK(stdout_text[0] == stdout_text[1]);
  const auto j = nlohmann::json::parse(json_text[0]);
  CHECK(j.at("scenario").at("path") == k70b);
  CHECK(j.at("objective") == "time");
  const auto& dims = j.at("request").at("dimensions");
  REQUIRE(dims.size() == 7);
  CHECK(dims[0].at("name") == "tp");
  CHECK(dims[0].at("values") == nlohmann::json::array({"4", "8"}));
  CHECK(dims[2].at("name") == "pp");
  CHECK(dims[4].at("values") == nlohmann::json::array({"none", "full"}));
  CHECK(j.at("request").at("model_gpus") == 64);
  CHECK(j.at("global_batch_size") == 8);
  CHECK(j.at("nothing_fits") == false);
  CHECK(j.at("winner") == "p2p TP8 PP1 full mbs1");
  CHECK(j.at("explanation").get<std::string>().rfind("p2p TP8 PP1 full mbs1 wins with ", 0) == 0);
  const auto& first = j.at("options").at(0);
  CHECK(first.at("rank") == 1);
  CHECK(first.at("label") == "p2p TP8 PP1 full mbs1");
  CHECK(first.at("tp") == 8);
  CHECK(first.at("cp") == 8);
  CHECK(first.at("pp") == 1);
  CHECK(first.at("recompute") == "full");
  CHECK(first.at("fits") == true);
  CHECK(first.at("step_time_s").get<double>() > 100.0);
  CHECK(first.at("memory_per_gpu_bytes").get<double>() < first.at("memory_capacity_bytes").get<double>());
  CHECK(first.at("a2a_intra_node").is_null());  // p2p has no all-to-all
  // The layer's idle time: the busiest GPU's exposed communication plus the load imbalance.
  for (const auto& o : j.at("options"))
    CHECK(o.at("layer_exposed_comm_s").get<double>() ==
          Approx(o.at("layer_critical_exposed_comm_s").get<double>() + o.at("layer_load_imbalance_s").get<double>())
              .epsilon(1e-9));
  CHECK(stdout_text[0].find("  busiest exp     imbalance") != std::string::npos);
  CHECK(stdout_text[0].find("--csv and --json give their sum as layer_exposed_comm_s; a2a node: whether each "
                            "all-to-all group stays inside a node)") != std::string::npos);
  // The rankings rest on the step model, whose errors docs/validation.md lists: plan says so, as simulate does.
  CHECK(stdout_text[0].find("\naccuracy: the step model is optimistic against every published run it is validated "
                            "on (docs/validation.md)") != std::string::npos);
  for (const auto& o : j.at("options")) CHECK(o.at("rank").is_null() != o.at("fits").get<bool>());
  CHECK(j.at("over_memory").at("count").get<size_t>() == j.at("over_memory").at("options").size());
  CHECK(j.at("over_memory").at("count").get<size_t>() > 0);
  // The closed form is a lower bound (no transient CP attention or TP buffers), and the text says so.
  CHECK(stdout_text[0].find("\nnot simulated, closed-form memory above the GPU (a lower bound: without the transient "
                            "CP attention and TP buffers a simulation adds): ") != std::string::npos);
  const auto& least = j.at("over_memory").at("options").at(0);
  CHECK(stdout_text[0].find(fmt::format("at least {:.2f} GB of {:.2f} GB\n",
                                        least.at("memory_per_gpu_bytes").get<double>() / 1e9,
                                        least.at("memory_capacity_bytes").get<double>() / 1e9)) != std::string::npos);
  CHECK(j.at("dropped").at("count").get<size_t>() > 0);
  CHECK(j.at("dropped").at("by_reason").at(0).at("count").get<size_t>() > 0);
  CHECK(j.at("estimate").at("simulated") == j.at("options").size());
  CHECK(j.contains("provenance"));
  CHECK(csv_text[0].rfind("rank,option,cp_comm_type,a2a_size,p2p_size,tp,cp,pp,vp,dp,recompute,", 0) == 0);
  CHECK(csv_text[0].find(",layer_exposed_comm_s,layer_critical_exposed_comm_s,layer_load_imbalance_s,") !=
        std::string::npos);
  // Every row has as many fields as the header (the over-memory and ruled-out rows leave the times empty).
  {
    std::istringstream lines(csv_text[0]);
    std::string line;
    std::getline(lines, line);
    const auto fields = [](const std::string& l) {
      size_t n = 1;
      bool quoted = false;
      for (char ch : l) {
        if (ch == '"') quoted = !quoted;
        if (ch == ',' && !quoted) ++n;
      }
      return n;
    };
    const size_t header = fields(line);
    CHECK(header == 25);
    while (std::getline(lines, line)) CHECK(fields(line) == header);
  }
  CHECK(csv_text[0].find("\n1,\"p2p TP8 PP1 full mbs1\",p2p,1,8,8,8,1,1,1,full,0,1,") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: plan prints its size on stderr first and refuses a search above --max-configurations",
          "[apps][plan]") {
  auto r = run_hcpsim("plan " + k70b + kNarrow + " --threads 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // stderr's size line comes before the answer (stdout, flushed at exit).
  CHECK(r.output.rfind("plan: searching 82 configurations (30 legal, 9 fit in memory by the closed form), simulating 9, ~", 0) == 0);
  CHECK(r.output.find(" s on 1 thread\nscenario ") != std::string::npos);
  r = run_hcpsim("plan " + k70b + kNarrow + " --max-configurations 2");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--max-configurations") != std::string::npos);
  CHECK(r.output.find("above the bound of 2") != std::string::npos);
  CHECK(r.output.find("rank  option") == std::string::npos);  // nothing simulated
}

TEST_CASE("apps: plan names no winner when nothing fits, and rejects bad list values", "[apps][plan]") {
  auto r = run_hcpsim("plan " + k70b + " cluster.gpu.memory_GB=40 --fixed tp,pp,vp,recompute,micro_batch");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("\nnothing fits in GPU memory, so there is no winner: the closest simulated option, ") !=
        std::string::npos);
  CHECK(r.output.find(" wins ") == std::string::npos);
  CHECK(r.output.find("\n   1  ") == std::string::npos);  // no rank 1 in the table
  CHECK(r.output.find("held by --fixed: tp 8; pp 1; vp 1; recompute full; micro_batch 1") != std::string::npos);
  for (const char* bad : {"--fixed tp,gpus", "--recompute none,most", "--pp 0", "--micro-batch x", "--cp 0", "--gpus 0"}) {
    const std::string option(bad);
    std::string cmd = "plan " + k70b;
    cmd += ' ';
    cmd += option;
    r = run_hcpsim(cmd);
    INFO(option << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(option.substr(0, option.find(' '))) != std::string::npos);
  }
}

TEST_CASE("apps: plan blames --tp and --pp when no TP*PP of the lists divides the GPUs", "[apps][plan]") {
  const std::string s = std::string(HCPSIM_SOURCE_DIR) + "/scenarios/llama32_1b_cp4_a2a_p2p.yaml";
  const auto r = run_hcpsim("plan " + s + " --tp 3 --quiet");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("--tp, --pp: 4 GPUs per model replica fit no TP*PP of the lists (TP 3, PP ") !=
        std::string::npos);
}

TEST_CASE("apps: plan --gpus larger than the cluster says that it plans on a larger cluster", "[apps][plan]") {
  // --gpus N fixes the replica size; a 4-node cluster grows to hold 64 GPUs, which was not said before.
  const std::string base = "plan scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml --tp 1 --pp 1 --vp 1 --recompute full "
                           "--micro-batch 1 --quiet ";
  const auto big = run_hcpsim(base + "--gpus 64");
  INFO(big.output);
  REQUIRE(big.exit_code == 0);
  CHECK(big.output.find("note: --gpus 64 needs 8 nodes of 8 GPUs; the scenario's cluster has 4: planned on 8 nodes "
                        "(set cluster.nodes to plan on another size)\n") != std::string::npos);
  const auto fits = run_hcpsim(base + "--gpus 32");
  CHECK(fits.exit_code == 0);
  CHECK(fits.output.find("note: --gpus") == std::string::npos);
}

TEST_CASE("apps: plan labels an option without context parallelism 'no CP', not by a cp_comm_type", "[apps][plan]") {
  // TP 4 on the scenario's 4 GPUs leaves CP 1, where cp_comm_type does nothing: "p2p TP4 ..." read as a p2p ring.
  const auto r = run_hcpsim("plan scenarios/llama32_1b_cp4_a2a_p2p.yaml --tp 4 --fixed pp,vp,recompute,micro_batch --quiet");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("   1  no CP TP4 PP1 none mbs1 ") != std::string::npos);
  CHECK(r.output.find("p2p TP4") == std::string::npos);
}

TEST_CASE("apps: plan --cp that fits nothing suggests more nodes, not --gpus (which --cp excludes)", "[apps][plan]") {
  // It suggested "--gpus N, so PP can grow"; adding it gave "error: --cp excludes --gpus".
  const auto r = run_hcpsim("plan scenarios/llama3_70b_256k_tp8_cp8_8xdgx_h100.yaml --cp 64 --tp 1 --quiet");
  INFO(r.output);
  CHECK(r.output.find("the search could not use: more nodes (cluster.nodes=N: with CP 64 held, TP x PP can grow "
                      "to the GPUs the cluster has)") != std::string::npos);
  CHECK(r.output.find("--gpus N") == std::string::npos);
}

TEST_CASE("apps: plan simulates every option tied with the third least when nothing fits", "[apps][plan]") {
  // The closed form leaves out the CP buffers, so the comm types of one layout tie; the cut at three went by label
  // and left out p2p, which needs the least CP memory, and named another option the closest.
  const auto r = run_hcpsim("plan scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=2048 "
                            "training.framework_overhead_GB=80 --fixed tp,pp,vp,micro_batch --quiet");
  REQUIRE(r.exit_code == 0);
  for (const char* expected : {"plan: 24 configurations, 4 simulated, 12 over memory, 8 ruled out;",
                               "\n   -  p2p TP1 PP1 full mbs1 ", "the closest simulated option, p2p TP1 PP1 full mbs1, needs "}) {
    INFO(expected << "\n" << r.output);
    CHECK(r.output.find(expected) != std::string::npos);
  }
}

TEST_CASE("apps: plan --csv leaves a TP x PP pair's unset layout fields empty", "[apps][plan]") {
  // TP 3 x PP 1 does not divide 32 GPUs: no option was formed, so it has no comm type, CP, VP, DP, recompute or
  // micro-batch (the CSV used to print the placeholders p2p, 1, 1, ...).
  const fs::path dir = fs::temp_directory_path() / "hcpsim_plan_sizes_only";
  fs::create_directories(dir);
  const auto r = run_hcpsim("plan tests/fixtures/plan/slow_network_cp32.yaml --tp 2,3 "
                            "--fixed pp,vp,recompute,micro_batch --csv " + (dir / "p.csv").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(slurp_file(dir / "p.csv").find("\n,\"TP3 PP1\",,,,3,,1,,,,,,,,,,,,,,,no,,\"32 GPUs are not divisible by "
                                       "TP*PP = 3\"\n") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("apps: plan's not-simulated list gives one line per layout, its CP variants joined", "[apps][plan]") {
  // The three closest options used to be one layout three times (p2p, all_gather, a2a+p2p [2,4] at TP4 PP2 VP2,
  // all at 85.77 GB): now the three closest layouts.
  const std::string out = run_hcpsim("plan " + k70b).output;
  const size_t list = out.find("; the closest:\n");
  REQUIRE(list != std::string::npos);
  const std::vector<std::string> lines = {
      "  a2a+p2p [2,4] / all_gather / p2p TP4 PP2 VP2 full mbs1 at least 85.77 GB of 85.52 GB",
      "  all_gather / p2p TP8 PP1 full mbs2             at least 88.49 GB of 85.52 GB",
      "  a2a / all_gather / p2p TP4 PP8 VP2 full mbs1   at least 90.26 GB of 85.52 GB"};
  size_t at = list;
  for (const std::string& line : lines) {
    INFO(line << "\n" << out);
    at = out.find("\n" + line + "\n", at);
    REQUIRE(at != std::string::npos);
  }
}

