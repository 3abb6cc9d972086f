// Runs the real hcpsim binary: exit codes and messages as a user sees them.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "catch_compat.hpp"
#include "run_command.hpp"

namespace {

using Run = hcpsim::test::CommandRun;
using hcpsim::test::run_hcpsim;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::filesystem::path> yaml_files(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(HCPSIM_SOURCE_DIR) + "/" + dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("apps: --version prints the version and exits 0", "[apps]") {
  const auto r = run_hcpsim("--version");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.rfind("hcpsim 0.1.0", 0) == 0);
}

TEST_CASE("apps: every bundled scenario validates and prints the Megatron group layout", "[apps]") {
  const auto files = yaml_files("scenarios");
  REQUIRE(files.size() >= 3);
  for (const auto& f : files) {
    INFO(f);
    const auto r = run_hcpsim("validate " + f.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.output.find("CONTEXT_PARALLEL_GROUP: global ranks [") != std::string::npos);
    // a2a+p2p scenarios also print both levels of hierarchical_context_parallel_sizes (the 70B one runs p2p,
    // the layout plan found to fit).
    if (r.output.find("cp_comm_type a2a+p2p:") != std::string::npos)
      REQUIRE(r.output.find("HIERARCHICAL_CONTEXT_PARALLEL_GROUPS") != std::string::npos);
    REQUIRE(r.output.find("valid: ") != std::string::npos);
  }
  REQUIRE(run_hcpsim("validate scenarios/llama32_1b_cp4_a2a_p2p.yaml").output.find(
              "HIERARCHICAL_CONTEXT_PARALLEL_GROUPS") != std::string::npos);
  // Llama-3-8B [8,2] on 4 nodes: a2a inside each node, p2p ring between nodes 0 and 1 (DP 2 fills nodes 2, 3).
  const auto r = run_hcpsim("validate scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml");
  REQUIRE(r.output.find("level 0 (a2a) group 0: global ranks [0, 1, 2, 3, 4, 5, 6, 7] on nodes [0, 0, 0, 0, 0, 0, "
                        "0, 0] -> intra-node") != std::string::npos);
  REQUIRE(r.output.find("level 1 (p2p) group 3: global ranks [3, 11] on nodes [0, 1] -> ring crosses nodes") !=
          std::string::npos);
  REQUIRE(r.output.find("data_parallel_size=2") != std::string::npos);
  CHECK(r.output.find("after the a2a each rank holds 65536 tokens of 4 query heads") != std::string::npos);
  // Plain p2p has no a2a: the split line and the table said "after the a2a" all the same.
  const auto p2p = run_hcpsim("validate scenarios/ci/p2p_cp4_causal_mha.yaml").output;
  CHECK(p2p.find("without an a2a, each rank holds 32 tokens of 4 query heads") != std::string::npos);
  CHECK(p2p.find("a2a each rank") == std::string::npos);
  CHECK(p2p.find("tokens in attention") != std::string::npos);
}

TEST_CASE("apps: every file in scenarios/invalid exits 2 with its expected message", "[apps]") {
  const auto files = yaml_files("scenarios/invalid");
  REQUIRE(files.size() >= 15);
  const std::regex expect_re(R"re(validate: \{exit_code: 2, error: "(.*)"\})re");
  for (const auto& f : files) {
    INFO(f);
    std::smatch m;
    const std::string text = read_file(f);
    REQUIRE(std::regex_search(text, m, expect_re));
    const auto r = run_hcpsim("validate " + f.string());
    INFO(r.output);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.output.find(m[1].str()) != std::string::npos);
    REQUIRE(r.output.rfind("error: " + f.string() + ":", 0) == 0);  // names the file (and line:col)
    REQUIRE(r.output.find("; fix: ") != std::string::npos);
  }
}

