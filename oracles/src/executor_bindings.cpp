// The CPU executor's I/O bindings: global inputs into rank buffers, rank buffers into global outputs.

#include "executor_bindings.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/precision.hpp"

namespace hcpsim::cpu_exec {

namespace {

/// The global tensor named by a binding, with its shape.
struct GlobalTensor {
  const char* name;
  HostTensor* tensor;
};

void check_binding(const RankState& st, const IoBinding& bind, const HostTensor& global, const HostTensor& buf) {
  const std::string where = fmt::format("cp_rank {} binding '{}' -> buffer '{}'", st.program->cp_rank, bind.tensor,
                                        st.program->buffers[static_cast<size_t>(bind.buffer)].name);
  HCPSIM_ASSERT(buf.batch() == global.batch(), where + ": batch differs from the global tensor");
  HCPSIM_ASSERT(buf.width() == global.width(), where + ": width differs from the global tensor");
  HCPSIM_ASSERT(static_cast<int64_t>(bind.tokens.size()) == buf.rows(), where + ": tokens.size() != buffer rows");
  HCPSIM_ASSERT(bind.head_begin >= 0, where + ": negative head_begin");
  HCPSIM_ASSERT(bind.head_begin + buf.heads() <= global.heads(), where + ": heads outside the global tensor");
  for (int64_t token : bind.tokens) {
    HCPSIM_ASSERT(token >= 0 && token < global.rows(), where + ": token outside the sequence");
  }
}

/// Copies one output binding of `st` into `target`, counting every row-vector written in `writes` (indexed
/// (b·S + token)·heads + head); HCPSIM_ASSERT on a second write.
void gather_binding(RankState& st, const IoBinding& bind, const GlobalTensor& target, std::vector<uint8_t>& writes) {
  HostTensor& global = *target.tensor;
  const HostTensor& buf = live_buffer(st, bind.buffer, "output binding");
  check_binding(st, bind, global, buf);
  for (int64_t b = 0; b < buf.batch(); ++b) {
    for (int64_t row = 0; row < buf.rows(); ++row) {
      const int64_t token = bind.tokens[static_cast<size_t>(row)];
      for (int64_t hh = 0; hh < buf.heads(); ++hh) {
        const int64_t head = bind.head_begin + hh;
        uint8_t& count = writes[static_cast<size_t>((b * global.rows() + token) * global.heads() + head)];
        HCPSIM_ASSERT(count == 0, fmt::format("execute_schedule: global {}[b={}, token={}, head={}] written "
                                              "twice (second time by cp_rank {})",
                                              bind.tensor, b, token, head, st.program->cp_rank));
        count = 1;
        const double* src = buf.data() + buf.index(b, row, hh, 0);
        std::copy(src, src + buf.width(), global.data() + global.index(b, token, head, 0));
      }
    }
  }
}

}  // namespace

void load_inputs(ExecutorState& state, const AttentionInputs& in) {
  for (RankState& st : state.ranks) {
    for (const IoBinding& bind : st.program->inputs) {
      const HostTensor* global = nullptr;
      if (bind.tensor == "q") global = &in.q;
      if (bind.tensor == "k") global = &in.k;
      if (bind.tensor == "v") global = &in.v;
      if (bind.tensor == "dout") global = &in.dout;
      HCPSIM_ASSERT(global != nullptr, fmt::format("cp_rank {}: unknown input tensor '{}'", st.program->cp_rank,
                                                   bind.tensor));
      HostTensor& buf = allocate(state, st, bind.buffer, "input binding");
      check_binding(st, bind, *global, buf);
      for (int64_t b = 0; b < buf.batch(); ++b) {
        for (int64_t r = 0; r < buf.rows(); ++r) {
          const int64_t token = bind.tokens[static_cast<size_t>(r)];
          for (int64_t hh = 0; hh < buf.heads(); ++hh) {
            const double* src = global->data() + global->index(b, token, bind.head_begin + hh, 0);
            std::copy(src, src + buf.width(), buf.data() + buf.index(b, r, hh, 0));
          }
        }
      }
      round_tensor(buf, state.dtype);
    }
  }
}

AttentionOutputs gather_outputs(ExecutorState& state) {
  const AttentionShape& sh = state.schedule.shape;
  AttentionOutputs r;
  r.out = HostTensor(sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_v, kNaN);
  r.softmax_lse = HostTensor(sh.batch, sh.seq_length, sh.heads_q, 1, kNaN);
  r.dq = HostTensor(sh.batch, sh.seq_length, sh.heads_q, sh.head_dim_qk, kNaN);
  r.dk = HostTensor(sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_qk, kNaN);
  r.dv = HostTensor(sh.batch, sh.seq_length, sh.heads_kv, sh.head_dim_v, kNaN);
  const GlobalTensor globals[] = {
      {"out", &r.out}, {"softmax_lse", &r.softmax_lse}, {"dq", &r.dq}, {"dk", &r.dk}, {"dv", &r.dv}};
  // writes[t][(b·S + token)·heads + head]: how often that global row-vector was written
  std::vector<std::vector<uint8_t>> writes;
  for (const GlobalTensor& g : globals) {
    writes.emplace_back(static_cast<size_t>(g.tensor->batch() * g.tensor->rows() * g.tensor->heads()), 0);
  }
  for (RankState& st : state.ranks) {
    for (const IoBinding& bind : st.program->outputs) {
      size_t t = 0;
      while (t < std::size(globals) && bind.tensor != globals[t].name) ++t;
      HCPSIM_ASSERT(t < std::size(globals), fmt::format("cp_rank {}: unknown output tensor '{}'",
                                                        st.program->cp_rank, bind.tensor));
      gather_binding(st, bind, globals[t], writes[t]);
    }
  }
  for (size_t t = 0; t < std::size(globals); ++t) {
    // The returned tensors are in the run's dtype (softmax_lse fp32), whatever the accumulators were.
    round_tensor(*globals[t].tensor, t == 1 && state.dtype != Dtype::fp64 ? Dtype::fp32 : state.dtype);
    const auto it = std::find(writes[t].begin(), writes[t].end(), uint8_t{0});
    if (it == writes[t].end()) continue;
    const auto flat = static_cast<int64_t>(it - writes[t].begin());
    const HostTensor& g = *globals[t].tensor;
    HCPSIM_ASSERT(false, fmt::format("execute_schedule: global {}[b={}, token={}, head={}] is written by no rank",
                                     globals[t].name, flat / (g.rows() * g.heads()), (flat / g.heads()) % g.rows(),
                                     flat % g.heads()));
  }
  return r;
}

}  // namespace hcpsim::cpu_exec
