#include "hcpsim/oracles/reference.hpp"

#include <cmath>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/block_attention.hpp"

namespace hcpsim {

double effective_softmax_scale(const AttentionShape& shape) {
  if (shape.softmax_scale > 0) return shape.softmax_scale;
  HCPSIM_ASSERT(shape.head_dim_qk > 0, "effective_softmax_scale: head_dim_qk must be positive");
  return 1.0 / std::sqrt(static_cast<double>(shape.head_dim_qk));
}

AttentionOutputs reference_attention(const AttentionInputs& in, bool causal, double softmax_scale, int threads,
                                     Dtype dtype) {
  const HostTensor& q = in.q;
  const int64_t b = q.batch();
  const int64_t s = q.rows();
  const int64_t hq = q.heads();
  const int64_t hkv = in.k.heads();
  HCPSIM_ASSERT(in.k.rows() == s, "reference_attention: k sequence length != q sequence length");
  HCPSIM_ASSERT(in.dout.batch() == b, "reference_attention: dout batch != q batch");
  HCPSIM_ASSERT(in.dout.rows() == s, "reference_attention: dout rows != S");
  HCPSIM_ASSERT(in.dout.heads() == hq, "reference_attention: dout heads != q heads");
  HCPSIM_ASSERT(in.dout.width() == in.v.width(), "reference_attention: dout width != dv");
  const BlockMask mask = causal ? BlockMask::causal : BlockMask::none;
  const RowRange all{0, s};

  AttentionOutputs r;
  r.out = HostTensor(b, s, hq, in.v.width());
  r.softmax_lse = HostTensor(b, s, hq, 1);
  r.dq = HostTensor(b, s, hq, q.width());
  r.dk = HostTensor(b, s, hkv, in.k.width());
  r.dv = HostTensor(b, s, hkv, in.v.width());
  // The whole sequence is one block: in global order, the block's top-left causal mask is the global causal mask.
  attention_block_forward(q, all, in.k, in.v, all, mask, softmax_scale, r.out, r.softmax_lse, threads, dtype);
  attention_block_backward(q, in.k, in.v, r.out, in.dout, r.softmax_lse, all, all, mask, softmax_scale, r.dq, r.dk,
                           r.dv, threads, dtype);
  return r;
}

}  // namespace hcpsim
