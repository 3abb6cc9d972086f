#include "hcpsim/gpu/device_executor.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <type_traits>
#include <variant>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/gpu/attention_tc.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/gpu/kernels.hpp"

namespace hcpsim::gpu {

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky state of a non-fatal error
  throw DeviceError(fmt::format("{}:{}: {}: {}: {}", file, line, call, cudaGetErrorName(status),
                                cudaGetErrorString(status)));
}

void check_nccl(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  throw DeviceError(fmt::format("{}:{}: {}: {} ({})", file, line, call, ncclGetErrorString(status),
                                ncclGetLastError(nullptr)));
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw DeviceError(fmt::format("{}:{}: kernel launch {}: {}: {}", file, line, kernel, cudaGetErrorName(status),
                                cudaGetErrorString(status)));
}

namespace {

constexpr int kStreams = 3;  // compute, cp, comm (schedule.hpp Stream)

/// Every CUDA/NCCL object of one run; the destructor releases all of them without throwing (error paths).
class DeviceRun {
 public:
  DeviceRun(const Schedule& schedule, const ExecutionPlan& plan, const DeviceRunOptions& options)
      : s_(schedule), plan_(plan), opt_(options) {
    const size_t nranks = schedule.ranks.size();
    device_of_.resize(nranks);
    for (size_t r = 0; r < nranks; ++r) {
      device_of_[r] = opt_.devices >= 2 && opt_.process_rank < 0 ? static_cast<int>(r) : opt_.device_index;
    }
    streams_.assign(nranks, std::array<cudaStream_t, kStreams>{});
    ptr_.resize(nranks);
    start_.resize(nranks);
    end_.resize(nranks);
    for (size_t r = 0; r < nranks; ++r) {
      ptr_[r].assign(schedule.ranks[r].buffers.size(), nullptr);
      start_[r].assign(schedule.ranks[r].ops.size(), nullptr);
      end_[r].assign(schedule.ranks[r].ops.size(), nullptr);
    }
    scale_ = static_cast<float>(effective_softmax_scale(schedule.shape));
    format_ = static_cast<RoundFormat>(opt_.dtype);
    acc_format_ = static_cast<RoundFormat>(accumulator_dtype(schedule, opt_.dtype));
  }

  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;

  ~DeviceRun() {
    for (int d : devices()) {
      cudaSetDevice(d);
      cudaDeviceSynchronize();
    }
    for (size_t r = 0; r < ptr_.size(); ++r) {
      cudaSetDevice(device_of_[r]);
      for (float* p : ptr_[r]) {
        if (p != nullptr) cudaFree(p);
      }
      for (cudaEvent_t e : start_[r]) {
        if (e != nullptr) cudaEventDestroy(e);
      }
      for (cudaEvent_t e : end_[r]) {
        if (e != nullptr) cudaEventDestroy(e);
      }
      for (cudaStream_t st : streams_[r]) {
        if (st != nullptr) cudaStreamDestroy(st);
      }
    }
    for (const auto& [d, e] : t0_) {
      cudaSetDevice(d);
      cudaEventDestroy(e);
    }
    for (auto& [key, e] : moved_) {
      cudaSetDevice(device_of_[static_cast<size_t>(key.first)]);
      cudaEventDestroy(e);
    }
    for (ncclComm_t c : comms_) {
      if (c != nullptr) ncclCommDestroy(c);
    }
    cudaGetLastError();
  }

  DeviceRunResult run(const AttentionInputs& inputs) {
    setup();
    load_inputs(inputs);
    for (const PlanStep& step : plan_.steps) {
      if (step.is_batch) {
        batch(step);
      } else if (mine(step.op.rank)) {
        compute(step.op);
      }
    }
    for (int d : devices()) {
      HCPSIM_CUDA_CHECK(cudaSetDevice(d));
      HCPSIM_CUDA_CHECK(cudaDeviceSynchronize());
    }
    DeviceRunResult out;
    if (opt_.process_rank >= 0) {
      out.local_outputs = local_outputs();
    } else {
      out.result.outputs = gather_outputs();
    }
    out.result.stats = stats_;
    out.timeline = measure();
    out.backend = opt_.devices >= 2 ? "nccl" : "single-device";
    cudaDeviceProp prop{};
    HCPSIM_CUDA_CHECK(cudaGetDeviceProperties(&prop, devices().front()));
    out.device_name = prop.name;
    out.tensor_core_blocks = tensor_core_blocks_;
    out.clear_blocks = clear_blocks_;
    for (const MeasuredOp& m : out.timeline) out.elapsed_s = std::max(out.elapsed_s, m.end_s);
    return out;
  }

