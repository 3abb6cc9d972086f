#pragma once
// Private to hcpsim_gpu: one run of a Schedule on the device (run_schedule_on_device, device_executor.hpp). The
// run walks its ExecutionPlan in order; the parts of DeviceRun are defined by job in these sources:
//   device_streams.cpp     the run's CUDA/NCCL objects: which device runs which rank, one stream per (rank,
//                          schedule stream), the t0 event of each device, the NCCL communicators (all local GPUs,
//                          or one rank per process from an NCCL unique id), and their release;
//   device_buffers.cpp     stream-ordered buffers (cudaMallocAsync), inputs in and outputs out, CopySegments
//                          resolved to device addresses;
//   device_op_launch.cpp   the plan's waits and the CUDA events around every op, and the ops outside a batch
//                          (alloc/free, attention blocks on tensor cores or the clear row kernels, LSE merge,
//                          output correction, copies);
//   device_comm_batch.cpp  the rendezvous batches (counters, begin and finish of every member) and the
//                          single-device backend (copies between the ranks after their start events);
//   device_comm_nccl.cpp   the NCCL backend: pack, grouped ncclSend/ncclRecv, unpack;
//   device_timeline.cpp    the measured timeline from the events;
//   device_executor.cpp    the entry points with their checks and the memory check, and the walk of the plan.
// The order of the CUDA/NCCL calls is the synchronisation that tests/gpu/execution_plan_test.cpp's race check
// replays; it must not change.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/kernels.hpp"

namespace hcpsim::gpu::detail {

constexpr int kStreams = 3;  // compute, cp, comm (schedule.hpp Stream)

/// Every CUDA/NCCL object of one run; the destructor releases all of them without throwing (error paths).
class DeviceRun {
 public:
  DeviceRun(const Schedule& schedule, const ExecutionPlan& plan, const DeviceRunOptions& options);

  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;

  ~DeviceRun();

  /// Loads the inputs, runs every plan step (compute ops and communication batches), waits for the devices and
  /// returns the outputs, counters and measured timeline (device_executor.cpp).
  DeviceRunResult run(const AttentionInputs& inputs);

 private:
  // Devices and streams (device_streams.cpp).
  /// Whether this process runs `rank` (every rank unless one process per GPU).
  bool mine(int64_t rank) const { return opt_.process_rank < 0 || rank == opt_.process_rank; }

  std::vector<int> devices() const;

  cudaStream_t stream(int64_t rank, Stream st) { return streams_[static_cast<size_t>(rank)][static_cast<size_t>(st)]; }

  void use_device(int64_t rank) { HCPSIM_CUDA_CHECK(cudaSetDevice(device_of_[static_cast<size_t>(rank)])); }

  void setup();
  size_t first_rank_on(int device) const;

  // Buffers (device_buffers.cpp).
  float* allocate(int64_t rank, BufferId id, cudaStream_t st);
  float* live(int64_t rank, BufferId id);
  void load_inputs(const AttentionInputs& inputs);
  /// The segment with device addresses; `with_src` / `with_dst` false leave that side null (a staging buffer
  /// replaces it, and in process mode the other rank's buffers are not in this process).
  DeviceSegment resolve(const CopySegment& c, bool with_src = true, bool with_dst = true);
  std::vector<std::vector<float>> local_outputs();
  AttentionOutputs gather_outputs();

  // Events around ops, ops outside a batch (device_op_launch.cpp).
  cudaEvent_t new_event(std::vector<std::vector<cudaEvent_t>>& table, const OpRef& ref);

  const Op& op_of(const OpRef& ref) const { return s_.ranks[static_cast<size_t>(ref.rank)].ops[static_cast<size_t>(ref.op)]; }

  /// The plan's cross-stream waits of `ref`, then its start event.
  void begin(const OpRef& ref, cudaStream_t st);
  void finish(const OpRef& ref, cudaStream_t st);
  void compute(const OpRef& ref);

  // Communication batches, single-device backend (device_comm_batch.cpp).
  cudaEvent_t moved_event(int64_t rank, OpIndex op);
  void count_batch(const PlanStep& step);
  void batch(const PlanStep& step);
  /// Single device: the destination copies straight from its sources' buffers after their start events; the
  /// members complete only after every reader has copied (NCCL semantics: a send ends when the data has left).
  void single_device_batch(const PlanStep& step);

  // NCCL backend (device_comm_nccl.cpp).
  /// NCCL: each sender packs, per destination, the segments that destination reads from it (in the
  /// destination's order) into one contiguous staging buffer; grouped ncclSend/ncclRecv; each destination
  /// unpacks in its incoming order (self segments straight from its own buffers), so sums keep member order.
  void nccl_batch(const PlanStep& step);

  // The measured timeline (device_timeline.cpp).
  std::vector<MeasuredOp> measure();

  const Schedule& s_;
  const ExecutionPlan& plan_;
  DeviceRunOptions opt_;
  float scale_ = 0;
  Dtype format_ = Dtype::fp32;
  Dtype acc_format_ = Dtype::fp32;
  std::vector<int> device_of_;
  std::vector<std::array<cudaStream_t, kStreams>> streams_;
  std::vector<std::vector<float*>> ptr_;
  std::vector<std::vector<cudaEvent_t>> start_, end_;
  std::map<std::pair<int64_t, OpIndex>, cudaEvent_t> moved_;
  std::map<int, cudaEvent_t> t0_;
  std::vector<ncclComm_t> comms_;
  std::map<OpRef, std::string> kernel_;
  ExecutionStats stats_;
  int64_t tensor_core_blocks_ = 0;
  int64_t clear_blocks_ = 0;
};

}  // namespace hcpsim::gpu::detail
