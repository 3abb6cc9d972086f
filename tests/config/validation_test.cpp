#include "catch_compat.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"

using namespace hcpsim;

namespace {

const char* kBase = R"(schema_version: 1
name: base
model:
  num_attention_heads: 32
  num_query_groups: 8
  kv_channels: 64
  seq_length: 8192
  num_layers: 16
parallel:
  context_parallel_size: 4
  cp_comm_type: a2a+p2p
  hierarchical_context_parallel_sizes: [2, 2]
cluster: {preset: dgx-h100, nodes: 1}
)";

/// Loads kBase with overrides and validates; returns the error message ("" when valid).
std::string error_of(const std::vector<std::string>& overrides, ValidationScope scope = ValidationScope::placement) {
  try {
    validate_scenario(load_scenario_text(kBase, "base.yaml", overrides), scope);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void require_error(const std::vector<std::string>& overrides, const std::string& key, const std::string& problem,
                   const std::string& fix) {
  const std::string msg = error_of(overrides);
  INFO("overrides: " << overrides.size() << " first " << overrides.front() << " message: " << msg);
  REQUIRE(msg.find(key + ": ") != std::string::npos);
  REQUIRE(msg.find(problem) != std::string::npos);
  REQUIRE(msg.find("; fix: " + fix) != std::string::npos);
}

}  // namespace

TEST_CASE("core: the base scenario is valid and fills the node with DP", "[core][validation]") {
  REQUIRE(error_of({}).empty());
  const auto r = validate_scenario(load_scenario_text(kBase, "base.yaml"), ValidationScope::placement);
  REQUIRE(r.data_parallel_size == 2);  // 8 GPUs / (TP 1 · CP 4 · PP 1)
  REQUIRE(r.warnings.empty());
}

TEST_CASE("core: every validation rule names its key, the problem and a fix", "[core][validation]") {
  const std::string sizes = "parallel.hierarchical_context_parallel_sizes";
  require_error({"parallel.hierarchical_context_parallel_sizes=[3,3]"}, sizes, "3*3 = 9 != context_parallel_size 4",
                "choose [A, P] with A*P = 4");
  require_error({"parallel.hierarchical_context_parallel_sizes=null"}, "parallel.cp_comm_type",
                "training silently runs WITHOUT context parallelism", "set parallel.hierarchical_context_parallel_sizes");
  // The fix proposes a legal split: the largest A < cp dividing cp and the KV heads with TP·A inside a node.
  require_error({"parallel.hierarchical_context_parallel_sizes=null", "parallel.context_parallel_size=16",
                 "cluster.nodes=2"},
                "parallel.cp_comm_type", "silently runs WITHOUT context parallelism",
                "set parallel.hierarchical_context_parallel_sizes: [A, P] with A*P = context_parallel_size 16, e.g. "
                "[8, 2] (a2a over 8 GPUs of a node, p2p ring over 2 groups)");
  // Sizes with p2p: Megatron accepts them (it asserts only A*P = CP) and they go unused; a warning, not an error.
  const auto p2p = validate_scenario(load_scenario_text(kBase, "base.yaml", {"parallel.cp_comm_type=p2p"}),
                                     ValidationScope::placement);
  REQUIRE(p2p.warnings.size() == 1);
  CHECK(p2p.warnings[0].rfind("hierarchical_context_parallel_sizes [2, 2] are not used by cp_comm_type p2p (only "
                              "a2a+p2p uses them; Megatron checks only that they multiply to context_parallel_size): "
                              "the run is plain p2p",
                              0) == 0);
  require_error({"parallel.cp_comm_type=p2p", "parallel.hierarchical_context_parallel_sizes=[2,4]"}, sizes,
                "2*4 = 8 != context_parallel_size 4", "choose [A, P] with A*P = 4");
  // Sequence parallelism scatters each CP rank's S/CP tokens over TP: 40 / 4 = 10 do not split over TP 4.
  require_error({"model.seq_length=40", "parallel.tensor_model_parallel_size=4", "parallel.sequence_parallel=true",
                 "cluster.nodes=2"},
                "model.seq_length", "10 tokens per CP rank (seq_length 40 / context_parallel_size 4) do not split "
                "over tensor_model_parallel_size 4 with sequence_parallel",
                "use a seq_length that is a multiple of 16 (e.g. 48), or sequence_parallel: false");
  // The fix's multiple is the least that meets both rules, lcm(2·CP, CP·TP) = 16 (it said 2·CP·TP = 32, while 48
  // validates), and its example validates.
  CHECK(error_of({"model.seq_length=48", "parallel.tensor_model_parallel_size=4", "parallel.sequence_parallel=true",
                  "cluster.nodes=2"}).empty());
  CHECK(error_of({"model.seq_length=32", "parallel.tensor_model_parallel_size=4", "parallel.sequence_parallel=true",
                  "cluster.nodes=2"}).empty());
  CHECK(error_of({"model.seq_length=40", "parallel.tensor_model_parallel_size=4", "cluster.nodes=2"}).empty());
  require_error({"model.seq_length=8196"}, "model.seq_length", "not divisible by 2*context_parallel_size = 8",
                "pad the sequence to a multiple of 8, e.g. 8200");
  // The head count that does not divide is named (the override that set it), not the sizes.
  require_error({"model.num_query_groups=1"}, "model.num_query_groups", "one KV head per TP rank (MQA)",
                "choose A dividing 1");
  require_error({"model.num_query_groups=3", "model.num_attention_heads=24"}, "model.num_query_groups",
                "must both be divisible by the a2a size A = 2", "choose A dividing 3");
  require_error({"parallel.cp_comm_type=a2a", "parallel.hierarchical_context_parallel_sizes=null",
                 "parallel.context_parallel_size=16", "cluster.nodes=2", "model.seq_length=8192"},
                "parallel.context_parallel_size", "divisible by context_parallel_size = 16", "use cp_comm_type a2a+p2p");
  require_error({"model.num_query_groups=5"}, "model.num_query_groups", "not divisible by num_query_groups 5",
                "use a divisor of 32");
  require_error({"parallel.tensor_model_parallel_size=3"}, "parallel.tensor_model_parallel_size",
                "must divide num_attention_heads 32 and num_query_groups 8", "choose a TP size");
  require_error({"parallel.use_decentralized_pg=true"}, "parallel.use_decentralized_pg",
                "do not support hierarchical_context_parallel_sizes", "set use_decentralized_pg: false");
  require_error({"model.window_size=[4096,0]"}, "model.window_size",
                "sliding window attention is not supported with cp_comm_type a2a+p2p", "use cp_comm_type a2a or all_gather");
  require_error({"model.window_size=[4096,0]", "parallel.cp_comm_type=p2p",
                 "parallel.hierarchical_context_parallel_sizes=null"},
                "model.window_size", "not supported with cp_comm_type p2p", "use cp_comm_type a2a");
  require_error({"model.attention_bias=true"}, "model.attention_bias",
                "attention bias is not supported with cp_comm_type a2a+p2p", "use cp_comm_type p2p");
  require_error({"parallel.te_version=1.11"}, "parallel.te_version",
                "cp_comm_type a2a+p2p needs Transformer Engine >= 1.12, got 1.11", "upgrade Transformer Engine to 1.12");
  require_error({"parallel.te_version=banana"}, "parallel.te_version", "is not a version", "write e.g.");
  require_error({"model.qkv_format=thd"}, "model.qkv_format", "qkv_format thd needs the actual lengths",
                "add model.packed_sequence_lengths");
  require_error({"parallel.context_parallel_size=16", "parallel.hierarchical_context_parallel_sizes=[8,2]"},
                "cluster.nodes", "TP*CP*PP = 16 GPUs, but the cluster has 1 x 8 = 8", "set cluster.nodes to at least 2");
  require_error({"parallel.data_parallel_size=4"}, "parallel.data_parallel_size", "TP*CP*DP*PP = 16 GPUs",
                "use at least 2 nodes");
  require_error({"parallel.cp_comm_type=[p2p, a2a+p2p]"}, "parallel.cp_comm_type",
                "one entry per layer: 2 entries for num_layers 16", "give one value, or exactly num_layers values");
  // Megatron's RankGenerator: known names each once, ep next to dp, a left-out dimension only of size 1.
  require_error({"parallel.order=tp-cp-sp-dp-pp"}, "parallel.order", "is not a '-'-separated order",
                "use the Megatron default 'tp-cp-ep-dp-pp'");
  require_error({"parallel.order=tp-dp-cp-ep-pp"}, "parallel.order", "ep and dp must be adjacent",
                "put ep next to dp, e.g. 'tp-cp-ep-dp-pp'");
  require_error({"parallel.order=tp-ep-dp-pp"}, "parallel.order", "leaves out cp, whose size is 4",
                "name cp in the order, e.g. 'tp-cp-ep-dp-pp'");
  require_error({"model.kv_channels=0"}, "model.kv_channels", "must be at least 1, got 0", "set a positive value");
  require_error({"parallel.hierarchical_context_parallel_sizes=[2,2,1]"}, sizes, "expected two sizes [A, P]",
                "write [A, P]");
}

TEST_CASE("core: sizes beyond what int64/double arithmetic keeps exact are rejected", "[core][validation]") {
  require_error({"model.seq_length=17179869186"}, "model.seq_length", "is larger than hcpsim models (at most 17179869184)",
                "use a realistic value");
  require_error({"parallel.context_parallel_size=2097152"}, "parallel.context_parallel_size",
                "2097152 is larger than hcpsim models (at most 1048576)", "use a realistic value");
  // 2^20 batch × 2^33 tokens × 32 heads × 64 = 2^64 elements > 2^50.
  require_error({"model.micro_batch_size=1048576", "model.seq_length=8589934592"}, "model.seq_length",
                "elements, more than hcpsim represents (2^50)", "use a smaller seq_length");
  // 2·(64+64)·(2^28)^2·64 heads = 2^70 ≈ 1.18e21 FLOPs > 1e21.
  require_error({"model.seq_length=268435456", "model.num_attention_heads=64", "model.num_query_groups=8"},
                "model.seq_length", "FLOPs, more than 1e21", "use a smaller seq_length");
  require_error({"parallel.data_parallel_size=1048576"}, "parallel.data_parallel_size",
                "GPUs, but the cluster has 1 x 8 = 8", "use at least");
}

TEST_CASE("core: a rule broken by an override names that override, whichever key the rule reports", "[core][validation]") {
  // The file says [2, 2] and CP 4; the override makes CP 8: the message must point at the override.
  std::string msg = error_of({"parallel.context_parallel_size=8", "cluster.nodes=2"});
  REQUIRE(msg.rfind("override 'parallel.context_parallel_size=8': parallel.hierarchical_context_parallel_sizes: "
                    "2*2 = 4 != context_parallel_size 8",
                    0) == 0);
  msg = error_of({"model.num_query_groups=1"});
  REQUIRE(msg.rfind("override 'model.num_query_groups=1': model.num_query_groups:", 0) == 0);
  // Without an override the file position of the reported key is used.
  msg = error_of({});
  REQUIRE(msg.empty());
  try {
    validate_scenario(load_scenario_text(std::string(kBase).replace(std::string(kBase).find("[2, 2]"), 6, "[4, 2]"),
                                         "base.yaml"),
                      ValidationScope::placement);
  } catch (const InputError& e) {
    msg = e.what();
  }
  REQUIRE(msg.rfind("base.yaml:12:3: parallel.hierarchical_context_parallel_sizes: 4*2 = 8", 0) == 0);
}

TEST_CASE("core: the CPU oracle scope ignores the cluster", "[core][validation]") {
  const std::vector<std::string> big{"parallel.context_parallel_size=64",
                                     "parallel.hierarchical_context_parallel_sizes=[8,8]"};
  REQUIRE(error_of(big, ValidationScope::attention).empty());
  REQUIRE(error_of(big, ValidationScope::placement).find("cluster.nodes") != std::string::npos);
}

TEST_CASE("core: legal but poor choices are warnings", "[core][validation]") {
  // TP·A = 2·8 = 16 > 8 GPUs per node: every a2a group spans two nodes.
  auto s = load_scenario_text(kBase, "base.yaml",
                              {"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=16",
                               "parallel.hierarchical_context_parallel_sizes=[4,4]", "cluster.nodes=4",
                               "model.num_query_groups=8", "model.num_attention_heads=32"});
  REQUIRE(validate_scenario(s, ValidationScope::placement).warnings.empty());  // TP·A = 8 fits
  s = load_scenario_text(kBase, "base.yaml",
                         {"parallel.tensor_model_parallel_size=2", "parallel.context_parallel_size=16",
                          "parallel.hierarchical_context_parallel_sizes=[8,2]", "cluster.nodes=4",
                          "model.num_query_groups=16"});
  const auto w = validate_scenario(s, ValidationScope::placement).warnings;
  REQUIRE(w.size() == 1);
  REQUIRE(w[0].find("TP*A = 2*8 = 16 does not divide the 8 GPUs per node") != std::string::npos);
  s = load_scenario_text(kBase, "base.yaml", {"parallel.hierarchical_context_parallel_sizes=[1,4]"});
  const auto w2 = validate_scenario(s, ValidationScope::placement).warnings;
  REQUIRE(w2.size() == 1);
  REQUIRE(w2[0].find("falls back to plain p2p") != std::string::npos);
}

TEST_CASE("core: parse_version", "[core][validation]") {
  REQUIRE(parse_version("1.12") == std::vector<int>{1, 12, 0});
  REQUIRE(parse_version("2.4.1") == std::vector<int>{2, 4, 1});
  REQUIRE(parse_version("2") .empty());
  REQUIRE(parse_version("2.x").empty());
  REQUIRE(parse_version("1.11") < parse_version("1.12"));
  REQUIRE(parse_version("1.9") < parse_version("1.12"));
}

TEST_CASE("validation: window_size follows TE's check_set_window_size, and a real window is warned about",
          "[config][validation]") {
  // [-1, 0] is plain causal in TE (and [-1, -1] no window): not a sliding window, so a2a+p2p takes it. Counting any
  // non-negative entry as a window refused [-1, 0] with p2p and a2a+p2p.
  CHECK(error_of({"model.window_size=[-1,0]"}).empty());
  CHECK(error_of({"model.window_size=[-1,-1]"}).empty());
  CHECK(error_of({"model.window_size=[-1,0]", "model.attn_mask_type=no_mask"}).empty());
  // What TE asserts on.
  require_error({"model.window_size=[-1,5]"}, "model.window_size",
                "window_size [-1, 5] with attn_mask_type causal is refused by Transformer Engine",
                "use [-1, 0] (no window) or [left >= 0, 0]");
  require_error({"model.window_size=[64,-1]", "model.attn_mask_type=no_mask", "parallel.cp_comm_type=a2a",
                 "parallel.hierarchical_context_parallel_sizes=null"},
                "model.window_size", "window_size [64, -1] with attn_mask_type no_mask is refused",
                "use [-1, -1] (no window) or [left >= 0, right >= 0]");
  require_error({"model.window_size=[-2,0]"}, "model.window_size", "is refused by Transformer Engine", "use [-1, 0]");
  // A real window with a2a: legal in TE, not modelled here (warned); TE runs a causal [64, 3] as [64, 0].
  const auto warnings = [](const std::vector<std::string>& overrides) {
    std::vector<std::string> all{"parallel.cp_comm_type=a2a", "parallel.hierarchical_context_parallel_sizes=null"};
    all.insert(all.end(), overrides.begin(), overrides.end());
    return validate_scenario(load_scenario_text(kBase, "base.yaml", all), ValidationScope::placement).warnings;
  };
  auto w = warnings({"model.window_size=[64,3]"});
  REQUIRE(w.size() == 2);
  CHECK(w[0] == "model.window_size [64, 3] with a causal mask: TE uses [64, 0], with a warning");
  CHECK(w[1].find("model.window_size [64, 3]: sliding windows are not modelled: hcpsim's schedules, simulator and "
                  "oracle compute full causal attention") == 0);
  CHECK(warnings({"model.window_size=[-1,0]"}).empty());
}

TEST_CASE("validation: a sizes-product fix suggests a context_parallel_size only where it validates", "[config][validation]") {
  // [3, 2] = 6: CP 6 does not divide 2*6 into seq_length 8192 or split 32 heads by 3; the fix offered it anyway.
  const std::string three = error_of({"parallel.hierarchical_context_parallel_sizes=[3,2]"});
  CHECK(three.find("3*2 = 6 != context_parallel_size 4") != std::string::npos);
  CHECK(three.find("change context_parallel_size") == std::string::npos);
  CHECK(three.find("e.g. [2, 2]") != std::string::npos);
  const std::string four = error_of({"parallel.hierarchical_context_parallel_sizes=[4,2]"});
  CHECK(four.find("or change context_parallel_size to 8") != std::string::npos);
  CHECK(error_of({"parallel.hierarchical_context_parallel_sizes=[4,2]", "parallel.context_parallel_size=8"}).empty());
}

TEST_CASE("validation: a causal window with any right side is TE's [left, 0], warned, not refused", "[config][validation]") {
  // check_set_window_size: causal and left >= 0 with right != 0 -> (left, 0) with a warning, right = -2 included.
  const auto w = validate_scenario(load_scenario_text(kBase, "base.yaml",
                                                      {"parallel.cp_comm_type=a2a",
                                                       "parallel.hierarchical_context_parallel_sizes=null",
                                                       "model.window_size=[64,-2]"}),
                                   ValidationScope::placement)
                     .warnings;
  REQUIRE_FALSE(w.empty());
  CHECK(w[0] == "model.window_size [64, -2] with a causal mask: TE uses [64, 0], with a warning");
}
