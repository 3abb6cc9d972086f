// Packed sequences (qkv_format thd) in scenarios: loading, padding, the derived seq_length, the generator, the
// Megatron / TE rules and the AttentionShape the schedule builders get.
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/attention_backend.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_yaml.hpp"
#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/config/validation.hpp"

using namespace hcpsim;

namespace {

const char* kThd = R"(schema_version: 1
name: thd
model:
  num_attention_heads: 8
  num_query_groups: 4
  kv_channels: 16
  num_layers: 2
  qkv_format: thd
  packed_sequence_lengths: [37, 3, 50, 21]
parallel: {context_parallel_size: 4, cp_comm_type: a2a+p2p, hierarchical_context_parallel_sizes: [2, 2]}
cluster: {preset: dgx-h100, nodes: 1}
)";

Scenario load(const std::vector<std::string>& overrides = {}) { return load_scenario_text(kThd, "thd.yaml", overrides); }

/// The message of the InputError `f` raises ("" when it raises none).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

/// The message of the error loading and validating kThd with `overrides` ("" when valid).
std::string error_of(const std::vector<std::string>& overrides) {
  return message_of([&] { (void)validate_scenario(load(overrides), ValidationScope::placement); });
}

/// The error names the file, the key, the problem and the fix.
void require_error(const std::vector<std::string>& overrides, const std::string& key, const std::string& problem,
                   const std::string& fix) {
  const std::string msg = error_of(overrides);
  INFO("message: " << msg);
  for (const std::string& part : {key + ": ", problem, "; fix: " + fix}) REQUIRE(msg.find(part) != std::string::npos);
  // Where: the file position of the key, or the override that set it (scenarios/invalid checks file:line:col).
  REQUIRE((msg.rfind("thd.yaml:", 0) == 0 || msg.rfind("override '", 0) == 0));
}

}  // namespace

TEST_CASE("config: thd packed lengths are padded to 2*cp and seq_length is derived", "[config][thd]") {
  const Scenario s = load();
  REQUIRE(error_of({}).empty());
  REQUIRE(s.model.seq_length == 40 + 8 + 56 + 24);
  const PackedSequences p = scenario_packing(s);
  REQUIRE(p.seq_lengths == std::vector<int64_t>{37, 3, 50, 21});
  REQUIRE(p.seq_lengths_padded == std::vector<int64_t>{40, 8, 56, 24});
  REQUIRE(p.pad_between_seqs);  // auto: some sequence is padded
  const AttentionShape shape = attention_shape(s);
  REQUIRE(shape.packing.thd());
  REQUIRE(shape.batch == 1);
  REQUIRE(shape.seq_length == 128);
  REQUIRE(shape.packing.total_padded() == shape.seq_length);
  // Another CP size pads again (and derives again when seq_length is absent).
  const Scenario s8 = load({"parallel.context_parallel_size=8", "parallel.hierarchical_context_parallel_sizes=[2,4]"});
  REQUIRE(s8.model.seq_length == 48 + 16 + 64 + 32);
  REQUIRE(thd_seq_length(s8) == 160);
  // A seq_length that equals the padded total is accepted; null derives it like an absent one.
  REQUIRE(error_of({"model.seq_length=128"}).empty());
  REQUIRE(load({"model.seq_length=null", "parallel.context_parallel_size=2", "parallel.cp_comm_type=p2p",
                "parallel.hierarchical_context_parallel_sizes=null"})
              .model.seq_length == 40 + 4 + 52 + 24);
}

TEST_CASE("config: pad_between_seqs auto resolves to false without padding", "[config][thd]") {
  const Scenario s = load({"model.packed_sequence_lengths=[8, 16]"});
  REQUIRE(!scenario_packing(s).pad_between_seqs);
  REQUIRE(!scenario_packing(load({"model.packed_sequence_lengths=[8, 16]", "model.pad_between_seqs=false"}))
               .pad_between_seqs);
  REQUIRE(scenario_packing(load({"model.packed_sequence_lengths=[8, 16]", "model.pad_between_seqs=true"}))
              .pad_between_seqs);
  REQUIRE(error_of({"model.packed_sequence_lengths=[8, 16]", "model.pad_between_seqs=false"}).empty());
  REQUIRE(error_of({"model.pad_between_seqs=true"}).empty());
}

