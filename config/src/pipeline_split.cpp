#include "hcpsim/config/pipeline_split.hpp"

#include <algorithm>
#include <string>

#include "hcpsim/core/error.hpp"

namespace hcpsim {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const Scenario& s, const std::string& key, const std::string& problem, const std::string& fix) {
  throw InputError(s.loc(key), key, problem, fix);
}

// Layers of the stages between the first and the last, when F and/or Z fix those two.
PipelineSplit explicit_split(const Scenario& s, int64_t L, int64_t pp, int64_t v) {
  const ParallelConfig& p = s.parallel;
  const std::string first_key = "parallel.decoder_first_pipeline_num_layers";
  const std::string last_key = "parallel.decoder_last_pipeline_num_layers";
  if (pp < 2)
    fail(s, p.decoder_first_pipeline_num_layers ? first_key : last_key,
         "uneven first/last pipeline stages need pipeline_model_parallel_size > 1, got " + str(pp),
         "remove it, or set pipeline_model_parallel_size >= 2");
  for (const auto& [key, value] : {std::pair{first_key, p.decoder_first_pipeline_num_layers},
                                   std::pair{last_key, p.decoder_last_pipeline_num_layers}})
    if (value && (*value < 1 || *value > L))
      fail(s, key, "must be in [1, num_layers " + str(L) + "], got " + str(*value), "give the stage's transformer layers");
  const int64_t fixed = p.decoder_first_pipeline_num_layers.value_or(0) + p.decoder_last_pipeline_num_layers.value_or(0);
  const int64_t middle_stages =
      pp - (p.decoder_first_pipeline_num_layers ? 1 : 0) - (p.decoder_last_pipeline_num_layers ? 1 : 0);
  const int64_t rest = L - fixed;
  const std::string key = p.decoder_first_pipeline_num_layers ? first_key : last_key;
  if (rest < 0 || (middle_stages == 0 && rest != 0) || (middle_stages > 0 && (rest == 0 || rest % middle_stages != 0)))
    fail(s, key,
         "num_layers " + str(L) + " minus the first/last stage layers (" + str(fixed) + ") does not split evenly over " +
             "the other " + str(middle_stages) + " pipeline stages",
         "choose first/last stage layers so that the remaining layers divide by the remaining stages");
  PipelineSplit split;
  split.stage_layers.assign(static_cast<size_t>(pp), middle_stages > 0 ? rest / middle_stages : 0);
  if (p.decoder_first_pipeline_num_layers) split.stage_layers.front() = *p.decoder_first_pipeline_num_layers;
  if (p.decoder_last_pipeline_num_layers) split.stage_layers.back() = *p.decoder_last_pipeline_num_layers;
  for (size_t i = 0; i < split.stage_layers.size(); ++i)
    if (split.stage_layers[i] % v != 0)
      fail(s, "parallel.virtual_pipeline_model_parallel_size",
           "stage " + str(static_cast<int64_t>(i)) + " has " + str(split.stage_layers[i]) +
               " layers, not divisible by virtual_pipeline_model_parallel_size " + str(v),
           "choose first/last stage layers divisible by the virtual pipeline size");
  return split;
}

}  // namespace

int64_t PipelineSplit::max_layers() const {
  return stage_layers.empty() ? 0 : *std::max_element(stage_layers.begin(), stage_layers.end());
}

PipelineSplit pipeline_split(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const int64_t L = s.model.num_layers, pp = p.pipeline_model_parallel_size;
  const int64_t v = p.virtual_pipeline_model_parallel_size.value_or(1);
  const bool account = p.account_for_embedding_in_pipeline_split || p.account_for_loss_in_pipeline_split;
  const bool explicit_stages = p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers;
  if (account && explicit_stages)
    fail(s, p.decoder_first_pipeline_num_layers ? "parallel.decoder_first_pipeline_num_layers"
                                                : "parallel.decoder_last_pipeline_num_layers",
         "cannot be combined with account_for_embedding/loss_in_pipeline_split (Megatron rejects the pair)",
         "use either the account_for_* options or explicit first/last stage layers");
  if (explicit_stages) return explicit_split(s, L, pp, v);
  const int64_t e = p.account_for_embedding_in_pipeline_split ? 1 : 0, l = p.account_for_loss_in_pipeline_split ? 1 : 0;
  const int64_t total = L + e + l;
  if (account && total % (pp * v) != 0)
    fail(s, p.account_for_embedding_in_pipeline_split ? "parallel.account_for_embedding_in_pipeline_split"
                                                      : "parallel.account_for_loss_in_pipeline_split",
         "num_layers " + str(L) + " plus the embedding and loss counted as layers (" + str(total) +
             ") is not divisible by pipeline x virtual stages = " + str(pp * v),
         "choose num_layers, pipeline_model_parallel_size and virtual_pipeline_model_parallel_size so that they divide");
  if (!account && L % pp != 0)
    fail(s, "model.num_layers", "num_layers " + str(L) + " is not divisible by pipeline_model_parallel_size " + str(pp),
         "use a multiple of " + str(pp) +
             " layers, or split unevenly as Megatron can: parallel.account_for_embedding_in_pipeline_split / "
             "account_for_loss_in_pipeline_split (the embedding and loss count as layers), or "
             "decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers");
  if (!account && L % (pp * v) != 0)
    fail(s, "parallel.virtual_pipeline_model_parallel_size",
         "num_layers " + str(L) + " is not divisible by pipeline x virtual stages = " + str(pp * v),
         "choose virtual_pipeline_model_parallel_size dividing " + str(L / pp));
  PipelineSplit split;
  split.stage_layers.assign(static_cast<size_t>(pp), total / pp);
  split.stage_layers.front() -= e;
  split.stage_layers.back() -= l;
  return split;
}

}  // namespace hcpsim