 private:
  /// Whether this process runs `rank` (every rank unless one process per GPU).
  bool mine(int64_t rank) const { return opt_.process_rank < 0 || rank == opt_.process_rank; }

  std::vector<int> devices() const {
    if (opt_.process_rank >= 0) return {opt_.device_index};
    std::vector<int> d(device_of_.begin(), device_of_.end());
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    return d;
  }

  cudaStream_t stream(int64_t rank, Stream st) { return streams_[static_cast<size_t>(rank)][static_cast<size_t>(st)]; }

  void use_device(int64_t rank) { HCPSIM_CUDA_CHECK(cudaSetDevice(device_of_[static_cast<size_t>(rank)])); }

  void setup() {
    for (int d : devices()) {
      HCPSIM_CUDA_CHECK(cudaSetDevice(d));
      cudaEvent_t e = nullptr;
      HCPSIM_CUDA_CHECK(cudaEventCreate(&e));
      t0_[d] = e;
    }
    for (size_t r = 0; r < streams_.size(); ++r) {
      if (!mine(static_cast<int64_t>(r))) continue;
      HCPSIM_CUDA_CHECK(cudaSetDevice(device_of_[r]));
      for (int k = 0; k < kStreams; ++k)
        HCPSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[r][static_cast<size_t>(k)], cudaStreamNonBlocking));
    }
    if (opt_.process_rank >= 0) {
      comms_.assign(s_.ranks.size(), nullptr);
      ncclUniqueId id;
      static_assert(sizeof(id.internal) == 128, "NCCL_UNIQUE_ID_BYTES");
      std::copy(opt_.nccl_unique_id.begin(), opt_.nccl_unique_id.end(), id.internal);
      HCPSIM_CUDA_CHECK(cudaSetDevice(opt_.device_index));
      HCPSIM_NCCL_CHECK(ncclCommInitRank(&comms_[static_cast<size_t>(opt_.process_rank)],
                                         static_cast<int>(s_.ranks.size()), id, opt_.process_rank));
    } else if (opt_.devices >= 2) {
      comms_.assign(static_cast<size_t>(opt_.devices), nullptr);
      std::vector<int> list(static_cast<size_t>(opt_.devices));
      for (int d = 0; d < opt_.devices; ++d) list[static_cast<size_t>(d)] = d;
      HCPSIM_NCCL_CHECK(ncclCommInitAll(comms_.data(), opt_.devices, list.data()));
    }
  }

  float* allocate(int64_t rank, BufferId id, cudaStream_t st) {
    const BufferDecl& d = s_.ranks[static_cast<size_t>(rank)].buffers[static_cast<size_t>(id)];
    float*& p = ptr_[static_cast<size_t>(rank)][static_cast<size_t>(id)];
    HCPSIM_ASSERT(p == nullptr, fmt::format("cp_rank {}: buffer '{}' allocated while live", rank, d.name));
    const auto bytes = static_cast<size_t>(std::max<int64_t>(d.elements(), 1)) * sizeof(float);
    void* raw = nullptr;
    HCPSIM_CUDA_CHECK(cudaMallocAsync(&raw, bytes, st));
    p = static_cast<float*>(raw);
    return p;
  }

  float* live(int64_t rank, BufferId id) {
    float* p = ptr_[static_cast<size_t>(rank)][static_cast<size_t>(id)];
    HCPSIM_ASSERT(p != nullptr, fmt::format("cp_rank {}: buffer '{}' used while not live", rank,
                                            s_.ranks[static_cast<size_t>(rank)].buffers[static_cast<size_t>(id)].name));
    return p;
  }

  void load_inputs(const AttentionInputs& inputs) {
    // Inputs go through the compute stream of their rank, and every stream of the rank starts after them.
    for (size_t r = 0; r < s_.ranks.size(); ++r) {
      const RankProgram& prog = s_.ranks[r];
      const auto rank = static_cast<int64_t>(r);
      if (!mine(rank)) continue;
      use_device(rank);
      cudaStream_t st = stream(rank, Stream::compute);
      for (const IoBinding& bind : prog.inputs) {
        const std::vector<float> host = gather_input(prog, bind, inputs, opt_.dtype);
        float* p = allocate(rank, bind.buffer, st);
        HCPSIM_CUDA_CHECK(cudaMemcpyAsync(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, st));
        HCPSIM_CUDA_CHECK(cudaStreamSynchronize(st));  // `host` dies at the end of the iteration
      }
    }
    for (const auto& [d, e] : t0_) {
      HCPSIM_CUDA_CHECK(cudaSetDevice(d));
      HCPSIM_CUDA_CHECK(cudaDeviceSynchronize());
      HCPSIM_CUDA_CHECK(cudaEventRecord(e, streams_[first_rank_on(d)][0]));
    }
    for (size_t r = 0; r < s_.ranks.size(); ++r) {
      if (!mine(static_cast<int64_t>(r))) continue;
      use_device(static_cast<int64_t>(r));
      for (int k = 0; k < kStreams; ++k)
        HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(streams_[r][static_cast<size_t>(k)], t0_.at(device_of_[r]), 0));
    }
  }

  size_t first_rank_on(int device) const {
    for (size_t r = 0; r < device_of_.size(); ++r) {
      if (device_of_[r] == device && mine(static_cast<int64_t>(r))) return r;
    }
    return 0;
  }

  cudaEvent_t new_event(std::vector<std::vector<cudaEvent_t>>& table, const OpRef& ref) {
    cudaEvent_t& e = table[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.op)];
    if (e == nullptr) HCPSIM_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }

  const Op& op_of(const OpRef& ref) const { return s_.ranks[static_cast<size_t>(ref.rank)].ops[static_cast<size_t>(ref.op)]; }

  /// The plan's cross-stream waits of `ref`, then its start event.
  void begin(const OpRef& ref, cudaStream_t st) {
    for (OpIndex w : plan_.waits[static_cast<size_t>(ref.rank)][static_cast<size_t>(ref.op)]) {
      cudaEvent_t e = end_[static_cast<size_t>(ref.rank)][static_cast<size_t>(w)];
      HCPSIM_ASSERT(e != nullptr, "device executor: a wait on an op that was not enqueued before");
      HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, e, 0));
    }
    HCPSIM_CUDA_CHECK(cudaEventRecord(new_event(start_, ref), st));
  }

  void finish(const OpRef& ref, cudaStream_t st) {
    HCPSIM_CUDA_CHECK(cudaEventRecord(new_event(end_, ref), st));
    ++stats_.ops_executed;
  }

  void compute(const OpRef& ref) {
    use_device(ref.rank);
    const RankProgram& prog = s_.ranks[static_cast<size_t>(ref.rank)];
    const Op& op = op_of(ref);
    cudaStream_t st = stream(ref.rank, op.stream);
    begin(ref, st);
    auto ptr_of = [&](BufferId id) { return live(ref.rank, id); };
    std::visit(
        [&](const auto& p) {
          using T = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<T, AllocOp>) {
            float* data = allocate(ref.rank, p.buffer, st);
            const int64_t n = prog.buffers[static_cast<size_t>(p.buffer)].elements();
            if (p.zero) {
              HCPSIM_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<size_t>(n) * sizeof(float), st));
            } else {
              launch_fill_nan(data, n, st);
            }
          } else if constexpr (std::is_same_v<T, FreeOp>) {
            float*& data = ptr_[static_cast<size_t>(ref.rank)][static_cast<size_t>(p.buffer)];
            HCPSIM_ASSERT(data != nullptr, "device executor: free of a buffer that is not live");
            HCPSIM_CUDA_CHECK(cudaFreeAsync(data, st));
            data = nullptr;
          } else if constexpr (std::is_same_v<T, AttnFwdBlockOp>) {
            const AttnFwdArgs a = make_fwd_args(prog, p, ptr_of, scale_, format_);
            if (opt_.tensor_cores && launch_attn_fwd_tensor_core(a, st)) {
              ++tensor_core_blocks_;
              kernel_[ref] = "tensor_core";
            } else {
              launch_attn_fwd_clear(a, st);
              ++clear_blocks_;
              kernel_[ref] = "clear";
            }
          } else if constexpr (std::is_same_v<T, AttnBwdBlockOp>) {
            AttnBwdArgs a = make_bwd_args(prog, p, ptr_of, scale_, format_);
            void* delta = nullptr;
            const int64_t n = std::max<int64_t>(a.batch * a.nq * a.q.heads, 1);
            HCPSIM_CUDA_CHECK(cudaMallocAsync(&delta, static_cast<size_t>(n) * sizeof(float), st));
            a.delta = static_cast<float*>(delta);
            if (opt_.tensor_cores && launch_attn_bwd_tensor_core(a, st)) {
              ++tensor_core_blocks_;
              kernel_[ref] = "tensor_core";
            } else {
              launch_attn_bwd_clear(a, st);
              ++clear_blocks_;
              kernel_[ref] = "clear";
            }
            HCPSIM_CUDA_CHECK(cudaFreeAsync(delta, st));
          } else if constexpr (std::is_same_v<T, LseMergeOp>) {
            const int64_t batch = prog.buffers[static_cast<size_t>(p.dst)].batch;
            launch_lse_merge(tensor_ref(prog, p.dst, ptr_of(p.dst)), p.dst_rows.begin,
                             tensor_ref(prog, p.src, ptr_of(p.src)), batch, p.dst_rows.count, p.naive, st);
          } else if constexpr (std::is_same_v<T, OutCorrectionOp>) {
            const int64_t batch = prog.buffers[static_cast<size_t>(p.dst)].batch;
            launch_out_correction(tensor_ref(prog, p.dst, ptr_of(p.dst)), p.dst_rows.begin,
                                  tensor_ref(prog, p.src, ptr_of(p.src)), tensor_ref(prog, p.src_lse, ptr_of(p.src_lse)),
                                  tensor_ref(prog, p.lse, ptr_of(p.lse)), batch, p.dst_rows.count, p.accumulate,
                                  format_, st);
          } else if constexpr (std::is_same_v<T, CopyOp>) {
            launch_copy_segment(resolve(copy_op_segment(prog, ref.rank, p)), acc_format_, st);
          } else {
            HCPSIM_ASSERT(false, "device executor: a communication or layer op outside a batch");
          }
        },
        op.payload);
    finish(ref, st);
  }

  /// The segment with device addresses; `with_src` / `with_dst` false leave that side null (a staging buffer
  /// replaces it, and in process mode the other rank's buffers are not in this process).
  DeviceSegment resolve(const CopySegment& c, bool with_src = true, bool with_dst = true) {
    DeviceSegment d;
    d.src = with_src ? live(c.src_rank, c.src) : nullptr;
    d.dst = with_dst ? live(c.dst_rank, c.dst) : nullptr;
    d.src_offset = c.src_offset;
    d.src_batch_stride = c.src_batch_stride;
    d.src_row_stride = c.src_row_stride;
    d.dst_offset = c.dst_offset;
    d.dst_batch_stride = c.dst_batch_stride;
    d.dst_row_stride = c.dst_row_stride;
    d.batch = c.batch;
    d.rows = c.rows;
    d.run_elements = c.run_elements;
    d.accumulate = c.accumulate;
    return d;
  }

  cudaEvent_t moved_event(int64_t rank, OpIndex op) {
    cudaEvent_t& e = moved_[{rank, op}];
    if (e == nullptr) HCPSIM_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }

  void count_batch(const PlanStep& step) {
    for (const CommItem& item : step.items) {
      const Op& op = op_of(item.op);
      if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
        if (sr->recv_peer >= 0) {
          ++stats_.messages;
          for (const CopySegment& seg : item.incoming) stats_.message_elements += seg.elements();
        }
      }
    }
    std::map<int64_t, int> collectives;  // one per group and tag
    for (const CommItem& item : step.items) {
      const Op& op = op_of(item.op);
      if (!std::holds_alternative<SendRecvOp>(op.payload)) {
        int64_t first = -1;
        if (const auto* a = std::get_if<AllToAllOp>(&op.payload)) first = a->group.front();
        if (const auto* g = std::get_if<AllGatherOp>(&op.payload)) first = g->group.front();
        if (const auto* rs = std::get_if<ReduceScatterOp>(&op.payload)) first = rs->group.front();
        collectives[first] = 1;
      }
    }
    stats_.all_to_alls += static_cast<int64_t>(collectives.size());
  }

  void batch(const PlanStep& step) {
    count_batch(step);
    // Phase 1: every member waits for its own program order and marks its data ready.
    for (const CommItem& item : step.items) {
      if (!mine(item.op.rank)) continue;
      use_device(item.op.rank);
      begin(item.op, stream(item.op.rank, Stream::comm));
    }
    if (opt_.devices >= 2) {
      nccl_batch(step);
    } else {
      single_device_batch(step);
    }
    for (const CommItem& item : step.items) {
      if (!mine(item.op.rank)) continue;
      use_device(item.op.rank);
      finish(item.op, stream(item.op.rank, Stream::comm));
    }
  }

  /// Single device: the destination copies straight from its sources' buffers after their start events; the
  /// members complete only after every reader has copied (NCCL semantics: a send ends when the data has left).
  void single_device_batch(const PlanStep& step) {
    for (const CommItem& item : step.items) {
      cudaStream_t st = stream(item.op.rank, Stream::comm);
      for (int64_t src : item.sources) {
        const OpRef src_ref = member(step, src);
        HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, start_[static_cast<size_t>(src)][static_cast<size_t>(src_ref.op)], 0));
      }
      for (const CopySegment& seg : item.incoming) launch_copy_segment(resolve(seg), acc_format_, st);
      HCPSIM_CUDA_CHECK(cudaEventRecord(moved_event(item.op.rank, item.op.op), st));
    }
    for (const CommItem& item : step.items) {
      cudaStream_t st = stream(item.op.rank, Stream::comm);
      for (int64_t reader : item.readers) {
        const OpRef ref = member(step, reader);
        HCPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, moved_event(ref.rank, ref.op), 0));
      }
    }
  }

  static OpRef member(const PlanStep& step, int64_t rank) {
    for (const CommItem& item : step.items) {
      if (item.op.rank == rank) return item.op;
    }
    HCPSIM_ASSERT(false, "device executor: a batch source that is not a batch member");
    return OpRef{};
  }

  static int64_t packed_elements(const CommItem& dst, int64_t src_rank) {
    int64_t n = 0;
    for (const CopySegment& seg : dst.incoming) {
      if (seg.src_rank == src_rank) n += seg.elements();
    }
    return n;
  }

  /// NCCL: each sender packs, per destination, the segments that destination reads from it (in the
  /// destination's order) into one contiguous staging buffer; grouped ncclSend/ncclRecv; each destination
  /// unpacks in its incoming order (self segments straight from its own buffers), so sums keep member order.
  void nccl_batch(const PlanStep& step) {
    std::map<std::pair<int64_t, int64_t>, float*> send_stage, recv_stage;  // (src, dst) → staging
    auto alloc_stage = [&](int64_t rank, int64_t n) {
      use_device(rank);
      void* raw = nullptr;
      HCPSIM_CUDA_CHECK(cudaMallocAsync(&raw, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float),
                                        stream(rank, Stream::comm)));
      return static_cast<float*>(raw);
    };
    // Pack on the senders.
    for (const CommItem& dst : step.items) {
      for (int64_t src : dst.sources) {
        const int64_t n = packed_elements(dst, src);
        if (mine(dst.op.rank)) recv_stage[{src, dst.op.rank}] = alloc_stage(dst.op.rank, n);
        if (!mine(src)) continue;
        float* stage = alloc_stage(src, n);
        send_stage[{src, dst.op.rank}] = stage;
        int64_t offset = 0;
        for (const CopySegment& seg : dst.incoming) {
          if (seg.src_rank != src) continue;
          DeviceSegment d = resolve(seg, true, false);
          d.dst = stage + offset;
          d.dst_offset = 0;
          d.dst_row_stride = seg.run_elements;
          d.dst_batch_stride = seg.rows * seg.run_elements;
          d.accumulate = false;
          launch_copy_segment(d, acc_format_, stream(src, Stream::comm));
          offset += seg.elements();
        }
      }
    }
    HCPSIM_NCCL_CHECK(ncclGroupStart());
    for (const CommItem& dst : step.items) {
      for (int64_t src : dst.sources) {
        const auto n = static_cast<size_t>(packed_elements(dst, src));
        if (mine(src))
          HCPSIM_NCCL_CHECK(ncclSend(send_stage.at({src, dst.op.rank}), n, ncclFloat, static_cast<int>(dst.op.rank),
                                     comms_[static_cast<size_t>(src)], stream(src, Stream::comm)));
        if (mine(dst.op.rank))
          HCPSIM_NCCL_CHECK(ncclRecv(recv_stage.at({src, dst.op.rank}), n, ncclFloat, static_cast<int>(src),
                                     comms_[static_cast<size_t>(dst.op.rank)], stream(dst.op.rank, Stream::comm)));
      }
    }
    HCPSIM_NCCL_CHECK(ncclGroupEnd());
    // Unpack on the destinations.
    for (const CommItem& dst : step.items) {
      if (!mine(dst.op.rank)) continue;
      use_device(dst.op.rank);
      cudaStream_t st = stream(dst.op.rank, Stream::comm);
      std::map<int64_t, int64_t> offset;
      for (const CopySegment& seg : dst.incoming) {
        DeviceSegment d = resolve(seg, seg.src_rank == dst.op.rank, true);
        if (seg.src_rank != dst.op.rank) {
          d.src = recv_stage.at({seg.src_rank, dst.op.rank}) + offset[seg.src_rank];
          d.src_offset = 0;
          d.src_row_stride = seg.run_elements;
          d.src_batch_stride = seg.rows * seg.run_elements;
          offset[seg.src_rank] += seg.elements();
        }
        launch_copy_segment(d, acc_format_, st);
      }
    }
    for (const auto& [key, p] : send_stage) {
      use_device(key.first);
      HCPSIM_CUDA_CHECK(cudaFreeAsync(p, stream(key.first, Stream::comm)));
    }
    for (const auto& [key, p] : recv_stage) {
      use_device(key.second);
      HCPSIM_CUDA_CHECK(cudaFreeAsync(p, stream(key.second, Stream::comm)));
    }
  }

  std::vector<std::vector<float>> local_outputs() {
    const RankProgram& prog = s_.ranks[static_cast<size_t>(opt_.process_rank)];
    use_device(opt_.process_rank);
    std::vector<std::vector<float>> out;
    for (const IoBinding& bind : prog.outputs) {
      const BufferDecl& d = prog.buffers[static_cast<size_t>(bind.buffer)];
      out.emplace_back(static_cast<size_t>(d.elements()));
      HCPSIM_CUDA_CHECK(cudaMemcpy(out.back().data(), live(opt_.process_rank, bind.buffer),
                                   out.back().size() * sizeof(float), cudaMemcpyDeviceToHost));
    }
    return out;
  }

  AttentionOutputs gather_outputs() {
    OutputGatherer gather(s_.shape);
    for (size_t r = 0; r < s_.ranks.size(); ++r) {
      const RankProgram& prog = s_.ranks[r];
      use_device(static_cast<int64_t>(r));
      for (const IoBinding& bind : prog.outputs) {
        const BufferDecl& d = prog.buffers[static_cast<size_t>(bind.buffer)];
        std::vector<float> host(static_cast<size_t>(d.elements()));
        HCPSIM_CUDA_CHECK(cudaMemcpy(host.data(), live(static_cast<int64_t>(r), bind.buffer),
                                     host.size() * sizeof(float), cudaMemcpyDeviceToHost));
        gather.add(prog, bind, host.data());
      }
    }
    return gather.finish(opt_.dtype);
  }

  std::vector<MeasuredOp> measure() {
    std::vector<MeasuredOp> timeline;
    for (size_t r = 0; r < s_.ranks.size(); ++r) {
      const RankProgram& prog = s_.ranks[r];
      if (!mine(static_cast<int64_t>(r))) continue;
      use_device(static_cast<int64_t>(r));
      cudaEvent_t t0 = t0_.at(device_of_[r]);
      for (size_t i = 0; i < prog.ops.size(); ++i) {
        const Op& op = prog.ops[i];
        MeasuredOp m;
        m.cp_rank = prog.cp_rank;
        m.op_index = static_cast<OpIndex>(i);
        m.kind = op.kind();
        m.phase = op.phase;
        m.stream = op.stream;
        m.ring_step = op.ring_step;
        m.label = op.label;
        m.device = device_of_[r];
        m.flops = op.flops;
        m.bytes = op.bytes;
        float start_ms = 0, end_ms = 0;
        HCPSIM_CUDA_CHECK(cudaEventElapsedTime(&start_ms, t0, start_[r][i]));
        HCPSIM_CUDA_CHECK(cudaEventElapsedTime(&end_ms, t0, end_[r][i]));
        m.start_s = static_cast<double>(start_ms) * 1e-3;
        m.end_s = std::max(m.start_s, static_cast<double>(end_ms) * 1e-3);
        const auto it = kernel_.find(OpRef{static_cast<int64_t>(r), static_cast<OpIndex>(i)});
        if (it != kernel_.end()) m.kernel = it->second;
        if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
          m.head_dim = prog.buffers[static_cast<size_t>(f->q)].width;
          m.q_rows = f->q_rows.count;
          m.kv_rows = f->kv_rows.count;
          m.causal = f->mask != BlockMask::none;
        } else if (const auto* b = std::get_if<AttnBwdBlockOp>(&op.payload)) {
          m.head_dim = prog.buffers[static_cast<size_t>(b->q)].width;
          m.q_rows = b->q_rows.count;
          m.kv_rows = b->kv_rows.count;
          m.causal = b->mask != BlockMask::none;
        }
        timeline.push_back(std::move(m));
      }
    }
    return timeline;
  }

  const Schedule& s_;
  const ExecutionPlan& plan_;
  DeviceRunOptions opt_;
  float scale_ = 0;
  RoundFormat format_ = RoundFormat::fp32;
  RoundFormat acc_format_ = RoundFormat::fp32;
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

