#pragma once
// Helpers for the sim tests: a cluster with round numbers (so hand-derived times are exact in ps) and a small
// builder for hand-written schedules.

#include <string>
#include <utility>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/schedule.hpp"

namespace hcpsim::sim::test {

// A made-up cluster whose rates are powers of ten, so that every duration below is an exact number of ps:
//   attention: 1e15 flop/s peak, forward efficiency 0.5 (5e14 flop/s), backward 0.25; HBM 1e12 B/s
//   NVLink 1e11 B/s and 1 µs; network 2.5e10 B/s and 4 µs; per-message software latency 5 µs.
inline ClusterSpec round_cluster(int64_t nodes, int64_t gpus_per_node) {
  ClusterSpec c;
  c.preset = "";
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.gpu = GpuSpec{"round-gpu", 1e15, 80e9, 1e12, 0.5, 0.25};
  c.nvlink = LinkSpec{1e11, 1e-6};
  c.network = LinkSpec{2.5e10, 4e-6};
  c.message_latency_s = 5e-6;
  return c;
}

// Appends buffers and ops to one rank's program of a hand-written schedule.
class ProgramWriter {
 public:
  explicit ProgramWriter(RankProgram& program) : program_(program) {}

  // A bf16 buffer [1, rows, heads, width]; 2·rows·heads·width bytes.
  BufferId declare(const std::string& name, int64_t rows, int64_t heads, int64_t width) {
    program_.buffers.push_back(BufferDecl{name, 1, rows, heads, width, Dtype::bf16});
    return static_cast<BufferId>(program_.buffers.size() - 1);
  }
  // A buffer that is a rank input (live from t = 0).
  BufferId input(const std::string& name, int64_t rows, int64_t heads, int64_t width) {
    const BufferId id = declare(name, rows, heads, width);
    std::vector<int64_t> tokens;
    for (int64_t r = 0; r < rows; ++r) tokens.push_back(r);
    program_.inputs.push_back(IoBinding{name, id, tokens, 0});
    return id;
  }
  OpIndex add(OpPayload payload, Stream stream, std::vector<OpIndex> deps, const std::string& label,
              Phase phase = Phase::forward, double flops = 0, int64_t bytes = 0) {
    Op op;
    op.payload = std::move(payload);
    op.phase = phase;
    op.stream = stream;
    op.deps = std::move(deps);
    op.label = label;
    op.flops = flops;
    op.bytes = bytes;
    program_.ops.push_back(std::move(op));
    return static_cast<OpIndex>(program_.ops.size() - 1);
  }
  OpIndex alloc(BufferId id, Stream stream = Stream::compute, Phase phase = Phase::forward) {
    return add(AllocOp{id}, stream, {}, "alloc " + program_.buffers[static_cast<size_t>(id)].name, phase);
  }
  OpIndex free(BufferId id, Stream stream = Stream::compute, Phase phase = Phase::forward) {
    return add(FreeOp{id}, stream, {}, "free " + program_.buffers[static_cast<size_t>(id)].name, phase);
  }
  // An elementwise copy of all rows of src into dst with an explicit Op::bytes.
  OpIndex copy(BufferId dst, BufferId src, int64_t bytes, Stream stream, std::vector<OpIndex> deps,
               const std::string& label, Phase phase = Phase::forward) {
    const int64_t rows = program_.buffers[static_cast<size_t>(src)].rows;
    return add(CopyOp{dst, src, {0, rows}, {0, rows}, false}, stream, std::move(deps), label, phase, 0, bytes);
  }

 private:
  RankProgram& program_;
};

// An empty schedule of A·P ranks with a tiny shape (the shape only supplies the element type here).
inline Schedule empty_schedule(int64_t a2a_size, int64_t p2p_size) {
  Schedule s;
  s.cp_comm_type = CpCommType::a2a_p2p;
  s.a2a_size = a2a_size;
  s.p2p_size = p2p_size;
  s.shape.dtype = Dtype::bf16;
  s.ranks.resize(static_cast<size_t>(a2a_size * p2p_size));
  for (size_t r = 0; r < s.ranks.size(); ++r) s.ranks[r].rank = s.ranks[r].cp_rank = static_cast<int64_t>(r);
  return s;
}

/// The small causal GQA attention of the trace tests: B = 1, S = seq_length, Hq = 4, Hkv = 2, d = 16, bf16.
inline AttentionShape small_attention_shape(int64_t seq_length) {
  AttentionShape sh;
  sh.batch = 1;
  sh.seq_length = seq_length;
  sh.heads_q = 4;
  sh.heads_kv = 2;
  sh.head_dim_qk = 16;
  sh.head_dim_v = 16;
  sh.causal = true;
  sh.softmax_scale = 0.25;
  sh.dtype = Dtype::bf16;
  return sh;
}

}  // namespace hcpsim::sim::test
