#include "hcpsim/config/scenario_adapters.hpp"

#include <cmath>

#include "hcpsim/config/cp_variant_config.hpp"
#include "hcpsim/config/thd_packing.hpp"

namespace hcpsim {

AttentionShape attention_shape(const Scenario& s) {
  AttentionShape shape;
  const int64_t tp = s.parallel.tensor_model_parallel_size;
  shape.batch = s.model.micro_batch_size;
  shape.seq_length = s.model.seq_length;
  shape.heads_q = s.model.num_attention_heads / tp;
  shape.heads_kv = s.model.num_query_groups / tp;
  shape.head_dim_qk = s.model.kv_channels;
  shape.head_dim_v = s.model.kv_channels_v;
  shape.causal = s.model.attn_mask_type == AttnMaskType::causal;
  // Source: TE context_parallel.py L1427-1428, softmax_scale defaults to dk^-0.5.
  shape.softmax_scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim_qk));
  shape.dtype = s.model.params_dtype;
  // qkv_format thd: the packed sequences padded for this CP size; Megatron's THD micro-batch is one sample.
  shape.packing = scenario_packing(s);
  if (shape.packing.thd()) shape.batch = 1;
  return shape;
}

CpLayout cp_layout_for(const Scenario& s, CpCommType type) {
  return cp_variant_config(type).layout(s, cp_variant(type));
}

ParallelSizes parallel_sizes(const Scenario& s, int64_t data_parallel_size) {
  ParallelSizes sizes;
  sizes.tp = s.parallel.tensor_model_parallel_size;
  sizes.cp = s.parallel.context_parallel_size;
  sizes.pp = s.parallel.pipeline_model_parallel_size;
  sizes.dp = data_parallel_size;
  return sizes;
}

}  // namespace hcpsim