int usable_device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw DeviceError(std::string("no usable CUDA device: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err) +
                      "; run on a host with an NVIDIA GPU and driver, or use --backend cpu");
  }
  if (count == 0) throw DeviceError("no usable CUDA device: cudaGetDeviceCount returned 0; use --backend cpu");
  return count;
}

}  // namespace

DeviceRunResult run_schedule_on_device(const Schedule& schedule, const AttentionInputs& inputs,
                                       const DeviceRunOptions& options) {
  check_gpu_dtype(options.dtype);
  const auto nranks = static_cast<int64_t>(schedule.ranks.size());
  if (options.devices < 1)
    throw InputError(SourceLoc{}, "--devices", "must be at least 1", "use --devices 1 (one GPU for all ranks)");
  if (options.devices >= 2 && options.devices != nranks)
    throw InputError(SourceLoc{}, "--devices",
                     fmt::format("{} devices for {} CP ranks: NCCL puts one rank on each GPU", options.devices, nranks),
                     fmt::format("use --devices {} (one GPU per CP rank) or --devices 1 (all ranks on one GPU)",
                                 nranks));
  if (options.process_rank >= 0 && (options.devices < 2 || options.process_rank >= nranks))
    throw InputError(SourceLoc{}, "--devices",
                     fmt::format("process rank {} of {} CP ranks needs the NCCL backend (devices = CP ranks)",
                                 options.process_rank, nranks),
                     "launch one process per CP rank with the MPI launcher (hcpsim_mpi_verify)");
  const ExecutionPlan plan = build_execution_plan(schedule);  // InputError before touching the device
  const int count = usable_device_count();
  const int needed = options.devices >= 2 && options.process_rank < 0 ? options.devices : options.device_index + 1;
  if (count < needed)
    throw DeviceError(fmt::format("{} CUDA device(s) visible, the run needs {}; use --devices 1", count, needed));
  // Memory bound per device.
  std::map<int, int64_t> bound;
  for (int64_t r = 0; r < nranks; ++r) {
    if (options.process_rank >= 0 && r != options.process_rank) continue;
    const int d = options.devices >= 2 && options.process_rank < 0 ? static_cast<int>(r) : options.device_index;
    bound[d] += planned_peak_bytes(schedule.ranks[static_cast<size_t>(r)]);
  }
  int64_t peak = 0;
  for (const auto& [d, bytes] : bound) {
    HCPSIM_CUDA_CHECK(cudaSetDevice(d));
    size_t free_bytes = 0, total_bytes = 0;
    HCPSIM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    peak = std::max(peak, bytes);
    if (bytes > static_cast<int64_t>(free_bytes))
      throw DeviceError(fmt::format("the schedule needs up to {:.2f} GiB on GPU {} but {:.2f} GiB are free; reduce "
                                    "model.seq_length, check a head subset (oracle.heads) or use more --devices",
                                    static_cast<double>(bytes) / 1073741824.0, d,
                                    static_cast<double>(free_bytes) / 1073741824.0));
  }
  DeviceRun run(schedule, plan, options);
  DeviceRunResult result = run.run(inputs);
  result.planned_peak_bytes = peak;
  return result;
}

