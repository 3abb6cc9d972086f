#include "hcpsim/step/layer_builder.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/parallel_for.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/schedule_hazards.hpp"

namespace hcpsim {
namespace {

// Tags of the layer's TP collectives: above every tag an attention builder uses, so keys never collide.
constexpr int64_t kLayerTagBase = int64_t{1} << 40;
// Added to the tags of the recomputed attention forward, so its messages are distinct from the first forward's.
constexpr int64_t kRecomputeTagOffset = int64_t{1} << 39;

/// Builds the program of one (tp_rank, cp_rank). The attention program's buffers and bindings (less their tokens)
/// are copied, never moved: kept in the layer program they would pin its freed op storage apart (RSS +1 GB).
class LayerRankBuilder {
 public:
  LayerRankBuilder(const Scenario& s, const RankProgram& attention, int64_t tp_rank, int64_t cp_rank)
      : s_(s), attn_(attention), tp_(s.parallel.tensor_model_parallel_size), tp_rank_(tp_rank), cp_rank_(cp_rank) {
    prog_.rank = layer_rank(tp_rank, cp_rank, tp_);
    prog_.cp_rank = cp_rank;
    prog_.tp_rank = tp_rank;
    prog_.buffers = attention.buffers;
    // Bindings without their token lists: a layer schedule is timing-only (Schedule::check_invariants).
    for (const IoBinding& b : attention.inputs) prog_.inputs.push_back(IoBinding{b.tensor, b.buffer, {}, b.head_begin});
    for (const IoBinding& b : attention.outputs) prog_.outputs.push_back(IoBinding{b.tensor, b.buffer, {}, b.head_begin});
    live_.assign(prog_.buffers.size(), 0);
    freed_by_.assign(prog_.buffers.size(), -1);
    for (const auto& b : prog_.inputs) live_[static_cast<size_t>(b.buffer)] = 1;
    for (int64_t t = 0; t < tp_; ++t) tp_group_.push_back(layer_rank(t, cp_rank, tp_));
    primary_.assign(attention.ops.size(), -1);
    e_ = dtype_size_bytes(s.model.params_dtype);
  }

  RankProgram build() {
    const ModelConfig& m = s_.model;
    d_.sp = s_.parallel.sequence_parallel && tp_ > 1;
    d_.fp8 = s_.training.fp8;
    d_.fp8_current = d_.fp8 && s_.training.fp8_recipe == Fp8Recipe::tensorwise;
    d_.t = m.micro_batch_size * m.seq_length / s_.parallel.context_parallel_size;  // tokens per GPU
    d_.tn = d_.sp ? (d_.t + tp_ - 1) / tp_ : d_.t;
    d_.h = m.hidden();
    d_.ffn_tp = m.ffn_hidden() / tp_;
    d_.qkv_tp = (m.num_attention_heads * m.kv_channels + m.num_query_groups * (m.kv_channels + m.kv_channels_v)) / tp_;
    d_.proj_tp = m.num_attention_heads * m.kv_channels_v / tp_;
    d_.fc1_tp = (m.gated_linear_unit ? 2 : 1) * d_.ffn_tp;
    d_.rope_elems = d_.t * (m.num_attention_heads + m.num_query_groups) * m.kv_channels / tp_;

    first_bwd_ = attn_.ops.size();
    for (size_t i = 0; i < attn_.ops.size(); ++i)
      if (attn_.ops[i].phase == Phase::backward) {
        first_bwd_ = i;
        break;
      }
    for (size_t i = first_bwd_; i < attn_.ops.size(); ++i)
      HCPSIM_ASSERT(attn_.ops[i].phase == Phase::backward, "attention schedule interleaves forward and backward ops");

    // The attention forward is copied twice when it is recomputed (selective: inside the backward; full: with
    // the whole layer), its backward once; the layer's own ops come on top.
    const bool recompute = s_.training.recompute_granularity != RecomputeGranularity::none;
    prog_.ops.reserve(first_bwd_ * (recompute ? 2 : 1) + (attn_.ops.size() - first_bwd_) + 256);
    OpIndex x = forward(Phase::forward, "", -1, false);
    if (s_.training.recompute_granularity == RecomputeGranularity::full) x = forward(Phase::backward, "recompute ", x, true);
    x = backward_mlp(x);
    backward_attention(x);
    prog_.ops.shrink_to_fit();
    return std::move(prog_);
  }

 private:
  /// Per-GPU sizes of one layer (elements): t tokens (tn in the norm regions with SP), hidden h, and the
  /// TP-sharded widths of the QKV, projection-input, fc1 and fc2-input tensors.
  struct Dims {
    bool sp = false, fp8 = false, fp8_current = false;
    int64_t t = 0, tn = 0, h = 0, ffn_tp = 0, qkv_tp = 0, proj_tp = 0, fc1_tp = 0, rope_elems = 0;
  };

