// TE's attention-backend legality (resolve_attention_kernel with an AttentionCall) as validate applies it: the
// backend that would run, the configurations TE has no backend for, the key blamed, and fix hints that validate.
#include <regex>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/validation.hpp"

using namespace hcpsim;

namespace {

using K = AttentionKernel;
using B = AttentionBackend;

AttentionCall call(CpCommType t, int64_t h, int64_t hkv, QkvFormat f) {
  AttentionCall c;
  c.cp_comm_type = t;
  c.cp_size = 6;
  c.qkv_format = f;
  c.num_heads = h;
  c.num_gqa_groups = hkv;
  c.head_dim_qk = c.head_dim_v = 16;
  return c;
}

// The "Why" case: 6 q / 3 KV heads at [3, 2] in sbhd, bf16, on one DGX H100.
const char* kOdd = R"(schema_version: 1
name: odd
model:
  num_attention_heads: 6
  num_query_groups: 3
  kv_channels: 16
  seq_length: 120
  num_layers: 2
  qkv_format: sbhd
  params_dtype: bf16
parallel:
  context_parallel_size: 6
  data_parallel_size: 1
  cp_comm_type: a2a+p2p
  hierarchical_context_parallel_sizes: [3, 2]
cluster: {preset: dgx-h100, nodes: 1}
)";

std::string error_of(const char* text, const std::vector<std::string>& overrides) {
  try {
    validate_scenario(load_scenario_text(text, "odd.yaml", overrides), ValidationScope::placement);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config: TE's CP backend filters: odd heads disable FusedAttention for a2a, sbhd FlashAttention",
          "[config][te_legality]") {
  const std::string h100 = "H100-SXM5-80GB";
  // 6 / 3 heads, a2a+p2p, sbhd: FusedAttention off (odd KV heads), FlashAttention off (sbhd): none left.
  auto c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, call(CpCommType::a2a_p2p, 6, 3, QkvFormat::sbhd));
  CHECK_FALSE(c.available);
  CHECK(c.culprit_key == "model.num_query_groups");
  REQUIRE(c.disabled.size() == 2);
  CHECK(c.disabled[0] ==
        "FusedAttention: cp_comm_type a2a+p2p requires num_heads and num_gqa_groups divisible by 2 (num_heads 6, "
        "num_gqa_groups 3 per TP rank)");
  CHECK(c.disabled[1] == "FlashAttention: context parallelism does not support FlashAttention with qkv_format sbhd");
  CHECK(c.reason.find("No dot product attention backend is available") != std::string::npos);
  // The same in bshd: FlashAttention-3 runs on Hopper.
  c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, call(CpCommType::a2a_p2p, 6, 3, QkvFormat::bshd));
  CHECK(c.available);
  CHECK(c.kernel == K::flash_attention_3);
  // An odd query-head count is blamed on num_attention_heads; p2p scatters no heads, so FusedAttention stays.
  c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, call(CpCommType::a2a, 3, 1, QkvFormat::sbhd));
  CHECK_FALSE(c.available);
  c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, call(CpCommType::a2a, 9, 2, QkvFormat::sbhd));
  CHECK(c.culprit_key == "model.num_attention_heads");
  c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, call(CpCommType::p2p, 6, 3, QkvFormat::sbhd));
  CHECK(c.available);
  CHECK(c.kernel == K::cudnn_fused_attention);
  CHECK(c.disabled == std::vector<std::string>{
                          "FlashAttention: context parallelism does not support FlashAttention with qkv_format sbhd"});
  // Even heads: FusedAttention on sm90 whatever the format.
  c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, call(CpCommType::a2a_p2p, 12, 6, QkvFormat::sbhd));
  CHECK(c.available);
  CHECK(c.kernel == K::cudnn_fused_attention);
  // attention_backend flash with CP in sbhd: nothing left, and the format is to blame, not the forced backend.
  c = resolve_attention_kernel(h100, std::nullopt, B::flash, call(CpCommType::p2p, 8, 8, QkvFormat::sbhd));
  CHECK_FALSE(c.available);
  CHECK(c.culprit_key == "model.qkv_format");
  // fp32 activations: neither backend; no CP: always a backend (UnfusedDotProductAttention).
  auto fp32 = call(CpCommType::p2p, 8, 8, QkvFormat::bshd);
  fp32.qkv_dtype = Dtype::fp32;
  c = resolve_attention_kernel(h100, std::nullopt, B::auto_select, fp32);
  CHECK_FALSE(c.available);
  CHECK(c.culprit_key == "model.params_dtype");
  fp32.cp_size = 1;
  CHECK(resolve_attention_kernel(h100, std::nullopt, B::auto_select, fp32).available);
  // Head dims: cuDNN at most 128 on sm80 (FlashAttention-2 takes 256), 256 on sm90.
  auto wide = call(CpCommType::p2p, 8, 8, QkvFormat::sbhd);
  wide.head_dim_qk = wide.head_dim_v = 256;
  CHECK(resolve_attention_kernel(h100, std::nullopt, B::auto_select, wide).available);
  c = resolve_attention_kernel("A100-SXM4-80GB", std::nullopt, B::auto_select, wide);
  CHECK_FALSE(c.available);  // FusedAttention: 256 > 128 on sm80; FlashAttention: sbhd
  CHECK(c.culprit_key == "model.qkv_format");  // auto on sm80 picks FlashAttention first
}

