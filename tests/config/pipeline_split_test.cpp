// Megatron's pipeline layer splits: even, embedding/loss counted as layers, explicit first/last stages.
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/pipeline_split.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/core/error.hpp"

using namespace hcpsim;

namespace {

const char* kModel = R"(schema_version: 1
model: {num_attention_heads: 8, num_query_groups: 8, kv_channels: 64, seq_length: 1024, num_layers: 126}
parallel: {context_parallel_size: 1, cp_comm_type: p2p, pipeline_model_parallel_size: 8}
)";

std::vector<int64_t> split_of(const std::vector<std::string>& overrides) {
  return pipeline_split(load_scenario_text(kModel, "split.yaml", overrides)).stage_layers;
}

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    split_of(overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("pipeline split: Llama3.1-405B's recipe counts the embedding and the loss as layers", "[config][pipeline]") {
  // (126 + 2) / (PP 8 x V 8) = 2 per model chunk, 16 per stage; stage 0 and stage 7 build one layer fewer.
  const auto s = split_of({"parallel.virtual_pipeline_model_parallel_size=8",
                           "parallel.account_for_embedding_in_pipeline_split=true",
                           "parallel.account_for_loss_in_pipeline_split=true"});
  CHECK(s == std::vector<int64_t>{15, 16, 16, 16, 16, 16, 16, 15});
  // Without the options 126 does not divide by 8, and the error names the way out.
  const std::string even = error_of({});
  CHECK(even.find("num_layers 126 is not divisible by pipeline_model_parallel_size 8") != std::string::npos);
  CHECK(even.find("decoder_first_pipeline_num_layers") != std::string::npos);
  // Only the embedding: 127 does not divide by 8.
  CHECK(error_of({"parallel.account_for_embedding_in_pipeline_split=true"})
            .find("(127) is not divisible by pipeline x virtual stages = 8") != std::string::npos);
}

TEST_CASE("pipeline split: explicit first and last stages share the rest evenly", "[config][pipeline]") {
  // 126 − 14 − 14 = 98 over 6 middle stages does not divide; 126 − 15 − 15 = 96 gives 16 each.
  CHECK(split_of({"parallel.decoder_first_pipeline_num_layers=15", "parallel.decoder_last_pipeline_num_layers=15"}) ==
        std::vector<int64_t>{15, 16, 16, 16, 16, 16, 16, 15});
  CHECK(split_of({"parallel.decoder_last_pipeline_num_layers=14"}) ==
        std::vector<int64_t>{16, 16, 16, 16, 16, 16, 16, 14});
  CHECK(error_of({"parallel.decoder_first_pipeline_num_layers=14", "parallel.decoder_last_pipeline_num_layers=14"})
            .find("does not split evenly over the other 6 pipeline stages") != std::string::npos);
  CHECK(error_of({"parallel.decoder_first_pipeline_num_layers=15", "parallel.account_for_loss_in_pipeline_split=true"})
            .find("cannot be combined with account_for_embedding/loss_in_pipeline_split") != std::string::npos);
  CHECK(error_of({"parallel.decoder_first_pipeline_num_layers=0"}).find("must be in [1, num_layers 126]") !=
        std::string::npos);
  // With V = 2 every stage's layers must split over its two model chunks: 15 does not.
  CHECK(error_of({"parallel.decoder_first_pipeline_num_layers=15", "parallel.decoder_last_pipeline_num_layers=15",
                  "parallel.virtual_pipeline_model_parallel_size=2"})
            .find("stage 0 has 15 layers, not divisible by virtual_pipeline_model_parallel_size 2") != std::string::npos);
  // Even splits are unchanged.
  CHECK(split_of({"model.num_layers=128"}) == std::vector<int64_t>(8, 16));
}