  /// The layer's forward; `phase` and `prefix` distinguish the full recompute copy. With FP8 every linear
  /// layer's input is cast as Transformer Engine does it (fp8_input_cast).
  OpIndex forward(Phase phase, const std::string& prefix, OpIndex after, bool recompute_copy) {
    const Dims& d = d_;
    const bool gated = s_.model.gated_linear_unit;
    OpIndex x = elementwise(2 * d.tn * d.h, d.tn * d.h, phase, deps_of(after), prefix + "input norm");
    x = fp8_input_cast(d.t * d.h, true, phase, x, prefix + "QKV input");
    x = gathered_gemm(GemmOp{d.t, d.qkv_tp, d.h, d.fp8}, phase, x, prefix + "SP all-gather (attention input)",
                      prefix + "QKV projection");
    x = elementwise(2 * d.rope_elems, d.rope_elems, phase, {x}, prefix + "rotary embedding");
    const std::vector<OpIndex> attn_ops =
        splice(0, first_bwd_, x, recompute_copy ? kRecomputeTagOffset : 0, recompute_copy, prefix);
    x = d.fp8 ? fp8_input_cast(d.t * d.proj_tp, false, phase, attn_ops, prefix + "projection input") : -1;
    x = reduced_gemm(GemmOp{d.t, d.h, d.proj_tp, d.fp8}, phase, x < 0 ? attn_ops : deps_of(x),
                     prefix + "output projection", prefix + "attention output");
    x = elementwise(3 * d.tn * d.h + 2 * d.tn * d.h, d.tn * d.h, phase, {x}, prefix + "residual + pre-MLP norm");
    x = fp8_input_cast(d.t * d.h, true, phase, x, prefix + "fc1 input");
    x = gathered_gemm(GemmOp{d.t, d.fc1_tp, d.h, d.fp8}, phase, x, prefix + "SP all-gather (MLP input)",
                      prefix + "MLP fc1");
    x = elementwise(d.fc1_tp * d.t + d.ffn_tp * d.t, d.ffn_tp * d.t, phase, {x},
                    prefix + (gated ? "SwiGLU" : "activation"));
    x = fp8_input_cast(d.t * d.ffn_tp, false, phase, x, prefix + "fc2 input");
    x = reduced_gemm(GemmOp{d.t, d.h, d.ffn_tp, d.fp8}, phase, {x}, prefix + "MLP fc2", prefix + "MLP output");
    return elementwise(3 * d.tn * d.h, d.tn * d.h, phase, {x}, prefix + "residual add");
  }

  /// Backward of the MLP block, from the layer's output grad; returns the op producing the pre-MLP grad.
  OpIndex backward_mlp(OpIndex x) {
    const Dims& d = d_;
    const auto B = Phase::backward;
    auto [dgrad, w] = row_parallel_backward(d.ffn_tp, x, "MLP output grad", "fc2", "MLP fc2");
    x = dgrad;
    x = elementwise(d.fc1_tp * d.t * 2 + d.ffn_tp * d.t, d.fc1_tp * d.t, B, {x},
                    s_.model.gated_linear_unit ? "SwiGLU backward" : "activation backward");
    x = fp8_grad_cast(d.t * d.fc1_tp, x, "fc1 output grad", false);
    const auto [c, wg] = column_parallel_backward(d.fc1_tp, x, w, "MLP fc1", "MLP input grad");
    return elementwise(5 * d.tn * d.h, d.tn * d.h, B, {c, wg}, "pre-MLP norm backward + residual");
  }

  /// Backward of the attention block (with the selective recompute of the CP attention forward).
  void backward_attention(OpIndex x) {
    const Dims& d = d_;
    const auto B = Phase::backward;
    auto [dgrad, w] = row_parallel_backward(d.proj_tp, x, "attention output grad", "projection", "output projection");
    x = dgrad;
    if (s_.training.recompute_granularity == RecomputeGranularity::selective) {
      const auto again = splice(0, first_bwd_, x, kRecomputeTagOffset, true, "recompute ");
      // One zero-byte kernel waits for the whole recomputed forward, so the backward depends on one op.
      x = elementwise(0, 0, B, again.empty() ? deps_of(x) : again, "recompute done");
    }
    const std::vector<OpIndex> attn_bwd = splice(first_bwd_, attn_.ops.size(), x, 0, false, "");
    x = elementwise(2 * d.rope_elems, d.rope_elems, B, attn_bwd, "rotary embedding backward");
    x = fp8_grad_cast(d.t * d.qkv_tp, x, "QKV output grad", false);
    const auto [c, wg] = column_parallel_backward(d.qkv_tp, x, w, "QKV", "attention input grad");
    elementwise(5 * d.tn * d.h, d.tn * d.h, B, {c, wg}, "input norm backward + residual");
  }

