// The CPU executor's compute ops: attention blocks, LSE merge, output correction.

#include "executor_compute_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/semantics.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim::cpu_exec {

void run_attn_fwd_block(const ExecutorState& state, RankState& st, const AttnFwdBlockOp& op,
                        const std::string& where) {
  HCPSIM_ASSERT(op.out != op.q && op.out != op.k && op.out != op.v, where + ": out aliases an input");
  HCPSIM_ASSERT(op.lse != op.q && op.lse != op.k && op.lse != op.v && op.lse != op.out,
                where + ": lse aliases another operand");
  const HostTensor& q = live_buffer(st, op.q, "q");
  const HostTensor& k = live_buffer(st, op.k, "k");
  const HostTensor& v = live_buffer(st, op.v, "v");
  HostTensor& out = live_buffer(st, op.out, "out");
  HostTensor& lse = live_buffer(st, op.lse, "lse");
  check_rows(q, op.q_rows, where + " q_rows");
  check_rows(k, op.kv_rows, where + " kv_rows");
  attention_block_forward(q, op.q_rows, k, v, op.kv_rows, op.mask, state.scale, out, lse, state.threads,
                          state.dtype, op.doc);
}

void run_attn_bwd_block(const ExecutorState& state, RankState& st, const AttnBwdBlockOp& op,
                        const std::string& where) {
  for (BufferId w : {op.dq, op.dk, op.dv}) {
    for (BufferId r : {op.q, op.k, op.v, op.out, op.dout, op.lse}) {
      HCPSIM_ASSERT(w != r, where + ": a gradient output aliases an input");
    }
  }
  HCPSIM_ASSERT(op.dq != op.dk && op.dq != op.dv && op.dk != op.dv, where + ": gradient outputs alias");
  const HostTensor& q = live_buffer(st, op.q, "q");
  const HostTensor& k = live_buffer(st, op.k, "k");
  const HostTensor& v = live_buffer(st, op.v, "v");
  const HostTensor& out = live_buffer(st, op.out, "out");
  const HostTensor& dout = live_buffer(st, op.dout, "dout");
  const HostTensor& lse = live_buffer(st, op.lse, "lse");
  HostTensor& dq = live_buffer(st, op.dq, "dq");
  HostTensor& dk = live_buffer(st, op.dk, "dk");
  HostTensor& dv = live_buffer(st, op.dv, "dv");
  check_rows(q, op.q_rows, where + " q_rows");
  check_rows(k, op.kv_rows, where + " kv_rows");
  attention_block_backward(q, k, v, out, dout, lse, op.q_rows, op.kv_rows, op.mask, state.scale, dq, dk, dv,
                           state.threads, state.dtype, op.doc);
}

namespace {

/// The naive merge of an fp64 run: log(exp(a) + exp(b)) rounded as fp64, leaving fp32's range where the fp32
/// softmax_lse form does (a sum of exponentials above FLT_MAX gives +inf, one below the smallest fp32 subnormal
/// gives −inf). The fault is the overflow, not fp32 rounding: computed in fp32 it would also fail an fp64 run on
/// benign inputs, through rounding alone.
double naive_merge_fp64(double a, double b) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double sum = std::exp(a) + std::exp(b);
  if (sum > static_cast<double>(std::numeric_limits<float>::max())) return kInf;
  if (sum < static_cast<double>(std::numeric_limits<float>::denorm_min())) return std::isnan(sum) ? sum : -kInf;
  return std::log(sum);
}

}  // namespace

