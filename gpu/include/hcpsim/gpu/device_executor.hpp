#pragma once
/// The device executor: runs a Schedule on GPUs with CUDA kernels, streams and events, following its
/// ExecutionPlan (execution_plan.hpp), and measures every op. Two communication backends:
///   - single-device (devices = 1): every virtual CP rank lives on one GPU, each with its own three streams;
///     messages and collectives are device-to-device copies between the ranks' buffers on the destination's comm
///     stream, ordered by events (NCCL cannot put two ranks on one GPU, so this is how one GPU checks any CP size);
///   - NCCL (devices = N ≥ 2, one process driving N local GPUs, CP rank r on GPU r): grouped ncclSend/ncclRecv of
///     packed segments per batch, then unpacking, on each rank's comm stream.
/// Numerics: float storage holding values of the run's format, kernels round where TE rounds (block_math.hpp);
/// bf16/fp16 attention blocks run on tensor cores when supported (attention_tc.hpp), else the clear row kernels.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/io/chrome_trace.hpp"
#include "hcpsim/oracles/cpu_executor.hpp"
#include "hcpsim/oracles/inputs.hpp"
#include "hcpsim/oracles/reference.hpp"

namespace hcpsim::gpu {

/// Options of one device run.
struct DeviceRunOptions {
  Dtype dtype = Dtype::fp32;  ///< fp32, bf16 or fp16 (fp64 is InputError)
  int devices = 1;            ///< 1: single-device backend on `device_index`; N ≥ 2: NCCL on GPUs 0..N−1
  int device_index = 0;       ///< GPU of the single-device backend
  bool tensor_cores = true;   ///< false: the clear row kernels for every attention block
  /// One process per GPU (the MPI launcher, apps/hcpsim_mpi): this process runs only CP rank `process_rank` on
  /// GPU `device_index`, joining an NCCL communicator of all CP ranks made from `nccl_unique_id` (ncclGetUniqueId
  /// on process 0, broadcast by the launcher). Requires devices ≥ 2 (the NCCL protocol). −1: one process drives
  /// every rank.
  int process_rank = -1;
  std::array<char, 128> nccl_unique_id{};  ///< the bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES = 128)
};

/// One executed op with its measured interval (CUDA events around it on its stream).
struct MeasuredOp {
  int64_t cp_rank = 0;
  OpIndex op_index = 0;
  OpKind kind = OpKind::alloc;
  Phase phase = Phase::forward;
  Stream stream = Stream::compute;
  int64_t ring_step = -1;
  std::string label;
  int device = 0;
  double start_s = 0;  ///< from the start of the run on this device (s)
  double end_s = 0;
  double flops = 0;    ///< Op::flops
  int64_t bytes = 0;   ///< Op::bytes
  std::string kernel;  ///< attention blocks: "tensor_core" or "clear"; empty otherwise
  int64_t head_dim = 0, q_rows = 0, kv_rows = 0;  ///< attention blocks
  bool causal = false;                            ///< attention blocks: a causal mask
};

/// What a device run produced.
struct DeviceRunResult {
  ExecutionResult result;            ///< gathered outputs (rounded like the CPU executor's) and counters
  std::vector<MeasuredOp> timeline;  ///< every op, ordered by (cp_rank, op_index)
  std::string backend;               ///< "single-device" or "nccl"
  std::string device_name;           ///< cudaDeviceProp::name of device 0 of the run
  int64_t tensor_core_blocks = 0;    ///< attention block ops run on tensor cores
  int64_t clear_blocks = 0;          ///< attention block ops run by the clear row kernels
  int64_t planned_peak_bytes = 0;    ///< the memory check's bound on the busiest device (see run_schedule_on_device)
  double elapsed_s = 0;              ///< first op start to last op end, max over devices
  /// Process mode only (DeviceRunOptions::process_rank ≥ 0): the float contents of this rank's output buffers, one
  /// per RankProgram::outputs entry in order; result.outputs stays empty (the launcher gathers, then
  /// OutputGatherer). timeline then holds this rank's ops only.
  std::vector<std::vector<float>> local_outputs;
};

/// Runs `schedule` on the GPU(s). Inputs are loaded through RankProgram::inputs (rounded to options.dtype),
/// outputs gathered through RankProgram::outputs into the global tensors of reference.hpp (out/dq/dk/dv rounded to
/// dtype, softmax_lse fp32) — the same contract as execute_schedule (cpu_executor.hpp).
/// Before any allocation the run's memory is bounded (per rank the peak of live bytes in program order, summed
/// over the ranks of a device, plus inputs) and compared with cudaMemGetInfo's free memory.
/// @throws InputError (key "--dtype") for fp64; (key "--devices") when devices ≥ 2 differs from the number of CP
///   ranks, or process_rank is set without devices ≥ 2 or outside [0, ranks); (key "schedule") for layer-model ops or a schedule that deadlocks under rendezvous semantics.
/// @throws DeviceError (exit 3) when no device is usable, fewer than `devices` GPUs exist, memory does not
///   suffice, or any CUDA/NCCL call fails (the message names the call, file and line).
DeviceRunResult run_schedule_on_device(const Schedule& schedule, const AttentionInputs& inputs,
                                       const DeviceRunOptions& options);

/// The per-op CSV the simulator's calibration reads (step/calibration.hpp): header
/// "op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s,cp_rank,op_index,stream,kernel,label"
/// and one row per measured op except alloc/free (zero-time bookkeeping), in timeline order; measured_s printed
/// with 17 significant digits; labels quoted per RFC 4180.
std::string measured_ops_csv(const DeviceRunResult& run, Dtype dtype);

/// The measured timeline for the Chrome-trace writer (io/chrome_trace.hpp), laid out like the simulator's trace
/// (sim/trace_writer.hpp) so both open side by side: one process "node 0" and an empty "fabric" process; per CP
/// rank r the threads "gpu r cp rank r compute|cp_stream|comm" (single-device runs show each virtual rank as its own
/// GPU); per measured op except alloc and free a slice named by its label (with " [kernel]" for attention blocks) from start_s to end_s
/// (truncated to whole picoseconds), args {cp_rank, op_index, kind, phase, ring_step, start_ps, end_ps, flops,
/// bytes}.
TraceTimeline measured_timeline(const DeviceRunResult& run);

/// measured_timeline(run) with what the schedule that ran adds, in the simulator's trace form: per CP rank r with
/// memory a counter "memory" (id "gpu r", series allocated_bytes): its distinct input buffers at 0, then the live
/// bytes after each measured alloc and free (in start order, op order among equal starts), sized by the schedule's
/// buffers; and per matched SendRecvOp message (source, destination, tag, in program order) a flow arrow "cp
/// <src>-><dst>" (cat "message") from 1 ps after the sending op's start to 1 ps before the receiving op's end
/// (inside both slices). Ops missing from run.timeline (process mode) get no arrow.
/// @param schedule  the schedule run_schedule_on_device ran for `run` (its op indices and buffers are read as is).
TraceTimeline measured_timeline(const DeviceRunResult& run, const Schedule& schedule);

/// Result of the one-rank NCCL check.
struct NcclRingCheck {
  bool ok = false;
  int nccl_version = 0;
  int64_t elements = 0;    ///< floats sent and received
  double max_abs_err = 0;  ///< received vs sent
  std::string text;        ///< one line for the device check table
};

/// Brings up a one-rank NCCL communicator on `device` (ncclCommInitAll) and runs one ring step through it: a
/// grouped ncclSend to self and ncclRecv from self of `elements` floats (the ring of P = 1), then compares.
/// @throws DeviceError when no device is usable or a CUDA/NCCL call fails.
NcclRingCheck nccl_one_rank_ring_step(int device, int64_t elements);

}  // namespace hcpsim::gpu