  /// The backward entry of a row-parallel linear layer (fc2, output projection) of input width `in_tp`: the SP
  /// all-gather of the output grad, its FP8 cast, the dgrad GEMM and the wgrad GEMM after it. Returns {dgrad,
  /// wgrad}.
  std::pair<OpIndex, OpIndex> row_parallel_backward(int64_t in_tp, OpIndex x, const std::string& grad,
                                                    const std::string& cast, const std::string& gemm_name) {
    const Dims& d = d_;
    const auto B = Phase::backward;
    x = fp8_grad_cast(d.t * d.h, x, cast + " output grad", true);
    x = gathered_gemm(backward_gemm(d.t, in_tp, d.h), B, x, "SP all-gather (" + grad + ")", gemm_name + " dgrad");
    const OpIndex w = gemm(backward_gemm(in_tp, d.h, d.t), B, {x}, gemm_name + " wgrad");
    return {x, w};
  }

  /// The backward of a column-parallel linear layer (QKV, fc1) of output width `out_tp` from its output grad
  /// `x`: the dgrad GEMM, its TP reduction on the comm stream while the wgrad GEMM runs (Megatron's asynchronous
  /// grad-input communication), and with SP the all-gather of the layer's input for the wgrad GEMM, issued before
  /// the dgrad GEMM so that it runs under it (Megatron-LM tensor_parallel/layers.py
  /// LinearWithGradAccumulationAndAsyncCommunication.backward; TE's bulk overlaps with tp_comm_overlap).
  /// `w` is the previous wgrad GEMM (wgrads run in order). Returns {input grad, wgrad}.
  std::pair<OpIndex, OpIndex> column_parallel_backward(int64_t out_tp, OpIndex x, OpIndex w, const std::string& name,
                                                       const std::string& grad) {
    const Dims& d = d_;
    const auto B = Phase::backward;
    const OpIndex input =
        d.sp ? all_gather(gathered_elements(d.t * d.h), B, deps_of(x), "SP all-gather (" + name + " input for wgrad)") : -1;
    x = gemm(backward_gemm(d.t, d.h, out_tp), B, {x}, name + " dgrad");
    const OpIndex c = tp_reduce(d.t * d.h, B, x, d.sp, grad);
    std::vector<OpIndex> wdeps{x, w};
    if (input >= 0) wdeps.push_back(input);
    w = gemm(backward_gemm(out_tp, d.h, d.t), B, std::move(wdeps), name + " wgrad");
    return {c, w};
  }

  /// Elements of the schedule's dtype that hold `n` values gathered over TP: with FP8, Transformer Engine casts
  /// before it gathers, so the SP all-gathers and userbuffers ring exchanges move FP8 (1 B per value: TE
  /// module/layernorm_linear.py gathers the norm's FP8 output, base.py grad_output_preprocess the FP8 output
  /// grad, and the userbuffers hold FP8 with fp8_buf); the reduce-scatters of GEMM outputs stay in the schedule's
  /// dtype. `n` without FP8.
  int64_t gathered_elements(int64_t n) const { return d_.fp8 ? (n + e_ - 1) / e_ : n; }

  /// A GEMM whose input is all-gathered over TP first (sequence parallelism): without tp_comm_overlap the
  /// all-gather, then the GEMM; with it, Transformer Engine's userbuffers ring exchange (TE
  /// pytorch/module/base.py initialize_ub, method ring_exchange for qkv/fc1 fprop and proj/fc2 dgrad): the GEMM
  /// runs in TP chunks of t/TP rows, chunk j on the shard that arrived in ring step j, while step j + 1's
  /// send/recv to the ring neighbours moves the next shard. Without SP, only the GEMM.
  OpIndex gathered_gemm(const GemmOp& g, Phase phase, OpIndex after, const std::string& gather_label,
                        const std::string& label) {
    if (!d_.sp) return gemm(g, phase, deps_of(after), label);
    if (!s_.parallel.tp_comm_overlap) {
      const OpIndex x = all_gather(gathered_elements(d_.t * d_.h), phase, deps_of(after), gather_label);
      return gemm(g, phase, {x}, label);
    }
    const int64_t rows = (g.m + tp_ - 1) / tp_;
    std::vector<BufferId> shards = ring_buffers(label, phase, after, gathered_elements((d_.t + tp_ - 1) / tp_ * d_.h));
    OpIndex step = after, chunk = gemm(with_rows(g, rows), phase, deps_of(after), label + " (chunk 0)");
    for (int64_t j = 1; j < tp_; ++j) {
      step = ring_step(shards[static_cast<size_t>(j - 1)], shards[static_cast<size_t>(j)], phase, step,
                       label + " ring exchange " + std::to_string(j), true);
      chunk = gemm(with_rows(g, rows), phase, {step, chunk}, label + " (chunk " + std::to_string(j) + ")");
    }
    free_all(shards, phase, chunk);
    return chunk;
  }

