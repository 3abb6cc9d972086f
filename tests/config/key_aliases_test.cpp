// Megatron-Bridge key spellings (key_aliases.hpp): each one in a file and as an override loads the same effective
// scenario as its canonical key; both spellings at once are an error naming both; messages name both.
#include <map>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/key_aliases.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "test_util.hpp"
#include "hcpsim/config/scenario_yaml.hpp"

using namespace hcpsim;

namespace {

const char* kBase = R"(schema_version: 1
model:
  seq_length: 4096
  num_attention_heads: 16
  hidden_size: 2048
parallel:
  order: tp-cp-ep-dp-pp
)";

/// A value of each canonical key that differs from its default where it can.
const std::map<std::string, std::string> kValues = {
    {"parallel.tensor_model_parallel_size", "2"},
    {"parallel.pipeline_model_parallel_size", "2"},
    {"parallel.virtual_pipeline_model_parallel_size", "2"},
    {"parallel.context_parallel_size", "8"},
    {"parallel.cp_comm_type", "a2a"},
    {"parallel.hierarchical_context_parallel_sizes", "[4, 2]"},
    {"parallel.sequence_parallel", "true"},
    {"parallel.tp_comm_overlap", "true"},
    {"parallel.account_for_embedding_in_pipeline_split", "true"},
    {"parallel.account_for_loss_in_pipeline_split", "true"},
    {"model.global_batch_size", "64"},
    {"model.micro_batch_size", "2"},
    {"parallel.grad_reduce_in_fp32", "false"},
    {"parallel.use_distributed_optimizer", "true"},
    {"parallel.overlap_grad_reduce", "true"},
    {"parallel.overlap_param_gather", "true"},
};

/// `text` with `dotted` (section.key) set to `value`: under the section when the text has it, else a new one.
std::string with_key(std::string text, const std::string& dotted, const std::string& value) {
  const auto dot = dotted.find('.');
  const std::string header = dotted.substr(0, dot) + ":\n", line = "  " + dotted.substr(dot + 1) + ": " + value + "\n";
  const auto at = text.find(header);
  if (at == std::string::npos) return text + header + line;
  return text.insert(at + header.size(), line);
}

std::string effective(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return to_yaml(load_scenario_text(text, "s.yaml", overrides));
}

std::string load_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return test::input_error_of([&] { return load_scenario_text(text, "s.yaml", overrides); });
}

}  // namespace

TEST_CASE("config: every Megatron-Bridge alias loads as its canonical key, in a file and as an override",
          "[config][aliases]") {
  REQUIRE(bridge_key_aliases().size() >= 15);
  for (const auto& a : bridge_key_aliases()) {
    INFO(a.alias << " -> " << a.canonical);
    REQUIRE(canonical_key_of(a.alias) == a.canonical);
    REQUIRE(canonical_key_of(a.canonical).empty());
    const auto v = kValues.find(a.canonical);
    REQUIRE(v != kValues.end());
    const std::string canonical = effective(with_key(kBase, a.canonical, v->second));
    CHECK(canonical != effective(kBase));
    CHECK(effective(with_key(kBase, a.alias, v->second)) == canonical);
    CHECK(effective(kBase, {a.alias + "=" + v->second}) == canonical);
    CHECK(effective(kBase, {a.canonical + "=" + v->second}) == canonical);
  }
}

TEST_CASE("config: model.context_parallel_size works; an override of either spelling wins over the file",
          "[config][aliases]") {
  const auto s = load_scenario_text(with_key(kBase, "parallel.context_parallel_size", "4"), "s.yaml",
                                    {"model.context_parallel_size=8"});
  REQUIRE(s.parallel.context_parallel_size == 8);
  REQUIRE(s.loc("parallel.context_parallel_size").to_string() == "override 'model.context_parallel_size=8'");
  const auto f = load_scenario_text(with_key(kBase, "model.context_parallel_size", "4"), "s.yaml",
                                    {"parallel.context_parallel_size=2"});
  REQUIRE(f.parallel.context_parallel_size == 2);
  // A key moved from its Bridge spelling points at the line the user wrote it on.
  const auto g = load_scenario_text(with_key(kBase, "model.context_parallel_size", "4"), "s.yaml");
  REQUIRE(g.parallel.context_parallel_size == 4);
  REQUIRE(g.loc("parallel.context_parallel_size").to_string() == "s.yaml:3:3");
  // A Bridge-only group holding just aliases leaves nothing behind; one with an unknown key is still refused.
  REQUIRE(load_error(with_key(kBase, "train.global_batch_size", "64")).empty());
  REQUIRE(load_error(with_key(with_key(kBase, "train.global_batch_size", "64"), "train.train_iters", "10"))
              .find("unknown key 'train'") != std::string::npos);
}

TEST_CASE("config: an alias and its canonical key together are an error naming both", "[config][aliases]") {
  const std::string both = with_key(with_key(kBase, "parallel.context_parallel_size", "4"),
                                    "model.context_parallel_size", "8");
  REQUIRE(load_error(both) ==
          "s.yaml:3:3: model.context_parallel_size (Megatron-Bridge spelling of parallel.context_parallel_size): "
          "given twice, as parallel.context_parallel_size and as model.context_parallel_size (the same setting); "
          "fix: keep one of them");
  const std::string two_aliases = with_key(with_key(kBase, "ddp.use_distributed_optimizer", "true"),
                                           "optimizer.use_distributed_optimizer", "true");
  const std::string e = load_error(two_aliases);
  CHECK(e.find("given twice, as ddp.use_distributed_optimizer and as optimizer.use_distributed_optimizer") !=
        std::string::npos);
  REQUIRE(load_error(kBase, {"model.context_parallel_size=8", "parallel.context_parallel_size=4"}) ==
          "override 'parallel.context_parallel_size=4': parallel.context_parallel_size: set twice, as "
          "model.context_parallel_size and as parallel.context_parallel_size (the same setting); fix: keep one of "
          "the two overrides");
  // The same spelling twice is an ordinary re-override: the last one wins.
  REQUIRE(load_scenario_text(kBase, "s.yaml", {"model.context_parallel_size=8", "model.context_parallel_size=2"})
              .parallel.context_parallel_size == 2);
}

TEST_CASE("config: a message about a key written the Bridge way names the canonical key beside it",
          "[config][aliases]") {
  REQUIRE(load_error(with_key(kBase, "model.context_parallel_size", "lots")) ==
          "s.yaml:3:26: model.context_parallel_size (Megatron-Bridge spelling of parallel.context_parallel_size): "
          "expected an integer, got 'lots'; fix: write a whole number, e.g. 'parallel.context_parallel_size: 8'");
  REQUIRE(load_error(kBase, {"train.micro_batch_size=x"}).find(
              "override 'train.micro_batch_size=x': train.micro_batch_size (Megatron-Bridge spelling of "
              "model.micro_batch_size): ") == 0);
  REQUIRE(alias_display("ddp.grad_reduce_in_fp32", "parallel.grad_reduce_in_fp32") ==
          "ddp.grad_reduce_in_fp32 (Megatron-Bridge spelling of parallel.grad_reduce_in_fp32)");
}