TEST_CASE("config: validate rejects the configuration TE has no backend for, naming num_query_groups",
          "[config][te_legality]") {
  const std::string msg = error_of(kOdd, {});
  INFO(msg);
  CHECK(msg.rfind("odd.yaml:5:3: model.num_query_groups: no Transformer Engine attention backend can run cp_comm_type "
                  "a2a+p2p (FusedAttention: cp_comm_type a2a+p2p requires num_heads and num_gqa_groups divisible by 2",
                  0) == 0);
  CHECK(msg.find("TE raises \"No dot product attention backend is available for the provided inputs\"") !=
        std::string::npos);
  CHECK(msg.find("; fix: use even head counts per TP rank for FusedAttention (e.g. num_attention_heads 12, "
                 "num_query_groups 6), qkv_format: bshd for FlashAttention, or cp_comm_type p2p") != std::string::npos);
  // An override that causes it is named.
  CHECK(error_of(kOdd, {"model.num_attention_heads=12", "model.num_query_groups=3"})
            .rfind("override 'model.num_query_groups=3': model.num_query_groups: no Transformer Engine", 0) == 0);
  // The fixes work: 12 / 6 heads, bshd, or p2p.
  CHECK(error_of(kOdd, {"model.num_attention_heads=12", "model.num_query_groups=6"}).empty());
  CHECK(error_of(kOdd, {"model.qkv_format=bshd"}).empty());
  CHECK(error_of(kOdd, {"parallel.cp_comm_type=p2p", "parallel.hierarchical_context_parallel_sizes=null"}).empty());
  // validate reports the backend that would run.
  const auto r = validate_scenario(load_scenario_text(kOdd, "odd.yaml", {"model.qkv_format=bshd"}),
                                   ValidationScope::placement);
  REQUIRE(r.attention_backends.size() == 1);
  CHECK(r.attention_backends[0].first == CpCommType::a2a_p2p);
  CHECK(r.attention_backends[0].second.kernel == K::flash_attention_3);
  CHECK(r.attention_backends[0].second.reason == "FusedAttention disabled by TE's filters, so FlashAttention runs");
}