  /// A row-parallel GEMM whose output is reduced over TP (reduce-scatter with SP, all-reduce without): without
  /// tp_comm_overlap the GEMM, then tp_reduce; with it (SP), TE's ring-exchange GEMM + reduce-scatter: chunk j of
  /// the output is computed, added to the partial sum received from the previous rank, and sent on, so the
  /// GEMM of chunk j + 1 runs under the send/recv of chunk j.
  OpIndex reduced_gemm(const GemmOp& g, Phase phase, std::vector<OpIndex> deps, const std::string& label,
                       const std::string& what) {
    if (!(d_.sp && s_.parallel.tp_comm_overlap)) {
      const OpIndex x = gemm(g, phase, std::move(deps), label);
      return tp_reduce(d_.t * d_.h, phase, x, d_.sp, what);
    }
    const int64_t rows = (g.m + tp_ - 1) / tp_;
    const int64_t shard = rows * g.n;
    OpIndex chunk = gemm(with_rows(g, rows), phase, std::move(deps), label + " (chunk 0)");
    std::vector<BufferId> partials = ring_buffers(label, phase, chunk, (d_.t + tp_ - 1) / tp_ * d_.h);
    OpIndex sum = chunk, step = chunk;
    for (int64_t j = 1; j < tp_; ++j) {
      step = ring_step(partials[static_cast<size_t>(j - 1)], partials[static_cast<size_t>(j)], phase, sum,
                       what + " ring reduce-scatter " + std::to_string(j), false);
      chunk = gemm(with_rows(g, rows), phase, {chunk}, label + " (chunk " + std::to_string(j) + ")");
      sum = elementwise(3 * shard, shard, phase, {chunk, step}, what + " partial sum " + std::to_string(j));
    }
    free_all(partials, phase, sum);
    return sum;
  }

  /// TP shard buffers (`elements` each, one per ring step), allocated on the comm stream after `after`.
  std::vector<BufferId> ring_buffers(const std::string& label, Phase phase, OpIndex after, int64_t elements) {
    std::vector<BufferId> out;
    for (int64_t j = 0; j < tp_; ++j) {
      out.push_back(buffer(label + ".ring" + std::to_string(j), 1, elements));
      add(AllocOp{out.back()}, phase, Stream::comm, deps_of(after), "alloc " + label, 0, 0);
    }
    return out;
  }

  void free_all(const std::vector<BufferId>& bufs, Phase phase, OpIndex after) {
    for (const BufferId b : bufs) add(FreeOp{b}, phase, Stream::comm, deps_of(after), "free", 0, 0);
  }

  /// One ring step over the TP group: send `send` to the next TP rank, receive `recv` from the previous one.
  /// `copy_engine`: TE's ring exchange of the all-gather overlaps, which copies with the copy engines (use_ce,
  /// num_sm 1, no SM margin: pytorch/module/base.py initialize_ub defaults); the reduce-scatter overlaps
  /// ("pipeline", 16 SMs with an SM margin) take SMs.
  OpIndex ring_step(BufferId send, BufferId recv, Phase phase, OpIndex after, const std::string& label,
                    bool copy_engine) {
    const int64_t tag = next_tag_++;
    const int64_t next = layer_rank((tp_rank_ + 1) % tp_, cp_rank_, tp_);
    const int64_t prev = layer_rank((tp_rank_ + tp_ - 1) % tp_, cp_rank_, tp_);
    SendRecvOp m{next, prev, {send}, {recv}, tag, tag};
    m.copy_engine = copy_engine;
    return add(std::move(m), phase, Stream::comm, deps_of(after), label, 0,
               prog_.buffers[static_cast<size_t>(send)].size_bytes());
  }

  /// FP8 cast of a linear layer's input (`elements` per GPU), nothing without FP8. Transformer Engine
  /// (transformer_engine/pytorch/module/linear.py, layernorm_linear.py): a Linear's BF16 input goes through one
  /// cast-transpose kernel writing the FP8 tensor for the forward GEMM and its transpose for the wgrad GEMM
  /// (read 2 B, write 1 + 1 B per element). With delayed scaling a LayerNormLinear's norm writes FP8 itself
  /// (`after_norm`) and only the transpose remains (read 1 B, write 1 B), and each amax is taken inside its
  /// kernel. With current scaling (fp8_recipe tensorwise) the tensor's amax comes first (current_scaling_amax),
  /// and the norm writes BF16 (TE normalization.cpp FUSED_NORM_AMAX_FP8: the norm kernel outputs the amax, then
  /// quantize_with_amax casts), so every cast is a full cast-transpose. `after_norm` inputs are the
  /// column-parallel QKV and fc1 inputs, whose amax TE reduces over the TP group with sequence parallelism.
  OpIndex fp8_input_cast(int64_t elements, bool after_norm, Phase phase, OpIndex after, const std::string& what) {
    if (!d_.fp8) return after;
    return fp8_input_cast(elements, after_norm, phase, deps_of(after), what);
  }
  OpIndex fp8_input_cast(int64_t elements, bool after_norm, Phase phase, std::vector<OpIndex> deps,
                         const std::string& what) {
    if (d_.fp8_current) {
      const OpIndex scale = current_scaling_amax(elements, !after_norm, after_norm, phase, std::move(deps), what);
      return kernel(elements * 4, elements, phase, {scale}, "FP8 cast-transpose (" + what + ")");
    }
    return kernel(elements * (after_norm ? 2 : 4), elements, phase, std::move(deps),
                  "FP8 " + std::string(after_norm ? "transpose" : "cast-transpose") + " (" + what + ")");
  }