TEST_CASE("apps: bad command lines exit 2 with a clear message", "[apps]") {
  auto r = run_hcpsim("validate scenarios/does_not_exist.yaml");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: scenarios/does_not_exist.yaml: cannot open the scenario file") != std::string::npos);
  r = run_hcpsim("validate scenarios/llama32_1b_cp4_a2a_p2p.yaml \"parallel.hierarchical_context_parallel_sizes=[4,2]\"");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("error: override 'parallel.hierarchical_context_parallel_sizes=[4,2]': "
                        "parallel.hierarchical_context_parallel_sizes: 4*2 = 8 != context_parallel_size 4") !=
          std::string::npos);
  r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml --threads 0");
  REQUIRE(r.exit_code == 2);
  r = run_hcpsim("simulate --no-such-flag scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  REQUIRE(r.exit_code == 2);
  // all_gather has a builder now: verify runs it (and passes).
  r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml parallel.cp_comm_type=all_gather "
                 "parallel.hierarchical_context_parallel_sizes=null model.seq_length=64");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("verify all_gather [A=1, P=4]") != std::string::npos);
  r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml --dtype fp8");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("--dtype: unknown dtype 'fp8'") != std::string::npos);
  // A dtype in capitals is the same dtype (it was refused while parallel.order takes any case).
  r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 --threads 1 --dtype FP16");
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("on the CPU in fp16") != std::string::npos);
  r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml --inject no_such_fault");
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("hcpsim verify --inject list") != std::string::npos);
}

TEST_CASE("apps: verify --backend gpu without a usable device exits 3", "[apps]") {
  const auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --backend gpu");
  INFO(r.output);
  if (r.output.find("measured on") != std::string::npos) {  // a GPU host: the run itself must pass
    REQUIRE(r.exit_code == 0);
    return;
  }
  REQUIRE(r.exit_code == 3);
  REQUIRE(r.output.rfind("device error: ", 0) == 0);
  // The cause (no driver/device, or a build without CUDA) and the fix are named.
  const bool cause = r.output.find("no usable CUDA device") != std::string::npos ||
                     r.output.find("built without CUDA") != std::string::npos;
  REQUIRE(cause);
  REQUIRE(r.output.find("--backend cpu") != std::string::npos);
}

TEST_CASE("apps: GPU-only options and fp64 on the GPU are bad input (exit 2) with a fix", "[apps]") {
  for (const char* args : {"--trace out.json", "--ops-csv out.csv", "--devices 4", "--kernels clear"}) {
    const auto r = run_hcpsim(std::string("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml ") + args);
    INFO(args << "\n" << r.output);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.output.find("only the GPU backend") != std::string::npos);
    REQUIRE(r.output.find("fix: add --backend gpu") != std::string::npos);
  }
  const auto fp64 = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml --backend gpu --dtype fp64");
  REQUIRE(fp64.exit_code == 2);
  REQUIRE(fp64.output.find("--dtype: the GPU backend computes in fp32, bf16 or fp16") != std::string::npos);
  const auto devices = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml --backend gpu --devices 3");
  REQUIRE(devices.exit_code == 2);
  REQUIRE(devices.output.find("fix: use --devices 4 or --devices 1") != std::string::npos);
}