TEST_CASE("config: the packing generator is deterministic with fixed lengths for a fixed seed", "[config][thd]") {
  PackingGenerator g;
  g.seed = 7;
  g.num_sequences = 5;
  g.min_length = 1;
  g.max_length = 40;
  // SplitMix64 words of seed 7, min + w mod 40: fixed on every platform.
  REQUIRE(generate_packed_lengths(g) == std::vector<int64_t>{8, 5, 27, 4, 35});
  g.seed = 1;
  g.num_sequences = 4;
  g.min_length = 100;
  g.max_length = 1000;
  REQUIRE(generate_packed_lengths(g) == std::vector<int64_t>{705, 117, 372, 962});
  g.min_length = g.max_length = 9;
  REQUIRE(generate_packed_lengths(g) == std::vector<int64_t>{9, 9, 9, 9});
  const Scenario s = load({"model.packed_sequence_lengths=null",
                           "model.packing={seed: 7, num_sequences: 5, min_length: 1, max_length: 40}",
                           "parallel.cp_comm_type=p2p", "parallel.hierarchical_context_parallel_sizes=null",
                           "parallel.context_parallel_size=2"});
  REQUIRE(packed_actual_lengths(s.model) == std::vector<int64_t>{8, 5, 27, 4, 35});
  REQUIRE(s.model.seq_length == 8 + 8 + 28 + 4 + 36);
  REQUIRE(validate_scenario(s, ValidationScope::placement).data_parallel_size == 4);
}

TEST_CASE("config: the effective thd scenario reads back to the same packing", "[config][thd]") {
  for (const std::vector<std::string>& overrides :
       {std::vector<std::string>{}, std::vector<std::string>{"model.pad_between_seqs=true"},
        std::vector<std::string>{"model.packed_sequence_lengths=null",
                                 "model.packing={seed: 3, num_sequences: 6, min_length: 2, max_length: 9}"}}) {
    const Scenario s = load(overrides);
    const std::string text = to_yaml(s);
    const Scenario t = load_scenario_text(text, "effective.yaml");
    REQUIRE(to_yaml(t) == text);
    REQUIRE(t.model.seq_length == s.model.seq_length);
    REQUIRE(t.model.pad_between_seqs == s.model.pad_between_seqs);
    REQUIRE(scenario_packing(t).seq_lengths_padded == scenario_packing(s).seq_lengths_padded);
    REQUIRE(text.find("pad_between_seqs: ") != std::string::npos);
  }
  // Without thd none of the THD keys is written.
  const Scenario bshd = load({"model.qkv_format=bshd", "model.packed_sequence_lengths=null", "model.seq_length=128"});
  REQUIRE(to_yaml(bshd).find("pad_between_seqs") == std::string::npos);
}

TEST_CASE("config: every thd rule names its key, the problem and a fix", "[config][thd]") {
  require_error({"model.packed_sequence_lengths=null"}, "model.qkv_format",
                "qkv_format thd needs the actual lengths of the packed sequences", "add model.packed_sequence_lengths");
  require_error({"model.packing={seed: 1, num_sequences: 2, min_length: 1, max_length: 9}"}, "model.packing",
                "give exactly one of model.packed_sequence_lengths and model.packing", "remove model.packing");
  require_error({"model.packed_sequence_lengths=[5, 0]"}, "model.packed_sequence_lengths", "entry 1 is 0",
                "give actual sequence lengths of at least 1 token");
  require_error({"model.packed_sequence_lengths=[]"}, "model.packed_sequence_lengths", "the list is empty",
                "give the actual length");
  require_error({"model.packed_sequence_lengths=null",
                 "model.packing={seed: 1, num_sequences: 2, min_length: 9, max_length: 8}"},
                "model.packing.max_length", "must be from min_length 9", "give max_length >= min_length");
  require_error({"model.packed_sequence_lengths=null",
                 "model.packing={seed: 1, num_sequences: 0, min_length: 1, max_length: 8}"},
                "model.packing.num_sequences", "must be from 1", "give the number of packed sequences");
  require_error({"model.seq_length=120"}, "model.seq_length",
                "seq_length 120 is not the packed length 128 of the 4 packed sequences, each padded to a multiple of "
                "2*context_parallel_size = 8",
                "set model.seq_length: 128, or remove model.seq_length");
  // The derived packed length is bounded like seq_length, and blamed on the lengths; at most 16384 sequences.
  require_error({"model.packed_sequence_lengths=[17179869184, 17179869184]"}, "model.packed_sequence_lengths",
                "the packed length 34359738368 of the 2 padded sequences is larger than hcpsim models (at most "
                "17179869184 tokens)",
                "pack fewer or shorter sequences");
  std::string many = "model.packed_sequence_lengths=[1";
  for (int i = 1; i < 16385; ++i) many += ", 1";
  require_error({many + "]"}, "model.packed_sequence_lengths",
                "16385 sequences are more than hcpsim models (at most 16384)",
                "pack at most 16384 sequences per micro-batch");
  require_error({"model.micro_batch_size=2"}, "model.micro_batch_size", "must be 1 with qkv_format thd, got 2",
                "set model.micro_batch_size: 1");
  require_error({"model.pad_between_seqs=false"}, "model.pad_between_seqs",
                "4 of the 4 sequences are padded (sequence 0: 37 -> 40)", "set model.pad_between_seqs: true or auto");
  require_error({"parallel.te_version=2.18"}, "parallel.te_version",
                "qkv_format thd with cp_comm_type a2a+p2p needs Transformer Engine >= 2.19 (8ff60f8de, PR #3290",
                "upgrade Transformer Engine to 2.19 or newer, or use cp_comm_type p2p");
  REQUIRE(error_of({"parallel.te_version=2.19"}).empty());
  // all_gather needs TE 2.18 (PR #2829), a2a TE 2.10 (e52bdb414): the release before is refused, that one accepted.
  struct Gate {
    const char* type;
    const char* older;
    const char* first;
    const char* message;
  };
  for (const Gate& g : {Gate{"all_gather", "2.17", "2.18", "cp_comm_type all_gather needs Transformer Engine >= 2.18 (PR #2829)"},
                        Gate{"a2a", "2.9", "2.10", "cp_comm_type a2a needs Transformer Engine >= 2.10 (e52bdb414"}}) {
    std::vector<std::string> keys{std::string("parallel.cp_comm_type=") + g.type,
                                  "parallel.hierarchical_context_parallel_sizes=null",
                                  std::string("parallel.te_version=") + g.older};
    require_error(keys, "parallel.te_version", g.message, std::string("upgrade Transformer Engine to ") + g.first);
    keys.back() = std::string("parallel.te_version=") + g.first;
    REQUIRE(error_of(keys).empty());
  }
  require_error({"parallel.cp_comm_type=p2p", "parallel.hierarchical_context_parallel_sizes=null",
                 "parallel.te_version=1.6"},
                "parallel.te_version", "cp_comm_type p2p needs Transformer Engine >= 1.7 (476f659e8", "upgrade");
  require_error({"model.attention_bias=true", "parallel.cp_comm_type=p2p",
                 "parallel.hierarchical_context_parallel_sizes=null"},
                "model.attention_bias", "no attention bias with context parallelism and qkv_format thd",
                "set model.attention_bias: false");
  require_error({"model.qkv_format=bshd", "model.seq_length=128"}, "model.packed_sequence_lengths",
                "only used with qkv_format thd", "set model.qkv_format: thd");
}