  /// FP8 cast-transpose of a linear layer's output grad for its dgrad and wgrad GEMMs (read 2 B, write 1 + 1 B
  /// per element; TE's grad_output preprocessing); nothing without FP8. With current scaling its amax pass
  /// comes first; `row_parallel` output grads (projection, fc2) have their amax reduced over the TP group with
  /// sequence parallelism (TE linear.py: "grad output for row-parallel").
  OpIndex fp8_grad_cast(int64_t elements, OpIndex after, const std::string& what, bool row_parallel) {
    if (!d_.fp8) return after;
    if (d_.fp8_current) after = current_scaling_amax(elements, true, row_parallel, Phase::backward, deps_of(after), what);
    return kernel(elements * 4, elements, Phase::backward, deps_of(after), "FP8 cast-transpose (" + what + ")");
  }

  /// The steps of per-tensor current scaling before a cast (TE quantizer.cpp,
  /// Float8CurrentScalingQuantizer::quantize_impl): the amax kernel (`own_pass`: reads the BF16 tensor, 2 B per
  /// element; otherwise the amax came out of the norm kernel), with sequence parallelism and `tp_reduced` the MAX
  /// all-reduce of the amax over the TP group (NCCL, latency-bound: modelled as an all-gather of the per-rank
  /// amax, 4 B each, whose maximum each rank takes), and the kernel computing the scale from the amax (one
  /// launch). Returns the scale kernel.
  OpIndex current_scaling_amax(int64_t elements, bool own_pass, bool tp_reduced, Phase phase, std::vector<OpIndex> deps,
                               const std::string& what) {
    std::vector<OpIndex> next =
        own_pass ? deps_of(kernel(elements * e_, elements, phase, std::move(deps), "FP8 amax (" + what + ")"))
                 : std::move(deps);
    if (tp_reduced && d_.sp) {
      const int64_t per_rank = (4 + e_ - 1) / e_;  // one fp32 amax, in elements of the schedule's buffers
      next = {all_gather(per_rank * tp_, phase, std::move(next), "FP8 amax all-reduce over TP (" + what + ")")};
    }
    return kernel(0, 1, phase, std::move(next), "FP8 scale from amax (" + what + ")");
  }

  /// A memory-bound kernel moving `bytes` bytes (read + written).
  OpIndex kernel(int64_t bytes, int64_t elements, Phase phase, std::vector<OpIndex> deps, std::string label) {
    return add(ElementwiseOp{elements}, phase, Stream::compute, std::move(deps), std::move(label), 0, bytes);
  }

  static std::vector<OpIndex> deps_of(OpIndex i) { return i < 0 ? std::vector<OpIndex>{} : std::vector<OpIndex>{i}; }

  OpIndex add(OpPayload payload, Phase phase, Stream stream, std::vector<OpIndex> deps, std::string label,
              double flops, int64_t bytes) {
    return prog_.append(std::move(payload), phase, stream, std::move(deps), std::move(label), -1, flops, bytes);
  }

  /// A GEMM of shape `g` on the compute stream (2·m·n·k FLOPs; A, B and C once through HBM).
  OpIndex gemm(const GemmOp& g, Phase phase, std::vector<OpIndex> deps, std::string label) {
    const double flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
    const int64_t bytes = (g.m * g.k + g.k * g.n + g.m * g.n) * e_;
    return add(g, phase, Stream::compute, std::move(deps), std::move(label), flops, bytes);
  }

  /// A dgrad or wgrad GEMM: with FP8, Transformer Engine runs it with the split accumulator
  /// (pytorch/module/base.py _2X_ACC_DGRAD, _2X_ACC_WGRAD); forward and recomputed-forward GEMMs accumulate fast.
  GemmOp backward_gemm(int64_t mm, int64_t nn, int64_t kk) const { return GemmOp{mm, nn, kk, d_.fp8, d_.fp8}; }

  /// `g` with `rows` rows (one TP chunk of a userbuffers ring-exchange GEMM).
  static GemmOp with_rows(GemmOp g, int64_t rows) {
    g.m = rows;
    return g;
  }

