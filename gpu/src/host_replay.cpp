#include "hcpsim/gpu/host_replay.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/lowering.hpp"
#include "hcpsim/core/op_visit.hpp"
#include "hcpsim/gpu/block_math.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim::gpu {

namespace {

const HostTensor& input_tensor(const AttentionInputs& in, const std::string& name, int64_t cp_rank) {
  if (name == "q") return in.q;
  if (name == "k") return in.k;
  if (name == "v") return in.v;
  HCPSIM_ASSERT(name == "dout", fmt::format("cp_rank {}: unknown input tensor '{}'", cp_rank, name));
  return in.dout;
}

}  // namespace

void check_gpu_dtype(Dtype dtype) {
  if (dtype == Dtype::fp64)
    throw InputError(SourceLoc{}, "--dtype", "the GPU backend computes in fp32, bf16 or fp16, not fp64",
                     "use --dtype fp32, bf16 or fp16, or --backend cpu for fp64");
}

Dtype accumulator_dtype(const Schedule& schedule, Dtype dtype) {
  return schedule.grad_accumulation_in_dtype ? dtype : Dtype::fp32;
}

std::vector<float> gather_input(const RankProgram& program, const IoBinding& bind, const AttentionInputs& inputs,
                                Dtype dtype) {
  const HostTensor& global = input_tensor(inputs, bind.tensor, program.cp_rank);
  const BufferDecl& d = program.buffers[static_cast<size_t>(bind.buffer)];
  HCPSIM_ASSERT(d.batch == global.batch() && d.width == global.width(),
                fmt::format("cp_rank {}: binding '{}' does not match the global tensor", program.cp_rank, bind.tensor));
  HCPSIM_ASSERT(static_cast<int64_t>(bind.tokens.size()) == d.rows, "gather_input: tokens.size() != buffer rows");
  HCPSIM_ASSERT(bind.head_begin >= 0 && bind.head_begin + d.heads <= global.heads(),
                "gather_input: heads outside the global tensor");
  std::vector<float> data(static_cast<size_t>(d.elements()));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t r = 0; r < d.rows; ++r) {
      const int64_t token = bind.tokens[static_cast<size_t>(r)];
      HCPSIM_ASSERT(token >= 0 && token < global.rows(), "gather_input: token outside the sequence");
      for (int64_t hh = 0; hh < d.heads; ++hh) {
        const double* src = global.data() + global.index(b, token, bind.head_begin + hh, 0);
        float* dst = data.data() + ((b * d.rows + r) * d.heads + hh) * d.width;
        for (int64_t w = 0; w < d.width; ++w) dst[w] = semantics::round_to_dtype(static_cast<float>(src[w]), dtype);
      }
    }
  }
  return data;
}

OutputGatherer::OutputGatherer(const AttentionShape& sh) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  outputs_.out = HostTensor(sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_v, kNaN);
  outputs_.softmax_lse = HostTensor(sh.batch, sh.seq_length, sh.heads_q, 1, kNaN);
  outputs_.dq = HostTensor(sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_qk, kNaN);
  outputs_.dk = HostTensor(sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_qk, kNaN);
  outputs_.dv = HostTensor(sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_v, kNaN);
  for (const HostTensor* t : {&outputs_.out, &outputs_.softmax_lse, &outputs_.dq, &outputs_.dk, &outputs_.dv})
    written_.emplace_back(static_cast<size_t>(t->batch() * t->rows() * t->heads()), 0);
}

void OutputGatherer::add(const RankProgram& program, const IoBinding& bind, const float* data) {
  HostTensor* globals[] = {&outputs_.out, &outputs_.softmax_lse, &outputs_.dq, &outputs_.dk, &outputs_.dv};
  const char* names[] = {"out", "softmax_lse", "dq", "dk", "dv"};
  size_t t = 0;
  while (t < 5 && bind.tensor != names[t]) ++t;
  HCPSIM_ASSERT(t < 5, fmt::format("cp_rank {}: unknown output tensor '{}'", program.cp_rank, bind.tensor));
  HostTensor& g = *globals[t];
  const BufferDecl& d = program.buffers[static_cast<size_t>(bind.buffer)];
  HCPSIM_ASSERT(d.batch == g.batch() && d.width == g.width() && static_cast<int64_t>(bind.tokens.size()) == d.rows &&
                    bind.head_begin >= 0 && bind.head_begin + d.heads <= g.heads(),
                fmt::format("cp_rank {}: output binding '{}' does not fit the global tensor", program.cp_rank,
                            bind.tensor));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t r = 0; r < d.rows; ++r) {
      const int64_t token = bind.tokens[static_cast<size_t>(r)];
      HCPSIM_ASSERT(token >= 0 && token < g.rows(), "OutputGatherer: token outside the sequence");
      for (int64_t hh = 0; hh < d.heads; ++hh) {
        const int64_t head = bind.head_begin + hh;
        uint8_t& count = written_[t][static_cast<size_t>((b * g.rows() + token) * g.heads() + head)];
        HCPSIM_ASSERT(count == 0, fmt::format("global {}[b={}, token={}, head={}] written twice (cp_rank {})",
                                              bind.tensor, b, token, head, program.cp_rank));
        count = 1;
        const float* src = data + ((b * d.rows + r) * d.heads + hh) * d.width;
        double* dst = g.data() + g.index(b, token, head, 0);
        for (int64_t w = 0; w < d.width; ++w) dst[w] = static_cast<double>(src[w]);
      }
    }
  }
}

