#pragma once
/// The layer model: one whole transformer layer (forward and backward, one micro-batch) for every GPU of one
/// tensor × context parallel slice, as a Schedule the simulator times like the attention schedule. The CP
/// attention schedule (schedule_builder.hpp) sits in the middle, unchanged, once per TP rank.

#include <cstdint>
#include <vector>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/config/scenario.hpp"
#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// Rank index of (tp_rank, cp_rank) in a layer schedule: cp_rank·TP + tp_rank (TP varies fastest, as in
/// Megatron's default order). With TP = 1 the index is the CP rank.
int64_t layer_rank(int64_t tp_rank, int64_t cp_rank, int64_t tp);

/// Builds one layer for all TP·CP ranks of the (dp, pp) = (0, 0) slice. Per rank, in order (Megatron-Core
/// TransformerLayer with TE linear layers; t = b·S/CP tokens, t/TP in the norm regions with sequence
/// parallelism):
///   forward: input norm → [SP: all-gather over TP] → QKV GEMM (t × h → (H·dk + Hkv·(dk+dv))/TP) → rotary →
///     CP attention forward → output projection GEMM (H·dv/TP → h) → [TP: reduce-scatter with SP, else
///     all-reduce = reduce-scatter + all-gather] → residual + pre-MLP norm → [SP all-gather] → fc1 GEMM
///     (h → (2 if gated else 1)·ffn/TP) → activation → fc2 GEMM (ffn/TP → h) → [TP reduce-scatter or
///     all-reduce] → residual;
///   backward: [full recompute: the whole forward again; selective: the CP attention forward again] → the
///     reverse, with each linear layer's dgrad GEMM, then its TP collective on the comm stream overlapped with
///     the wgrad GEMM (Megatron's asynchronous grad-input communication), and the CP attention backward.
/// With SP the backward also all-gathers the QKV and fc1 inputs for their wgrad GEMMs under the dgrad GEMM.
/// training.fp8 adds TE's FP8 cast kernels: a cast-transpose of each linear input (a transpose after a fused norm)
/// in the forward and of each output grad in the backward. parallel.tp_comm_overlap turns each SP all-gather +
/// GEMM and GEMM + reduce-scatter into TE's ring exchange: TP GEMM chunks of t/TP rows with a SendRecvOp to the
/// ring neighbours between them (TE pytorch/module/base.py initialize_ub).
/// TP collectives are AllGatherOp / ReduceScatterOp over the TP group on the comm stream (so the flow network
/// times them on NVLink or the network with the CP traffic); GEMMs are GemmOp and memory-bound kernels
/// ElementwiseOp on the compute stream. Layer-op buffers are 1-row-per-TP-shard tensors [1, tp, 1, E/tp]
/// (only their sizes matter).
/// @param scenario validated (ValidationScope::placement); @param cp_comm_type one of its comm types.
/// @return a schedule with TP·CP ranks (RankProgram::rank = layer_rank(t, c, TP), with its cp_rank c and tp_rank t); check_invariants holds.
/// Source: Megatron-LM megatron/core/transformer/transformer_layer.py, tensor_parallel/layers.py
/// (LinearWithGradAccumulationAndAsyncCommunication), tensor_parallel/mappings.py (SP gather/scatter);
/// Korthikanti et al. 2022 (arXiv:2205.05198) Figure 5 for the SP collective placement.
/// @param threads  rank programs built and checked (check_invariants) at once (core/parallel_for.hpp); the
///   schedule is the same for any count.
Schedule build_layer_schedule(const Scenario& scenario, CpCommType cp_comm_type, int threads = 1);

/// build_layer_schedule around a given attention schedule instead of building one: `attention` must be
/// build_schedule's for this scenario and comm type (e.g. the one simulate_attention simulated; its programs are
/// released as the layer ranks wrapping them are built). Same result.
/// @throws nothing; HCPSIM_ASSERT when `attention` is not of this comm type, layout and shape or lacks a program.
Schedule build_layer_schedule(const Scenario& scenario, CpCommType cp_comm_type, Schedule attention,
                              int threads = 1);

/// build_layer_schedule for the listed layer ranks only (the representatives of the simulator's symmetry
/// reduction, SimOptions::symmetry_reduction): their programs are exactly build_layer_schedule's (the attention
/// programs come from build_schedule_ranks); every other rank keeps only its rank, cp_rank and tp_rank (no buffers,
/// ops or bindings). A partial schedule fails Schedule::check_invariants by design (its messages have missing
/// peers), so it is not run here; build_layer_schedule builds and checks the same programs.
/// @param layer_ranks  distinct layer ranks < TP·CP (HCPSIM_ASSERT); cp_comm_type p2p, a2a or a2a+p2p.
Schedule build_layer_schedule_ranks(const Scenario& scenario, CpCommType cp_comm_type,
                                    const std::vector<int64_t>& layer_ranks, int threads = 1);

/// build_layer_schedule_ranks around a given attention schedule (build_schedule's or build_schedule_ranks' for
/// this scenario and comm type, with a program for every CP rank the listed layer ranks wrap) instead of building
/// one. Same result. HCPSIM_ASSERT as build_layer_schedule's overload.
Schedule build_layer_schedule_ranks(const Scenario& scenario, CpCommType cp_comm_type,
                                    const std::vector<int64_t>& layer_ranks, Schedule attention, int threads = 1);

/// Global GPU index of every rank of build_layer_schedule's schedule, by Megatron's rank order (dp = pp = 0).
std::vector<int64_t> layer_rank_gpus(const Scenario& scenario, int64_t data_parallel_size);

}  // namespace hcpsim