  /// A memory-bound kernel moving `elements_moved` elements (read + written).
  OpIndex elementwise(int64_t elements_moved, int64_t elements, Phase phase, std::vector<OpIndex> deps,
                      std::string label) {
    return add(ElementwiseOp{elements}, phase, Stream::compute, std::move(deps), std::move(label), 0,
               elements_moved * e_);
  }

  BufferId buffer(const std::string& name, int64_t rows, int64_t width) {
    BufferDecl d;
    d.name = name + "#" + std::to_string(prog_.buffers.size());
    d.batch = 1;
    d.rows = rows;
    d.heads = 1;
    d.width = width;
    d.dtype = s_.model.params_dtype;
    prog_.buffers.push_back(d);
    live_.push_back(0);
    return static_cast<BufferId>(prog_.buffers.size() - 1);
  }

  std::vector<int64_t> identity_order() const {
    std::vector<int64_t> o(static_cast<size_t>(2 * tp_));
    std::iota(o.begin(), o.end(), 0);
    return o;
  }

  /// A TP collective over a tensor of `elements` elements (the full, unsharded size). gather: shard → full.
  OpIndex collective(int64_t elements, bool gather, Phase phase, std::vector<OpIndex> deps, const std::string& label) {
    const int64_t width = (elements + tp_ - 1) / tp_;
    const BufferId shard = buffer(label + ".shard", 1, width);
    const BufferId full = buffer(label + ".full", tp_, width);
    const BufferId in = gather ? shard : full, out = gather ? full : shard;
    add(AllocOp{in}, phase, Stream::comm, deps, "alloc " + label, 0, 0);
    add(AllocOp{out}, phase, Stream::comm, {}, "alloc " + label, 0, 0);
    const int64_t tag = next_tag_++;
    OpIndex op;
    if (gather)
      op = add(AllGatherOp{tp_group_, identity_order(), in, out, tag}, phase, Stream::comm, std::move(deps), label, 0,
               prog_.buffers[static_cast<size_t>(in)].size_bytes());
    else
      op = add(ReduceScatterOp{tp_group_, identity_order(), in, out, tag}, phase, Stream::comm, std::move(deps), label,
               0, prog_.buffers[static_cast<size_t>(in)].size_bytes());
    add(FreeOp{in}, phase, Stream::comm, {}, "free " + label, 0, 0);
    add(FreeOp{out}, phase, Stream::comm, {}, "free " + label, 0, 0);
    return op;
  }

  OpIndex all_gather(int64_t elements, Phase phase, std::vector<OpIndex> deps, const std::string& label) {
    return collective(elements, true, phase, std::move(deps), label);
  }

  /// The TP reduction after a row-parallel GEMM (forward) or of a column-parallel GEMM's input grad
  /// (backward): reduce-scatter with SP, all-reduce (reduce-scatter + all-gather, NCCL's ring algorithm)
  /// without; nothing for TP = 1.
  OpIndex tp_reduce(int64_t elements, Phase phase, OpIndex after, bool sp, const std::string& what) {
    if (tp_ == 1) return after;
    if (sp) return collective(elements, false, phase, {after}, "SP reduce-scatter (" + what + ")");
    const OpIndex rs = collective(elements, false, phase, {after}, "TP all-reduce (" + what + ") reduce-scatter");
    return collective(elements, true, phase, {rs}, "TP all-reduce (" + what + ") all-gather");
  }

  int64_t remap(int64_t cp_peer) const { return cp_peer < 0 ? cp_peer : layer_rank(tp_rank_, cp_peer, tp_); }
  std::vector<int64_t> remap(const std::vector<int64_t>& group) const {
    std::vector<int64_t> out;
    for (int64_t g : group) out.push_back(remap(g));
    return out;
  }