NcclRingCheck nccl_one_rank_ring_step(int device, int64_t elements) {
  NcclRingCheck check;
  check.elements = elements;
  HCPSIM_NCCL_CHECK(ncclGetVersion(&check.nccl_version));
  const int count = usable_device_count();
  if (device < 0 || device >= count)
    throw DeviceError(fmt::format("device {} does not exist ({} visible)", device, count));
  HCPSIM_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  cudaStream_t st = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  auto release = [&] {
    if (send != nullptr) cudaFree(send);
    if (recv != nullptr) cudaFree(recv);
    if (st != nullptr) cudaStreamDestroy(st);
    if (comm != nullptr) ncclCommDestroy(comm);
  };
  try {
    int list[1] = {device};
    HCPSIM_NCCL_CHECK(ncclCommInitAll(&comm, 1, list));
    HCPSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const auto bytes = static_cast<size_t>(elements) * sizeof(float);
    HCPSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&send), bytes));
    HCPSIM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&recv), bytes));
    std::vector<float> host(static_cast<size_t>(elements));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 4093) * 0.25f - 511.0f;  // exact values
    HCPSIM_CUDA_CHECK(cudaMemcpy(send, host.data(), bytes, cudaMemcpyHostToDevice));
    HCPSIM_CUDA_CHECK(cudaMemset(recv, 0xFF, bytes));  // NaN pattern: an element not received stays NaN
    // One ring step of a P = 1 ring: send to the next rank (self) and receive from the previous (self), grouped.
    HCPSIM_NCCL_CHECK(ncclGroupStart());
    HCPSIM_NCCL_CHECK(ncclSend(send, static_cast<size_t>(elements), ncclFloat, 0, comm, st));
    HCPSIM_NCCL_CHECK(ncclRecv(recv, static_cast<size_t>(elements), ncclFloat, 0, comm, st));
    HCPSIM_NCCL_CHECK(ncclGroupEnd());
    HCPSIM_CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<float> got(host.size());
    HCPSIM_CUDA_CHECK(cudaMemcpy(got.data(), recv, bytes, cudaMemcpyDeviceToHost));
    double err = 0;
    bool finite = true;
    for (size_t i = 0; i < host.size(); ++i) {
      if (!std::isfinite(got[i])) finite = false;
      err = std::max(err, std::fabs(static_cast<double>(got[i]) - static_cast<double>(host[i])));
    }
    check.max_abs_err = finite ? err : INFINITY;
    check.ok = finite && err == 0;
    check.text = fmt::format("NCCL {} one-rank ring step: {} floats, max |recv − send| = {}", check.nccl_version,
                             elements, check.max_abs_err);
  } catch (...) {
    release();
    throw;
  }
  release();
  return check;
}

}  // namespace hcpsim::gpu