void run_lse_merge(const ExecutorState& state, RankState& st, const LseMergeOp& op, const std::string& where) {
  HCPSIM_ASSERT(op.dst != op.src, where + ": lse_merge dst == src");
  HostTensor& dst = live_buffer(st, op.dst, "lse_merge dst");
  const HostTensor& src = live_buffer(st, op.src, "lse_merge src");
  check_rows(dst, op.dst_rows, where + " dst_rows");
  check_rows(src, RowRange{0, op.dst_rows.count}, where + " src rows");
  HCPSIM_ASSERT(dst.batch() == src.batch(), where + ": batch differs");
  HCPSIM_ASSERT(dst.heads() == src.heads(), where + ": heads differ");
  HCPSIM_ASSERT(dst.width() == 1, where + ": dst width != 1");
  HCPSIM_ASSERT(src.width() == 1, where + ": src width != 1");
  for (int64_t b = 0; b < dst.batch(); ++b) {
    for (int64_t r = 0; r < op.dst_rows.count; ++r) {
      for (int64_t h = 0; h < dst.heads(); ++h) {
        double& l = dst(b, op.dst_rows.begin + r, h, 0);
        const double li = src(b, r, h, 0);
        if (op.naive) {
          l = state.dtype == Dtype::fp64 ? naive_merge_fp64(l, li)
                                         : semantics::lse_merge_naive(static_cast<float>(l), static_cast<float>(li));
        } else if (op.unguarded) {  // fault unguarded_empty_merge: NaN for two empty rows
          l = state.dtype == Dtype::fp64
                  ? semantics::lse_merge_unguarded(l, li)
                  : semantics::lse_merge_unguarded(static_cast<float>(l), static_cast<float>(li));
        } else if (state.dtype == Dtype::fp64) {
          l = semantics::lse_merge(l, li);
        } else {
          l = semantics::lse_merge(static_cast<float>(l), static_cast<float>(li));
        }
      }
    }
  }
}

namespace {

/// One row-vector of OutCorrectionOp: d (width elements) ← (d +) s · exp(step_lse − lse), at the run's rounding
/// (semantics::out_correction_*: the weight once per row, then each element).
void correct_row(double* d, const double* s, int64_t width, double step_lse, double lse, bool accumulate,
                 Dtype dtype) {
  if (!semantics::out_correction_contributes(step_lse)) {  // the step saw no key for this row: contributes 0
    if (!accumulate) std::fill(d, d + width, 0.0);
    return;
  }
  if (dtype == Dtype::fp64) {
    const double weight = semantics::out_correction_weight(step_lse, lse);
    for (int64_t w = 0; w < width; ++w) d[w] = semantics::out_correction_apply(d[w], s[w], weight, accumulate, dtype);
    return;
  }
  // fp32 weight and product (bf16 O_i times an fp32 tensor promotes to fp32), stored in dtype.
  const float weight = semantics::out_correction_weight(static_cast<float>(step_lse), static_cast<float>(lse));
  for (int64_t w = 0; w < width; ++w) {
    d[w] = static_cast<double>(semantics::out_correction_apply(static_cast<float>(d[w]), static_cast<float>(s[w]),
                                                               weight, accumulate, dtype));
  }
}

}  // namespace

void run_out_correction(const ExecutorState& state, RankState& st, const OutCorrectionOp& op,
                        const std::string& where) {
  HCPSIM_ASSERT(op.dst != op.src && op.dst != op.src_lse && op.dst != op.lse, where + ": dst aliases an input");
  HostTensor& dst = live_buffer(st, op.dst, "out_correction dst");
  const HostTensor& src = live_buffer(st, op.src, "out_correction src");
  const HostTensor& src_lse = live_buffer(st, op.src_lse, "out_correction src_lse");
  const HostTensor& lse = live_buffer(st, op.lse, "out_correction lse");
  const int64_t count = op.dst_rows.count;
  check_rows(dst, op.dst_rows, where + " dst_rows");
  check_rows(lse, op.dst_rows, where + " lse rows");
  check_rows(src, RowRange{0, count}, where + " src rows");
  check_rows(src_lse, RowRange{0, count}, where + " src_lse rows");
  for (const HostTensor* t : {&src, &src_lse, &lse}) {
    HCPSIM_ASSERT(t->batch() == dst.batch(), where + ": batch differs");
    HCPSIM_ASSERT(t->heads() == dst.heads(), where + ": heads differ");
  }
  HCPSIM_ASSERT(src.width() == dst.width(), where + ": src width != dst width");
  HCPSIM_ASSERT(src_lse.width() == 1, where + ": src_lse width != 1");
  HCPSIM_ASSERT(lse.width() == 1, where + ": lse width != 1");
  for (int64_t b = 0; b < dst.batch(); ++b) {
    for (int64_t r = 0; r < count; ++r) {
      const int64_t row = op.dst_rows.begin + r;
      for (int64_t h = 0; h < dst.heads(); ++h) {
        correct_row(dst.data() + dst.index(b, row, h, 0), src.data() + src.index(b, r, h, 0), dst.width(),
                    src_lse(b, r, h, 0), lse(b, row, h, 0), op.accumulate, state.dtype);
      }
    }
  }
}

}  // namespace hcpsim::cpu_exec