TEST_CASE("apps: verify --reference reuses a dump's inputs and reference, and rejects a mismatched one", "[apps]") {
  const auto dir = std::filesystem::temp_directory_path() / ("hcpsim_ref_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string dump = (dir / "cpu.h5").string();
  const auto made = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 --dump " + dump);
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  const auto again =
      run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 --reference " + dump);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  // The same table: the reference and inputs are the dump's, bit for bit.
  REQUIRE(again.output.substr(again.output.find("  tensor")) == made.output.substr(made.output.find("  tensor"),
                                                                                   again.output.size() -
                                                                                       again.output.find("  tensor")));
  const auto other =
      run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=512 --reference " + dump);
  REQUIRE(other.exit_code == 2);
  REQUIRE(other.output.find("--reference: the dump's q is [1, 256,") != std::string::npos);
  const auto dtype =
      run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 --dtype bf16 --reference " + dump);
  REQUIRE(dtype.exit_code == 2);
  REQUIRE(dtype.output.find("the dump was made in fp32, the run is bf16") != std::string::npos);
  // The reference depends on the mask and the inputs' distribution too: same shapes, different problem.
  const auto mask = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 "
                               "model.attn_mask_type=no_mask --reference " + dump);
  REQUIRE(mask.exit_code == 2);
  REQUIRE(mask.output.find("the dump's reference is causal, the scenario's attention is unmasked") != std::string::npos);
  const auto dist = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 "
                               "oracle.input_distribution=uniform --reference " + dump);
  REQUIRE(dist.exit_code == 2);
  REQUIRE(dist.output.find("the dump's inputs are clamped_normal") != std::string::npos);
  // Same shapes, other global heads: [2, 2] with oracle.heads 8 checks q heads 0-7 and 16-23, [4, 1] with
  // oracle.heads 4 heads 0-3, 8-11, 16-19, 24-27 (16 of 32 either way). It was accepted, and a --dump of it
  // recorded a scenario that does not reproduce its inputs.
  const std::string dump8 = (dir / "heads8.h5").string();
  REQUIRE(run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 oracle.heads=8 --dump " +
                     dump8).exit_code == 0);
  const auto heads = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 "
                                "\"parallel.hierarchical_context_parallel_sizes=[4,1]\" oracle.heads=4 --reference " +
                                dump8);
  INFO(heads.output);
  REQUIRE(heads.exit_code == 2);
  REQUIRE(heads.output.find("--reference: the dump's /inputs/q is not what this scenario generates") !=
          std::string::npos);
  // compare: tolerances must be finite and >= 0.
  for (const char* tol : {"--rtol -1", "--atol -5", "--rtol nan"}) {
    const auto bad = run_hcpsim("compare " + dump + " " + dump + " " + tol);
    INFO(tol << "\n" << bad.output);
    REQUIRE(bad.exit_code == 2);
    REQUIRE(bad.output.find("is not a tolerance") != std::string::npos);
  }
  const auto rtol_only = run_hcpsim("compare " + dump + " " + dump + " --rtol 1e-3");
  REQUIRE(rtol_only.exit_code == 0);
  REQUIRE(rtol_only.output.find("atol 1.00e-03, rtol 1.00e-03") != std::string::npos);  // atol follows rtol
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: verify on the default scenario at 1024 tokens matches full attention to 1e-10", "[apps]") {
  const auto r =
      run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=1024 --threads 2 --dtype fp64");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("result: PASS") != std::string::npos);
  // Every tensor row: name, shape, max_abs_err, max_rel_err, rel_l2_err, baseline, tolerance, result.
  const std::regex row(
      R"(\n  (out|softmax_lse|dq|dk|dv) +\[[0-9, ]+\] +([0-9.e+-]+) +([0-9.e+-]+) +([0-9.e+-]+) +([0-9.e+-]+) +([0-9.e+-]+)  pass)");
  int rows = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), row); it != std::sregex_iterator(); ++it) {
    ++rows;
    REQUIRE(std::stod((*it)[4].str()) <= 1e-10);
  }
  REQUIRE(rows == 5);
}

