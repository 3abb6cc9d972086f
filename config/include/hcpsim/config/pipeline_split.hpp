#pragma once
/// How Megatron-Core splits the transformer layers over pipeline stages: evenly, with the embedding and the loss
/// counted as layers (account_for_embedding/loss_in_pipeline_split), or with explicit first/last stage sizes
/// (decoder_first/last_pipeline_num_layers).

#include <cstdint>
#include <vector>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// Transformer layers of each pipeline stage (PP entries, stage 0 first). Each entry is divisible by the
/// virtual pipeline size V (each stage's layers split evenly over its V model chunks).
struct PipelineSplit {
  std::vector<int64_t> stage_layers;
  /// The largest entry: the stage that bounds the pipeline's time per micro-batch (with its extras).
  [[nodiscard]] int64_t max_layers() const;
};

/// The split of model.num_layers L over PP = parallel.pipeline_model_parallel_size stages and V virtual stages:
///   - even (no option set): L / PP each; L must divide by PP and by PP·V;
///   - account_for_embedding (e = 1) / account_for_loss (l = 1): the L + e + l "layers" split evenly over PP·V
///     model chunks ((L + e + l) must divide by PP·V); stage 0 builds e transformer layers fewer, stage PP − 1
///     l fewer (Llama3.1-405B's recipe: 126 + 2 = 128 over PP 8 × V 8 → 15, 16, …, 16, 15);
///   - decoder_first_pipeline_num_layers F / decoder_last_pipeline_num_layers Z: stage 0 has F, stage PP − 1
///     has Z, the other stages share L − F − Z evenly (PP > 1; not with the account_for_* options).
/// Source: Megatron-LM megatron/core/transformer/transformer_config.py (__post_init__ checks) and
/// transformer_block.py get_num_layers_to_build.
/// @throws InputError naming the key and the fix when a rule above does not hold (e.g. "num_layers 15 is not
///   divisible by pipeline_model_parallel_size 2").
PipelineSplit pipeline_split(const Scenario& scenario);

}  // namespace hcpsim