  /// Copies attention ops [begin, end) into the program with peers and groups moved to this TP rank's CP
  /// group, every copied op also depending on `anchor`. recompute_copy: a second forward (phase backward,
  /// tags offset, allocs of buffers that are still live skipped). Returns the new indices of the copied
  /// non-memory ops (what the next layer op waits for).
  std::vector<OpIndex> splice(size_t begin, size_t end, OpIndex anchor, int64_t tag_offset, bool recompute_copy,
                              const std::string& prefix) {
    std::vector<OpIndex> local(attn_.ops.size(), -1);
    std::vector<OpIndex>& map = recompute_copy ? local : primary_;
    std::vector<OpIndex> work;
    for (size_t i = begin; i < end; ++i) {
      Op op = attn_.ops[i];
      OpIndex freed_by = -1;  // a re-allocation waits for the free that ended the buffer's previous life
      if (const auto* a = std::get_if<AllocOp>(&op.payload)) {
        if (live_[static_cast<size_t>(a->buffer)]) {
          HCPSIM_ASSERT(recompute_copy, "attention schedule allocates a live buffer");
          map[i] = anchor;
          continue;
        }
        live_[static_cast<size_t>(a->buffer)] = 1;
        freed_by = freed_by_[static_cast<size_t>(a->buffer)];
      } else if (const auto* f = std::get_if<FreeOp>(&op.payload)) {
        live_[static_cast<size_t>(f->buffer)] = 0;
        freed_by_[static_cast<size_t>(f->buffer)] = static_cast<OpIndex>(prog_.ops.size());  // this op, once appended
      }
      std::visit(
          [&](auto& p) {
            using T = std::decay_t<decltype(p)>;
            if constexpr (std::is_same_v<T, SendRecvOp>) {
              p.send_peer = remap(p.send_peer);
              p.recv_peer = remap(p.recv_peer);
              if (p.send_peer >= 0) p.send_tag += tag_offset;
              if (p.recv_peer >= 0) p.recv_tag += tag_offset;
            } else if constexpr (std::is_same_v<T, AllToAllOp> || std::is_same_v<T, AllGatherOp> ||
                                 std::is_same_v<T, ReduceScatterOp>) {
              p.group = remap(p.group);
              p.tag += tag_offset;
            }
          },
          op.payload);
      IndexList deps;  // in place for up to four (no allocation per copied op)
      for (OpIndex d : op.deps) {
        const OpIndex nd = map[static_cast<size_t>(d)] >= 0 ? map[static_cast<size_t>(d)] : primary_[static_cast<size_t>(d)];
        HCPSIM_ASSERT(nd >= 0, "attention op depends on an op that was not placed");
        deps.push_back(nd);
      }
      if (anchor >= 0) deps.push_back(anchor);
      if (freed_by >= 0) deps.push_back(freed_by);
      op.deps = std::move(deps);
      if (recompute_copy) {
        op.phase = Phase::backward;
        op.label = prefixed_label_by_identity(prefix, op.label);
      }
      const bool memory = op.kind() == OpKind::alloc || op.kind() == OpKind::free;
      prog_.ops.push_back(std::move(op));
      map[i] = static_cast<OpIndex>(prog_.ops.size() - 1);
      if (!memory) work.push_back(map[i]);
    }
    return work;
  }

