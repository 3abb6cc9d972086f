// The buffers of a device run (device_run.hpp): stream-ordered allocation, the inputs loaded through each rank's
// compute stream, the outputs copied back, and CopySegments resolved to the live buffers' device addresses.

#include <algorithm>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "device_run.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/host_replay.hpp"

namespace hcpsim::gpu::detail {

float* DeviceRun::allocate(int64_t rank, BufferId id, cudaStream_t st) {
  const BufferDecl& d = s_.ranks[static_cast<size_t>(rank)].buffers[static_cast<size_t>(id)];
  float*& p = ptr_[static_cast<size_t>(rank)][static_cast<size_t>(id)];
  HCPSIM_ASSERT(p == nullptr, fmt::format("cp_rank {}: buffer '{}' allocated while live", rank, d.name));
  const auto bytes = static_cast<size_t>(std::max<int64_t>(d.elements(), 1)) * sizeof(float);
  void* raw = nullptr;
  HCPSIM_CUDA_CHECK(cudaMallocAsync(&raw, bytes, st));
  p = static_cast<float*>(raw);
  return p;
}

float* DeviceRun::live(int64_t rank, BufferId id) {
  float* p = ptr_[static_cast<size_t>(rank)][static_cast<size_t>(id)];
  HCPSIM_ASSERT(p != nullptr, fmt::format("cp_rank {}: buffer '{}' used while not live", rank,
                                          s_.ranks[static_cast<size_t>(rank)].buffers[static_cast<size_t>(id)].name));
  return p;
}

void DeviceRun::load_inputs(const AttentionInputs& inputs) {
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

DeviceSegment DeviceRun::resolve(const CopySegment& c, bool with_src, bool with_dst) {
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

std::vector<std::vector<float>> DeviceRun::local_outputs() {
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

AttentionOutputs DeviceRun::gather_outputs() {
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

}  // namespace hcpsim::gpu::detail