TEST_CASE("apps: verify --inject fails naming tensor, rank and element; --json and --dump; compare", "[apps]") {
  const std::string base = "verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 ";
  auto r = run_hcpsim("verify --inject list");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("stale_kv_backward") != std::string::npos);
  r = run_hcpsim(base + "--inject stale_kv_backward");
  INFO(r.output);
  REQUIRE(r.exit_code == 1);
  REQUIRE(r.output.find("result: FAIL: worst tensor d") != std::string::npos);
  REQUIRE(r.output.find(", cp_rank ") != std::string::npos);
  REQUIRE(r.output.find("element [b=") != std::string::npos);
  // the same fault from the scenario key, via an override
  r = run_hcpsim(base + "oracle.inject=stale_kv_backward");
  REQUIRE(r.exit_code == 1);
  const auto dir = std::filesystem::temp_directory_path() / "hcpsim_cli_verify";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string a = (dir / "a.h5").string(), b = (dir / "b.h5").string(), js = (dir / "r.json").string();
  r = run_hcpsim(base + "--dtype bf16 --json " + js + " --dump " + a);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string json = read_file(js);
  REQUIRE(json.find("\"dtype\": \"bf16\"") != std::string::npos);
  REQUIRE(json.find("\"max_rel_err\"") != std::string::npos);
  REQUIRE(json.find("\"backend\": \"cpu\"") != std::string::npos);
  r = run_hcpsim(base + "--dtype bf16 --threads 2 --dump " + b);
  REQUIRE(r.exit_code == 0);
  // same run, 1 vs 2 threads: byte-identical dumps
  REQUIRE(read_file(a) == read_file(b));
  r = run_hcpsim("compare " + a + " " + b);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("result: PASS") != std::string::npos);
  r = run_hcpsim("compare " + a + " " + js);  // not an HDF5 file
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("not an HDF5 file") != std::string::npos);
  r = run_hcpsim("compare " + a + " " + dir.string());  // a directory is named as one
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find(dir.string() + ": a directory, not an HDF5 file") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("apps: simulate prints phase times, messages and memory and writes a Chrome trace", "[apps]") {
  const auto dir = std::filesystem::temp_directory_path() / "hcpsim_cli_test";
  std::filesystem::create_directories(dir);
  const auto trace = (dir / "trace.json").string();
  const auto summary = (dir / "summary.json").string();
  const auto links = (dir / "links.csv").string();
  for (const auto& f : {trace, summary, links}) std::filesystem::remove(f);
  const auto r = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml --trace " + trace + " --summary " +
                            summary + " --links " + links);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // [2,2], S=8192, b=1, H=32, Hkv=8, dk=dv=64, bf16, all on one node. Forward per rank: one KV ring message
  // 1·(S/P=4096)·(Hkv/A=4)·(64+64)·2 B = 4 MiB; a2a of q, k, v, out leave (A−1)/A = 1/2 of
  // 1·2048·32·64·2 = 8 MiB, 2 MiB, 2 MiB, 8 MiB → 4+1+1+4 = 10 MiB in 4 messages. 4 ranks: 4·(4+10) MiB =
  // 56 MiB = 58720256 B in 4·(1+4) = 20 messages. Backward per rank: KV (4 MiB) + dKV (4 MiB) + a2a of dout, dq,
  // dk, dv (4+4+1+1 MiB) = 18 MiB in 6 messages → 72 MiB = 75497472 B in 24 messages.
  REQUIRE(r.output.find("forward  intra_node messages    20  bytes       58720256") != std::string::npos);
  REQUIRE(r.output.find("forward  inter_node messages     0  bytes              0") != std::string::npos);
  REQUIRE(r.output.find("backward intra_node messages    24  bytes       75497472") != std::string::npos);
  // FLOPs: causal S(S+1)/2 = 33558528 pairs per head × 32 heads × 2·(64+64) = 2.74911e+11 forward, ×2.5 backward.
  REQUIRE(r.output.find("attention FLOPs: forward 2.74911e+11, backward 6.87279e+11") != std::string::npos);
  REQUIRE(std::filesystem::exists(trace));
  REQUIRE(read_file(trace).find("\"traceEvents\"") != std::string::npos);
  // The table: per layer and x 16 layers, compute, exposed communication, link utilisation, peak memory.
  REQUIRE(r.output.find("x 16 layers") != std::string::npos);
  REQUIRE(r.output.find("exposed comm (busiest GPU)") != std::string::npos);
  REQUIRE(r.output.find("load imbalance") != std::string::npos);
  REQUIRE(r.output.find("link utilisation nvlink") != std::string::npos);
  // One CP group of 4 on an 8-GPU node is simulated: the means say they include the other 4 GPUs' idle links.
  CHECK(r.output.find("  (the means count every link of the 8 GPUs; the 4 outside this CP group, other TP ranks and "
                      "DP replicas, carry nothing in this simulation)\n") != std::string::npos);
  REQUIRE(r.output.find("peak attention memory per GPU") != std::string::npos);
  // The legends say what the sums and "exposed" count: overlapping kernels and waiting for slower peers.
  CHECK(r.output.find("so a phase's sums can exceed its span") != std::string::npos);
  CHECK(r.output.find("messages and for the peers whose data it needs; a wait after the rank's last op is not in it") !=
        std::string::npos);
  CHECK(r.output.find("  (compute: time a kernel runs on the GPU; comm: time its comm stream is in an op, waiting for "
                      "a peer\n  included; exposed: the layer's time with no kernel running, so a rank that finishes "
                      "early counts its\n  wait for the last one)\n") != std::string::npos);
  REQUIRE(read_file(summary).find("\"network_model\": \"flow-level max-min fair\"") != std::string::npos);
  REQUIRE(read_file(links).rfind("link,from,to,class,", 0) == 0);
}