AttentionOutputs OutputGatherer::finish(Dtype dtype) {
  HostTensor* globals[] = {&outputs_.out, &outputs_.softmax_lse, &outputs_.dq, &outputs_.dk, &outputs_.dv};
  const char* names[] = {"out", "softmax_lse", "dq", "dk", "dv"};
  for (size_t t = 0; t < 5; ++t) {
    const auto it = std::find(written_[t].begin(), written_[t].end(), uint8_t{0});
    HCPSIM_ASSERT(it == written_[t].end(),
                  fmt::format("global {} element row {} is written by no rank", names[t], it - written_[t].begin()));
    round_tensor(*globals[t], t == 1 ? Dtype::fp32 : dtype);
  }
  return outputs_;
}

namespace {

TensorRef ref_of(std::vector<std::vector<float>>& bufs, const RankProgram& prog, BufferId id) {
  const BufferDecl& d = prog.buffers[static_cast<size_t>(id)];
  std::vector<float>& v = bufs[static_cast<size_t>(id)];
  HCPSIM_ASSERT(static_cast<int64_t>(v.size()) == d.elements(),
                fmt::format("cp_rank {}: buffer '{}' used while not live", prog.cp_rank, d.name));
  return TensorRef{v.data(), d.rows, d.heads, d.width};
}


/// Runs non-communication op `ref` of an attention schedule on the host copies `rb` of its rank's buffers, with the
/// device kernels' arithmetic (block_math.hpp, semantics.hpp).
void replay_op(const Schedule& schedule, const OpRef& ref, std::vector<std::vector<float>>& rb, float scale,
               Dtype dtype, Dtype acc_dtype) {
  const RankProgram& prog = schedule.ranks[static_cast<size_t>(ref.rank)];
  const Op& op = prog.ops[static_cast<size_t>(ref.op)];
  auto ptr_of = [&](BufferId id) { return ref_of(rb, prog, id).data; };
  auto outside_batch = [](const auto&) {
    HCPSIM_ASSERT(false, "execute_plan_on_host: a communication or layer op outside a batch");
  };
  visit_op(
      op.payload,
      Overload{
          [&](const AllocOp& p) {
            const BufferDecl& d = prog.buffers[static_cast<size_t>(p.buffer)];
            rb[static_cast<size_t>(p.buffer)].assign(static_cast<size_t>(d.elements()),
                                                     p.zero ? 0.0f : std::numeric_limits<float>::quiet_NaN());
          },
          [&](const FreeOp& p) { rb[static_cast<size_t>(p.buffer)] = std::vector<float>(); },
          [&](const AttnFwdBlockOp& p) {
            const AttnFwdArgs a = make_fwd_args(prog, p, ptr_of, scale, dtype);
            for (int64_t b = 0; b < a.batch; ++b)
              for (int64_t r = 0; r < a.nq; ++r)
                for (int64_t h = 0; h < a.q.heads; ++h) attn_fwd_row(a, b, r, h);
          },
          [&](const AttnBwdBlockOp& p) {
            AttnBwdArgs a = make_bwd_args(prog, p, ptr_of, scale, dtype);
            std::vector<float> delta(static_cast<size_t>(a.batch * a.nq * a.q.heads));
            a.delta = delta.data();
            for (int64_t b = 0; b < a.batch; ++b)
              for (int64_t r = 0; r < a.nq; ++r)
                for (int64_t h = 0; h < a.q.heads; ++h) attn_bwd_delta_row(a, b, r, h);
            for (int64_t b = 0; b < a.batch; ++b)
              for (int64_t r = 0; r < a.nq; ++r)
                for (int64_t h = 0; h < a.q.heads; ++h) attn_bwd_dq_row(a, b, r, h);
            for (int64_t b = 0; b < a.batch; ++b)
              for (int64_t c = 0; c < a.nk; ++c)
                for (int64_t g = 0; g < a.k.heads; ++g) attn_bwd_dkdv_row(a, b, c, g);
          },
          [&](const LseMergeOp& p) {
            const TensorRef dst = ref_of(rb, prog, p.dst);
            const TensorRef src = ref_of(rb, prog, p.src);
            const int64_t batch = prog.buffers[static_cast<size_t>(p.dst)].batch;
            for (int64_t b = 0; b < batch; ++b)
              for (int64_t r = 0; r < p.dst_rows.count; ++r)
                for (int64_t h = 0; h < dst.heads; ++h) {
                  float& l = *dst.at(b, p.dst_rows.begin + r, h);
                  const float li = *src.at(b, r, h);
                  l = p.naive ? semantics::lse_merge_naive(l, li) : semantics::lse_merge(l, li);
                }
          },
          [&](const OutCorrectionOp& p) {
            const TensorRef dst = ref_of(rb, prog, p.dst);
            const TensorRef src = ref_of(rb, prog, p.src);
            const TensorRef src_lse = ref_of(rb, prog, p.src_lse);
            const TensorRef lse = ref_of(rb, prog, p.lse);
            const int64_t batch = prog.buffers[static_cast<size_t>(p.dst)].batch;
            for (int64_t b = 0; b < batch; ++b)
              for (int64_t r = 0; r < p.dst_rows.count; ++r)
                for (int64_t h = 0; h < dst.heads; ++h) {
                  const int64_t row = p.dst_rows.begin + r;
                  float* d = dst.at(b, row, h);
                  const float* sv = src.at(b, r, h);
                  for (int64_t w = 0; w < dst.width; ++w)
                    d[w] = semantics::out_correction(d[w], sv[w], *src_lse.at(b, r, h), *lse.at(b, row, h),
                                                     p.accumulate, dtype);
                }
          },
          [&](const CopyOp& p) {
            apply_copy_segment(copy_op_segment(prog, ref.rank, p), ptr_of(p.src), ptr_of(p.dst), acc_dtype);
          },
          [&](const SendRecvOp& p) { outside_batch(p); },
          [&](const AllToAllOp& p) { outside_batch(p); },
          [&](const AllGatherOp& p) { outside_batch(p); },
          [&](const ReduceScatterOp& p) { outside_batch(p); },
          [&](const GemmOp& p) { outside_batch(p); },
          [&](const ElementwiseOp& p) { outside_batch(p); },
      });
}

}  // namespace