TEST_CASE("config: head-divisibility errors blame the head count that does not divide", "[config][te_legality]") {
  // 12 q / 3 KV heads at A = 2: 12 divides, 3 does not: num_query_groups is the culprit.
  const std::string msg = error_of(kOdd, {"model.num_attention_heads=12", "model.num_query_groups=3",
                                          "parallel.hierarchical_context_parallel_sizes=[2,3]"});
  INFO(msg);
  CHECK(msg.rfind("override 'model.num_query_groups=3': model.num_query_groups: heads per TP rank "
                  "(num_attention_heads/TP = 12, num_query_groups/TP = 3) must both be divisible by the a2a size A = 2",
                  0) == 0);
  // In fp32 both backends are out whatever else changes: the fix is the dtype alone (it also offered
  // "qkv_format: bshd for FlashAttention", which then failed on the dtype).
  const std::string fp32 = error_of(kOdd, {"model.params_dtype=fp32", "model.num_attention_heads=8",
                                           "model.num_query_groups=2", "parallel.context_parallel_size=4",
                                           "parallel.hierarchical_context_parallel_sizes=[2,2]"});
  INFO(fp32);
  CHECK(fp32.find("FusedAttention: qkv_dtype fp32 (fp16 or bf16 only)") != std::string::npos);
  CHECK(fp32.substr(fp32.find("; fix: ")) == "; fix: use params_dtype: bf16 (--bf16)");
  // Switching the comm type on the command line is what broke the rule: the override is named, not the file's
  // CP size (6 q / 3 KV heads cannot scatter over a2a's 6 ranks).
  CHECK(error_of(kOdd, {"parallel.cp_comm_type=a2a", "parallel.hierarchical_context_parallel_sizes=null"})
            .rfind("override 'parallel.cp_comm_type=a2a': parallel.cp_comm_type: heads per TP rank", 0) == 0);
  // The issue's input: 12 q / 3 KV heads at [2, 2] (CP 4): num_query_groups=3 is named, not num_attention_heads=12.
  CHECK(error_of(kOdd, {"model.num_attention_heads=12", "model.num_query_groups=3", "parallel.context_parallel_size=4",
                        "parallel.hierarchical_context_parallel_sizes=[2,2]"})
            .rfind("override 'model.num_query_groups=3': model.num_query_groups: heads per TP rank", 0) == 0);
  // A = 3 would leave 3 KV heads per rank, odd for TE's FusedAttention, in sbhd: no split validates, and the fix
  // says what stops the one that splits the heads.
  CHECK(msg.find("; fix: choose A dividing 3 (and 12) ([3, 2] splits these heads but does not validate either "
                 "(model.num_query_groups: no Transformer Engine attention backend can run cp_comm_type a2a+p2p") !=
        std::string::npos);
  CHECK(msg.find("), or use p2p") != std::string::npos);
  // The helper's case: [2, 8] splits 8 q / 2 KV heads per TP rank; the cluster, not the heads, stops it.
  const std::string nodes = error_of(kOdd, {"model.num_attention_heads=32", "model.num_query_groups=8",
                                            "model.seq_length=128", "parallel.tensor_model_parallel_size=4",
                                            "parallel.context_parallel_size=16",
                                            "parallel.hierarchical_context_parallel_sizes=[4,4]", "cluster.nodes=4"});
  INFO(nodes);
  CHECK(nodes.find("([2, 8] splits these heads but does not validate either (parallel.data_parallel_size: "
                   "TP*CP*DP*PP = 64 GPUs, but the cluster has 4 x 8 = 32)), or use p2p") != std::string::npos);
  // 24 q / 6 KV heads at [4, 2]: 6 KV heads do not split over 4; the fix names [2, 4], which validates.
  const std::vector<std::string> o = {"model.num_attention_heads=24", "model.num_query_groups=6",
                                      "model.seq_length=128", "parallel.context_parallel_size=8",
                                      "parallel.hierarchical_context_parallel_sizes=[4,2]"};
  const std::string msg2 = error_of(kOdd, o);
  INFO(msg2);
  CHECK(msg2.rfind("override 'model.num_query_groups=6': model.num_query_groups: heads per TP rank", 0) == 0);
  CHECK(msg2.find("; fix: choose A dividing 6 (and 24) (e.g. [2, 4] (a2a over 2 GPUs of a node, p2p ring over 4 "
                  "groups)), or use p2p") != std::string::npos);
  std::vector<std::string> fixed = o;
  fixed.back() = "parallel.hierarchical_context_parallel_sizes=[2,4]";
  CHECK(error_of(kOdd, fixed).empty());
}

