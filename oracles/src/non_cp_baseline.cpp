#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim {

AttentionOutputs non_cp_baseline_attention(const AttentionInputs& in, bool causal, double softmax_scale,
                                           int threads, Dtype dtype, const DocumentMask& doc) {
  const HostTensor& q = in.q;
  const int64_t b = q.batch();
  const int64_t s = q.rows();
  const int64_t hq = q.heads();
  HCPSIM_ASSERT(in.k.rows() == s, "non_cp_baseline_attention: k sequence length != q sequence length");
  HCPSIM_ASSERT(in.dout.batch() == b, "non_cp_baseline_attention: dout batch != q batch");
  HCPSIM_ASSERT(in.dout.rows() == s, "non_cp_baseline_attention: dout rows != S");
  HCPSIM_ASSERT(in.dout.heads() == hq, "non_cp_baseline_attention: dout heads != q heads");
  HCPSIM_ASSERT(in.dout.width() == in.v.width(), "non_cp_baseline_attention: dout width != dv");
  const BlockMask mask = causal ? BlockMask::causal : BlockMask::none;
  const RowRange all{0, s};

  AttentionOutputs r = zero_outputs_like(in);
  // The whole sequence is one block: in global order, the block's top-left causal mask is the global causal mask.
  attention_block_forward(q, all, in.k, in.v, all, mask, softmax_scale, r.out, r.softmax_lse, threads, dtype, doc);
  attention_block_backward(q, in.k, in.v, r.out, in.dout, r.softmax_lse, all, all, mask, softmax_scale, r.dq, r.dk,
                           r.dv, threads, dtype, doc);
  return r;
}

}  // namespace hcpsim