TEST_CASE("apps: validate --schedule lists every rank's ops with sections and messages", "[apps]") {
  const auto r = run_hcpsim("validate scenarios/llama32_1b_cp4_a2a_p2p.yaml --schedule model.seq_length=16 "
                            "model.num_attention_heads=4 model.num_query_groups=2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* rank : {"cp_rank 0 (", "cp_rank 1 (", "cp_rank 2 (", "cp_rank 3 ("})
    REQUIRE(r.output.find(rank) != std::string::npos);
  // Index, phase (whole word: "backward", not "bac"), stream, op.
  REQUIRE(r.output.find("      0 forward  comm      alloc q.a2a [1,8,2,64] bf16") != std::string::npos);
  REQUIRE(r.output.find(" backward comm      alloc dout.a2a ") != std::string::npos);
  REQUIRE(r.output.find(" forward  cp_stream attn_fwd_block ") != std::string::npos);  // same column
  // p2p rank 0 (cp rank 0), forward step 1: KV of origin 1 in the upper section: second Q half × all KV rows.
  REQUIRE(r.output.find("attn_fwd_block upper q[4,8) x kv[0,8) of kv_ring1.k/kv_ring1.v mask=none") !=
          std::string::npos);
  REQUIRE(r.output.find("all_to_all scatter_heads q -> q.a2a group [0, 1] chunk_order [0, 2, 3, 1]") !=
          std::string::npos);
  REQUIRE(r.output.find("send_recv send [bwd_ring1.dk,bwd_ring1.dv] -> cp2 | recv [bwd_ring0.dk,bwd_ring0.dv] <- cp2") !=
          std::string::npos);
}

TEST_CASE("apps: simulate --kernels lists the busiest rank's ring-step kernels with shapes and rates", "[apps]") {
  // CP 4 a2a+p2p [2, 2], 8192 tokens: after the a2a each rank holds 4096 rows in two chunks of 2048; ring step 0 is
  // the causal diagonal over the local 4096 rows.
  const auto r = run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml --kernels");
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.output.find("kernels of cp_rank ") != std::string::npos);
  REQUIRE(r.output.find("q x kv rows, mask") != std::string::npos);
  const auto at = r.output.find("fwd step 0 diagonal");
  REQUIRE(at != std::string::npos);
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  CHECK(line.find("4096 x 4096, causal") != std::string::npos);
  CHECK(line.find(" us") != std::string::npos);
  REQUIRE(r.output.find("forward  attention kernels ") != std::string::npos);
  // Without the flag the table is not printed.
  CHECK(run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml").output.find("kernels of cp_rank") ==
        std::string::npos);
}

TEST_CASE("cli: a command-line parse error is one error line naming the command's help, exit 2", "[apps][cli]") {
  // --cp with --gpus searches TP*PP = GPUs / CP (they excluded each other); GPUs not a multiple of CP are refused.
  const auto both = hcpsim::test::run_hcpsim("plan scenarios/llama32_1b_cp4_a2a_p2p.yaml --cp 2 --gpus 3");
  REQUIRE(both.exit_code == 2);
  REQUIRE(both.output.find("error: command line: --gpus: 3 GPUs per model replica are not a multiple of CP 2 (--cp); "
                           "fix: give a multiple of 2, e.g. --gpus 4") != std::string::npos);
  // The same option twice, or an option and its alias, is named as such (CLI11's "At Most 1 required").
  const auto twice = hcpsim::test::run_hcpsim("simulate scenarios/llama32_1b_cp4_a2a_p2p.yaml --json a.json "
                                              "--summary b.json");
  REQUIRE(twice.exit_code == 2);
  REQUIRE(twice.output == "error: command line: --summary is given more than once (an option and its alias are one "
                          "option); fix: give it once (see 'hcpsim simulate --help')\n");
  const auto factor = hcpsim::test::run_hcpsim("collective all_reduce --cluster dgx-h100 --nodes 1 --step-factor 1.5");
  REQUIRE(factor.exit_code == 2);
  REQUIRE(factor.output.rfind("error: command line: Could not convert: --step-factor = 1.5; fix: see 'hcpsim "
                              "collective --help'", 0) == 0);
  const auto unknown = hcpsim::test::run_hcpsim("frobnicate");
  REQUIRE(unknown.exit_code == 2);
  REQUIRE(unknown.output.find("fix: see 'hcpsim --help'") != std::string::npos);
}

TEST_CASE("apps: the huge-page restart keeps the arguments, the output and the user's tunables", "[apps]") {
  // main() restarts once with GLIBC_TUNABLES=...glibc.malloc.hugetlb=1 (README "Memory settings of the process").
  // Whatever the environment, the command must run once, with its arguments, and print the same bytes.
  const std::string args = "simulate --quiet scenarios/ci/multinode_p2p_cp16_fat_tree.yaml model.seq_length=8192";
  const auto plain = run_hcpsim(args);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(plain.output.find("time per iteration") != std::string::npos);
  for (const std::string env : {"HCPSIM_NO_HUGEPAGES=1", "GLIBC_TUNABLES=glibc.malloc.hugetlb=0",
                                "GLIBC_TUNABLES=glibc.malloc.check=0", "GLIBC_TUNABLES="}) {
    const auto r = hcpsim::test::run_command("env " + env + " '" + std::string(HCPSIM_BINARY) + "' " + args);
    INFO(env);
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.output == plain.output);
  }
  // A bad command line still fails as it would without the restart (argv reaches the restarted process).
  const auto bad = run_hcpsim("simulate --no-such-flag scenarios/ci/multinode_p2p_cp16_fat_tree.yaml");
  REQUIRE(bad.exit_code == 2);
  REQUIRE(bad.output.find("--no-such-flag") != std::string::npos);
}

TEST_CASE("apps: simulate names the pipeline stage that needs the most memory by Megatron's 0-based rank",
          "[apps][step]") {
  const auto r = run_hcpsim("simulate scenarios/llama3_8b_128k_cp16_4xdgx_h100.yaml parallel.pipeline_model_parallel_size=2 "
                            "\"parallel.hierarchical_context_parallel_sizes=[8,1]\" parallel.context_parallel_size=8 "
                            "parallel.data_parallel_size=1 --quiet");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // The last of two stages (it holds the logits): rank 1 of 0-1, once printed as "stage 1 of 2".
  CHECK(r.output.find("    pipeline stage 1 (stages 0-1, Megatron's pipeline rank) with 16 transformer layers, the "
                      "one that needs the most\n") != std::string::npos);
  CHECK(r.output.find("x 1 micro-batch in flight") != std::string::npos);  // 1F1B: the last stage holds PP - 1 = 1
}

TEST_CASE("apps: verify refuses a sliding window it would not check, and takes TE's no-window pairs", "[apps]") {
  // a2a with window [64, 0] printed PASS against a full causal reference: neither the schedules nor the reference
  // apply a window.
  const auto window = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 "
                                 "parallel.cp_comm_type=a2a parallel.hierarchical_context_parallel_sizes=null "
                                 "\"model.window_size=[64,0]\"");
  INFO(window.output);
  REQUIRE(window.exit_code == 2);
  REQUIRE(window.output.find("model.window_size: verify does not model sliding windows") != std::string::npos);
  // [-1, 0] is TE's plain causal: a2a+p2p takes it (it was refused as a sliding window).
  const auto causal = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=256 "
                                 "\"model.window_size=[-1,0]\"");
  INFO(causal.output);
  REQUIRE(causal.exit_code == 0);
}