TEST_CASE("config: validate checks the NICs simulate needs, naming the gpus_per_node override",
          "[config][te_legality]") {
  const std::string msg = error_of(kOdd, {"model.num_attention_heads=12", "model.num_query_groups=6",
                                          "cluster.gpus_per_node=4", "cluster.nodes=2"});
  INFO(msg);
  CHECK(msg.rfind("override 'cluster.gpus_per_node=4': cluster.gpus_per_node: gpus_per_node 4 is not a multiple of "
                  "nics_per_node 8 (set by preset dgx-h100)",
                  0) == 0);
  CHECK(error_of(kOdd, {"model.num_attention_heads=12", "model.num_query_groups=6", "cluster.gpus_per_node=4",
                        "cluster.nodes=2", "cluster.nics_per_node=4"})
            .empty());
}

TEST_CASE("config: every suggested [A, P] validates (cp 2..16, head counts, TP 1 and 2)", "[config][te_legality]") {
  const std::regex hint(R"(e\.g\. \[(\d+), (\d+)\])");
  int suggested = 0;
  for (int64_t cp = 2; cp <= 16; ++cp)
    for (const auto& [h, hkv] : std::vector<std::pair<int64_t, int64_t>>{
             {32, 8}, {12, 6}, {6, 3}, {12, 3}, {16, 16}, {8, 2}, {24, 6}, {10, 5}, {64, 8}})
      for (int64_t tp : {1, 2}) {
        if (h % tp != 0 || hkv % tp != 0) continue;
        const std::vector<std::string> base = {
            "model.num_attention_heads=" + std::to_string(h), "model.num_query_groups=" + std::to_string(hkv),
            "model.seq_length=" + std::to_string(2 * 720720), "parallel.context_parallel_size=" + std::to_string(cp),
            "parallel.tensor_model_parallel_size=" + std::to_string(tp), "cluster.nodes=4"};
        // Two ways to get a hint: sizes whose product is not cp, and no sizes at all.
        for (const std::string& sizes : {std::string("[1,1]"), std::string("null")}) {
          std::vector<std::string> o = base;
          o.push_back("parallel.hierarchical_context_parallel_sizes=" + sizes);
          const std::string msg = error_of(kOdd, o);
          std::smatch m;
          if (!std::regex_search(msg, m, hint)) continue;
          ++suggested;
          std::vector<std::string> fixed = base;
          fixed.push_back("parallel.hierarchical_context_parallel_sizes=[" + m[1].str() + "," + m[2].str() + "]");
          INFO("cp " << cp << " heads " << h << "/" << hkv << " tp " << tp << ": " << msg);
          CHECK(std::stoll(m[1].str()) * std::stoll(m[2].str()) == cp);
          CHECK(error_of(kOdd, fixed) == "");
        }
      }
  CHECK(suggested > 50);
  // cp 3 → [1, 2] and cp 6 with 32 / 8 heads → [3, 2] are gone: no valid split there, or a valid one.
  const std::string cp3 = error_of(kOdd, {"model.num_attention_heads=32", "model.num_query_groups=8",
                                          "parallel.context_parallel_size=3", "parallel.hierarchical_context_parallel_sizes=[1,1]"});
  CHECK(cp3.find("[1, 2]") == std::string::npos);
  const std::string cp6 = error_of(kOdd, {"model.num_attention_heads=32", "model.num_query_groups=8",
                                          "parallel.hierarchical_context_parallel_sizes=[1,1]"});
  INFO(cp6);
  CHECK(cp6.find("e.g. [2, 3]") != std::string::npos);
  CHECK(cp6.find("[3, 2]") == std::string::npos);
}