TEST_CASE("config: malformed thd keys are refused by the loader", "[config][thd]") {
  auto load_error = [](const std::vector<std::string>& overrides) { return message_of([&] { (void)load(overrides); }); };
  CHECK(load_error({"model.pad_between_seqs=maybe"}).find("model.pad_between_seqs: expected true, false or auto") !=
        std::string::npos);
  CHECK(load_error({"model.packing={seed: 1, num_sequences: 2}"}).find("missing required key 'min_length'") !=
        std::string::npos);
  CHECK(load_error({"model.packing={seed: -1, num_sequences: 2, min_length: 1, max_length: 2}"})
            .find("model.packing.seed: must be >= 0") != std::string::npos);
  CHECK(load_error({"model.packing={seed: 1, num_sequences: 2, min_length: 1, max_length: 2, mean: 3}"})
            .find("model.packing") != std::string::npos);
  // seq_length stays required without thd.
  CHECK(load_error({"model.qkv_format=bshd"}).find("missing required key 'seq_length'") != std::string::npos);
}

TEST_CASE("config: thd with padding between sequences leaves FlashAttention to FA3 from TE 2.16", "[config][thd]") {
  const std::vector<std::string> p2p{"parallel.cp_comm_type=p2p", "parallel.hierarchical_context_parallel_sizes=null"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), p2p.begin(), p2p.end());
    return resolve_attention_kernel(load(extra), CpCommType::p2p);
  };
  // A100, auto: FlashAttention-2 would run, but TE disables it for pad_between_seqs, so cuDNN runs.
  AttentionKernelChoice c = with({"cluster.preset=dgx-a100"});
  REQUIRE(c.available);
  REQUIRE(c.kernel == AttentionKernel::cudnn_fused_attention);
  REQUIRE(c.disabled.at(0).find("FlashAttention: qkv_format thd with padding between sequences") == 0);
  // Without padding FlashAttention-2 stays.
  REQUIRE(with({"cluster.preset=dgx-a100", "model.packed_sequence_lengths=[8, 16]"}).kernel ==
          AttentionKernel::flash_attention_2);
  // H100 with flash forced: FA3 takes pad_between_seqs from TE 2.16 on; before, no backend is left.
  REQUIRE(with({"model.attention_backend=flash", "parallel.te_version=2.16"}).kernel ==
          AttentionKernel::flash_attention_3);
  c = with({"model.attention_backend=flash", "parallel.te_version=2.15"});
  REQUIRE(!c.available);
  REQUIRE(c.culprit_key == "model.pad_between_seqs");
  require_error({"model.attention_backend=flash", "parallel.te_version=2.15", p2p[0], p2p[1]},
                "model.attention_backend", "TE runs no FlashAttention before v2.16",
                "use te_version >= 2.16 on Hopper (FlashAttention-3 takes padded packed sequences), or attention_backend: "
                "auto");
}