  const Scenario& s_;
  const RankProgram& attn_;
  int64_t tp_, tp_rank_, cp_rank_;
  RankProgram prog_;
  std::vector<char> live_;
  /// Per buffer of the attention schedule: the layer op that last freed it, −1 if none. The recomputed attention
  /// forward allocates ring buffers again, on another stream than the first forward freed them on; nothing else
  /// orders the two (the ordering contract, schedule.hpp).
  std::vector<OpIndex> freed_by_;
  std::vector<int64_t> tp_group_;
  std::vector<OpIndex> primary_;
  Dims d_;
  size_t first_bwd_ = 0;  ///< index of the attention schedule's first backward op
  int64_t next_tag_ = kLayerTagBase;
  int e_ = 2;
};

}  // namespace

int64_t layer_rank(int64_t tp_rank, int64_t cp_rank, int64_t tp) { return cp_rank * tp + tp_rank; }

namespace {

/// The layer schedule's header fields from its attention schedule, with TP·CP ranks that hold only their
/// coordinates (rank, cp_rank, tp_rank).
Schedule layer_header(const Schedule& attention, int64_t tp) {
  Schedule out;
  out.kind = ScheduleKind::layer;
  out.cp_comm_type = attention.cp_comm_type;
  out.a2a_size = attention.a2a_size;
  out.p2p_size = attention.p2p_size;
  out.tp_size = tp;
  out.shape = attention.shape;
  out.ranks.resize(attention.ranks.size() * static_cast<size_t>(tp));
  for (size_t r = 0; r < out.ranks.size(); ++r) {
    const auto rank = static_cast<int64_t>(r);
    out.ranks[r].rank = rank;
    out.ranks[r].cp_rank = rank / tp;
    out.ranks[r].tp_rank = rank % tp;
  }
  return out;
}

/// Asserts that `attention`, handed in by a caller, is the attention schedule of `scenario` and `cp_comm_type`.
void check_given_attention(const Scenario& scenario, CpCommType cp_comm_type, const Schedule& attention) {
  const CpLayout layout = cp_layout_for(scenario, cp_comm_type);
  const AttentionShape want = attention_shape(scenario);
  const AttentionShape& got = attention.shape;
  HCPSIM_ASSERT(attention.kind == ScheduleKind::attention && attention.cp_comm_type == cp_comm_type &&
                    attention.a2a_size == layout.a2a_size() && attention.p2p_size == layout.p2p_size() &&
                    static_cast<int64_t>(attention.ranks.size()) == layout.cp_size(),
                "layer builder: the given attention schedule is not this scenario's comm type and layout");
  HCPSIM_ASSERT(got.batch == want.batch && got.seq_length == want.seq_length && got.heads_q == want.heads_q &&
                    got.heads_kv == want.heads_kv && got.head_dim_qk == want.head_dim_qk &&
                    got.head_dim_v == want.head_dim_v && got.causal == want.causal && got.dtype == want.dtype &&
                    got.softmax_scale == want.softmax_scale,
                "layer builder: the given attention schedule has another shape than the scenario's");
}

/// The CP ranks whose attention programs the listed layer ranks wrap, each once, in listed order.
std::vector<int64_t> wrapped_cp_ranks(const Scenario& scenario, CpCommType cp_comm_type,
                                      const std::vector<int64_t>& layer_ranks) {
  const int64_t tp = scenario.parallel.tensor_model_parallel_size;
  const CpLayout layout = cp_layout_for(scenario, cp_comm_type);
  std::vector<int64_t> cp_ranks;
  std::vector<char> listed(static_cast<size_t>(layout.cp_size() * tp), 0);
  for (int64_t r : layer_ranks) {
    HCPSIM_ASSERT(r >= 0 && r < layout.cp_size() * tp, "build_layer_schedule_ranks: layer rank out of range");
    HCPSIM_ASSERT(!listed[static_cast<size_t>(r)], "build_layer_schedule_ranks: layer rank listed twice");
    listed[static_cast<size_t>(r)] = 1;
    if (std::find(cp_ranks.begin(), cp_ranks.end(), r / tp) == cp_ranks.end()) cp_ranks.push_back(r / tp);
  }
  return cp_ranks;
}

}  // namespace

Schedule build_layer_schedule(const Scenario& scenario, CpCommType cp_comm_type, int threads) {
  const CpLayout layout = cp_layout_for(scenario, cp_comm_type);
  return build_layer_schedule(scenario, cp_comm_type,
                              build_schedule(cp_comm_type, layout, attention_shape(scenario), threads), threads);
}

Schedule build_layer_schedule(const Scenario& scenario, CpCommType cp_comm_type, Schedule attention, int threads) {
  check_given_attention(scenario, cp_comm_type, attention);
  const int64_t tp = scenario.parallel.tensor_model_parallel_size;
  for (const RankProgram& r : attention.ranks)
    HCPSIM_ASSERT(!r.ops.empty(), "build_layer_schedule: the given attention schedule lacks a CP rank's program");
  Schedule out = layer_header(attention, tp);
  parallel_for(static_cast<int64_t>(attention.ranks.size()), threads, [&](int64_t c) {
    for (int64_t t = 0; t < tp; ++t)
      out.ranks[static_cast<size_t>(layer_rank(t, c, tp))] =
          LayerRankBuilder(scenario, attention.ranks[static_cast<size_t>(c)], t, c).build();
    attention.ranks[static_cast<size_t>(c)] = RankProgram{};  // wrapped by its TP ranks; not needed again
  });
  out.check_invariants(threads);
#ifndef NDEBUG
  check_hazards(out);
#endif
  return out;
}

Schedule build_layer_schedule_ranks(const Scenario& scenario, CpCommType cp_comm_type,
                                    const std::vector<int64_t>& layer_ranks, int threads) {
  return build_layer_schedule_ranks(
      scenario, cp_comm_type, layer_ranks,
      build_schedule_ranks(cp_comm_type, cp_layout_for(scenario, cp_comm_type), attention_shape(scenario),
                           wrapped_cp_ranks(scenario, cp_comm_type, layer_ranks), threads),
      threads);
}

Schedule build_layer_schedule_ranks(const Scenario& scenario, CpCommType cp_comm_type,
                                    const std::vector<int64_t>& layer_ranks, Schedule attention, int threads) {
  check_given_attention(scenario, cp_comm_type, attention);
  const int64_t tp = scenario.parallel.tensor_model_parallel_size;
  const std::vector<int64_t> wrapped = wrapped_cp_ranks(scenario, cp_comm_type, layer_ranks);
  Schedule out = layer_header(attention, tp);
  // Per wrapped CP rank: its listed layer ranks, then its attention program is released (so the attention and
  // layer schedules are not held whole at the same time).
  parallel_for(static_cast<int64_t>(wrapped.size()), threads, [&](int64_t k) {
    const auto c = static_cast<size_t>(wrapped[static_cast<size_t>(k)]);
    HCPSIM_ASSERT(!attention.ranks[c].ops.empty(),
                  "build_layer_schedule_ranks: the given attention schedule lacks a wrapped CP rank's program");
    for (int64_t r : layer_ranks)
      if (static_cast<size_t>(r / tp) == c)
        out.ranks[static_cast<size_t>(r)] = LayerRankBuilder(scenario, attention.ranks[c], r % tp, r / tp).build();
    attention.ranks[c] = RankProgram{};
  });
  return out;
}

}  // namespace hcpsim