AttentionOutputs execute_plan_on_host(const Schedule& schedule, const ExecutionPlan& plan,
                                      const AttentionInputs& inputs, Dtype dtype) {
  check_gpu_dtype(dtype);
  const Dtype acc_dtype = accumulator_dtype(schedule, dtype);
  const auto scale = static_cast<float>(effective_softmax_scale(schedule.shape));
  std::vector<std::vector<std::vector<float>>> bufs(schedule.ranks.size());
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    const RankProgram& prog = schedule.ranks[r];
    bufs[r].resize(prog.buffers.size());
    for (const IoBinding& bind : prog.inputs)
      bufs[r][static_cast<size_t>(bind.buffer)] = gather_input(prog, bind, inputs, dtype);
  }
  for (const PlanStep& step : plan.steps) {
    if (step.is_batch) {
      for (const CommItem& item : step.items) {
        for (const CopySegment& seg : item.incoming) {
          const RankProgram& sp = schedule.ranks[static_cast<size_t>(seg.src_rank)];
          const RankProgram& dp = schedule.ranks[static_cast<size_t>(seg.dst_rank)];
          const float* src = ref_of(bufs[static_cast<size_t>(seg.src_rank)], sp, seg.src).data;
          float* dst = ref_of(bufs[static_cast<size_t>(seg.dst_rank)], dp, seg.dst).data;
          apply_copy_segment(seg, src, dst, acc_dtype);
        }
      }
      continue;
    }
    replay_op(schedule, step.op, bufs[static_cast<size_t>(step.op.rank)], scale, dtype, acc_dtype);
  }
  OutputGatherer gather(schedule.shape);
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    const RankProgram& prog = schedule.ranks[r];
    for (const IoBinding& bind : prog.outputs)
      gather.add(prog, bind, ref_of(bufs[r], prog, bind.buffer).data);
  }
  return gather.finish(dtype);
}

}  // namespace hcpsim::gpu
