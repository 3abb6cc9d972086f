#include <map>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/schedule_builder.hpp"

using namespace hcpsim;

namespace {

AttentionShape small_shape(int64_t S, int64_t H, int64_t Hkv, int64_t dk, int64_t dv, bool causal, int64_t b = 1) {
  AttentionShape sh;
  sh.batch = b;
  sh.seq_length = S;
  sh.heads_q = H;
  sh.heads_kv = Hkv;
  sh.head_dim_qk = dk;
  sh.head_dim_v = dv;
  sh.causal = causal;
  sh.softmax_scale = 0.125;
  sh.dtype = Dtype::bf16;
  return sh;
}

struct MessageLog {
  // per rank, per phase: list of send sizes in op order
  std::vector<std::vector<int64_t>> fwd, bwd;
  std::vector<std::vector<int64_t>> a2a_fwd, a2a_bwd;
};

MessageLog messages(const Schedule& s) {
  MessageLog log;
  for (const auto& r : s.ranks) {
    log.fwd.emplace_back();
    log.bwd.emplace_back();
    log.a2a_fwd.emplace_back();
    log.a2a_bwd.emplace_back();
    for (const auto& op : r.ops) {
      if (op.kind() == OpKind::send_recv) (op.phase == Phase::forward ? log.fwd : log.bwd).back().push_back(op.bytes);
      if (op.kind() == OpKind::all_to_all)
        (op.phase == Phase::forward ? log.a2a_fwd : log.a2a_bwd).back().push_back(op.bytes);
    }
  }
  return log;
}

}  // namespace

TEST_CASE("core: message counts and sizes per docs/algorithm.md §7", "[core][schedule]") {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{2, 2}, {1, 4}, {4, 1}, {2, 3}, {3, 2}, {4, 2}, {2, 4}, {8, 2}};
  for (auto [A, P] : shapes) {
    const int64_t S = 2 * A * P * 4, b = 2, H = 2 * A, Hkv = A, dk = 16, dv = 8, e = 2;  // bf16
    const auto sched = build_schedule(test::comm_type_for(A, P), CpLayout(A, P, S), small_shape(S, H, Hkv, dk, dv, true, b));
    const auto log = messages(sched);
    const int64_t kv = b * (S / P) * (Hkv / A) * (dk + dv) * e;  // one KV ring message
    const int64_t s_f = S / (A * P);
    INFO("A=" << A << " P=" << P);
    for (int64_t g = 0; g < A * P; ++g) {
      const auto gu = static_cast<size_t>(g);
      // Forward: P-1 KV messages.
      REQUIRE(log.fwd[gu].size() == static_cast<size_t>(P - 1));
      for (int64_t bytes : log.fwd[gu]) REQUIRE(bytes == kv);
      // Backward: P messages for P >= 2: KV, (P-2) x (KV + dKV), dKV (same size as KV).
      if (P >= 2) {
        REQUIRE(log.bwd[gu].size() == static_cast<size_t>(P));
        REQUIRE(log.bwd[gu].front() == kv);
        REQUIRE(log.bwd[gu].back() == kv);
        for (size_t i = 1; i + 1 < log.bwd[gu].size(); ++i) REQUIRE(log.bwd[gu][i] == 2 * kv);
      } else {
        REQUIRE(log.bwd[gu].empty());
      }
      // a2a payloads (whole local tensor; (A-1)/A of it leaves the rank).
      if (A > 1) {
        REQUIRE(log.a2a_fwd[gu] == std::vector<int64_t>{b * s_f * H * dk * e, b * s_f * Hkv * dk * e,
                                                        b * s_f * Hkv * dv * e, b * (S / P) * (H / A) * dv * e});
        REQUIRE(log.a2a_bwd[gu] == std::vector<int64_t>{b * s_f * H * dv * e, b * (S / P) * (H / A) * dk * e,
                                                        b * (S / P) * (Hkv / A) * dk * e,
                                                        b * (S / P) * (Hkv / A) * dv * e});
      } else {
        REQUIRE(log.a2a_fwd[gu].empty());
        REQUIRE(log.a2a_bwd[gu].empty());
      }
    }
  }
}

TEST_CASE("core: FLOPs over all ranks equal exactly one attention over the sequence", "[core][schedule]") {
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 1}, {2, 2}, {1, 4}, {4, 1}, {2, 3}, {3, 2}, {8, 2}};
  for (auto [A, P] : shapes) {
    for (bool causal : {true, false}) {
      const int64_t S = 2 * A * P * 5, b = 3, H = 2 * A, Hkv = A, dk = 16, dv = 8;
      const auto sched = build_schedule(test::comm_type_for(A, P), CpLayout(A, P, S), small_shape(S, H, Hkv, dk, dv, causal, b));
      // causal: S(S+1)/2 pairs per (batch, head); no mask: S^2.
      const double pairs = causal ? static_cast<double>(S * (S + 1) / 2) : static_cast<double>(S * S);
      INFO("A=" << A << " P=" << P << " causal=" << causal);
      REQUIRE(sched.total_flops(Phase::forward) == pairs * static_cast<double>(b * H) * 2.0 * (dk + dv));
      REQUIRE(sched.total_flops(Phase::backward) == pairs * static_cast<double>(b * H) * 2.0 * (3 * dk + 2 * dv));
    }
  }
}

TEST_CASE("core: all_gather FLOPs equal exactly one attention; it gathers K/V twice and reduce-scatters dK/dV",
          "[core][schedule]") {
  for (int64_t cp : {1, 2, 3, 4, 8}) {
    for (bool causal : {true, false}) {
      const int64_t S = 2 * cp * 5, b = 2, H = 4, Hkv = 2, dk = 16, dv = 8;
      const auto sched =
          build_schedule(CpCommType::all_gather, CpLayout(1, cp, S), small_shape(S, H, Hkv, dk, dv, causal, b));
      test::check_schedule(sched);
      // causal: S(S+1)/2 pairs per (batch, head): chunk j's row r sees j·c + r + 1 keys (bottom-right).
      const double pairs = causal ? static_cast<double>(S * (S + 1) / 2) : static_cast<double>(S * S);
      INFO("cp=" << cp << " causal=" << causal);
      REQUIRE(sched.total_flops(Phase::forward) == pairs * static_cast<double>(b * H) * 2.0 * (dk + dv));
      REQUIRE(sched.total_flops(Phase::backward) == pairs * static_cast<double>(b * H) * 2.0 * (3 * dk + 2 * dv));
      for (const auto& r : sched.ranks) {
        int gathers = 0, scatters = 0, sends = 0;
        for (const auto& op : r.ops) {
          gathers += op.kind() == OpKind::all_gather;
          scatters += op.kind() == OpKind::reduce_scatter;
          sends += op.kind() == OpKind::send_recv;
        }
        REQUIRE(gathers == 4);   // k, v in the forward and again in the backward (TE re-gathers)
        REQUIRE(scatters == 2);  // dk, dv
        REQUIRE(sends == 0);
      }
    }
  }
}

TEST_CASE("core: forward ring sections and peers follow docs/algorithm.md §4.2 example B", "[core][schedule]") {
  // Pure p2p CP=4, S=16: rank r step i holds KV of (r-i) mod 4; diag at 0, lower if i <= r, else upper.
  const auto sched = build_schedule(CpCommType::p2p, CpLayout(1, 4, 16), small_shape(16, 2, 1, 4, 4, true));
  const char* want[4][4] = {{"diagonal", "upper", "upper", "upper"},
                            {"diagonal", "lower", "upper", "upper"},
                            {"diagonal", "lower", "lower", "upper"},
                            {"diagonal", "lower", "lower", "lower"}};
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<std::string> secs;
    int64_t pairs = 0;
    for (const auto& op : sched.ranks[static_cast<size_t>(r)].ops) {
      if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
        secs.push_back(to_string(f->section));
        pairs += semantics::block_pairs(f->q_rows.count, f->kv_rows.count, f->mask);
      }
      if (const auto* m = std::get_if<SendRecvOp>(&op.payload); m && op.phase == Phase::forward) {
        REQUIRE(m->send_peer == (r + 1) % 4);
        REQUIRE(m->recv_peer == (r + 3) % 4);
      }
      if (const auto* m = std::get_if<SendRecvOp>(&op.payload); m && op.phase == Phase::backward) {
        REQUIRE(m->send_peer == (r + 3) % 4);
        REQUIRE(m->recv_peer == (r + 1) % 4);
      }
    }
    REQUIRE(secs == std::vector<std::string>{want[r][0], want[r][1], want[r][2], want[r][3]});
    REQUIRE(pairs == 34);  // 10 + 3·8 per rank (§4.2)
  }
}

TEST_CASE("core: backward copy/add rules equal the worked example of §5.1 for [2,2]", "[core][schedule]") {
  // CP=4 [2,2], S=16, C=4. Collect, per cp rank, the (dst buffer, rows, op) of every backward copy.
  const auto sched = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 16), small_shape(16, 4, 2, 4, 4, true));
  auto rules = [&](int64_t g) {
    std::vector<std::string> out;
    const auto& r = sched.ranks[static_cast<size_t>(g)];
    for (const auto& op : r.ops) {
      const auto* c = std::get_if<CopyOp>(&op.payload);
      if (!c || op.phase != Phase::backward || op.ring_step < 0) continue;
      out.push_back(std::to_string(op.ring_step) + " " + r.buffers[static_cast<size_t>(c->dst)].name + "[" +
                    std::to_string(c->dst_rows.begin) + "," + std::to_string(c->dst_rows.end()) + ")" +
                    (c->accumulate ? "+=" : "=") + r.buffers[static_cast<size_t>(c->src)].name + "[" +
                    std::to_string(c->src_rows.begin) + "," + std::to_string(c->src_rows.end()) + ")");
    }
    return out;
  };
  // p2p rank 0 (cp rank 0): step 0 upper: dq[h1] = dq_, dk = dk_ (full); step 1 diagonal:
  // dq[h0] = dq_[h0], dq[h1] += dq_[h1]; dk[h0] += dk_[h0], dk[h1] = dk_[h1].
  REQUIRE(rules(0) == std::vector<std::string>{
                          "0 dq.a2a[4,8)=dq_step0[0,4)", "0 bwd_ring1.dk[0,8)=dk_step0[0,8)",
                          "0 bwd_ring1.dv[0,8)=dv_step0[0,8)", "1 dq.a2a[0,4)=dq_step1[0,4)",
                          "1 dq.a2a[4,8)+=dq_step1[4,8)", "1 bwd_ring0.dk[0,4)+=dk_step1[0,4)",
                          "1 bwd_ring0.dk[4,8)=dk_step1[4,8)", "1 bwd_ring0.dv[0,4)+=dv_step1[0,4)",
                          "1 bwd_ring0.dv[4,8)=dv_step1[4,8)"});
  // p2p rank 1 (cp rank 2): step 0 lower: dq = dq_, dk[h0] = dk_; step 1 diagonal: dq += dq_, dk += dk_.
  REQUIRE(rules(2) == std::vector<std::string>{
                          "0 dq.a2a[0,8)=dq_step0[0,8)", "0 bwd_ring1.dk[0,4)=dk_step0[0,4)",
                          "0 bwd_ring1.dv[0,4)=dv_step0[0,4)", "1 dq.a2a[0,8)+=dq_step1[0,8)",
                          "1 bwd_ring0.dk[0,8)+=dk_step1[0,8)", "1 bwd_ring0.dv[0,8)+=dv_step1[0,8)"});
  // Output bindings: dk/dv of the own origin land in bwd_ring0 after P=2 steps, then the a2a gathers them.
  const auto& r0 = sched.ranks[0];
  REQUIRE(r0.outputs.size() == 5);
  REQUIRE(r0.outputs[1].tensor == "softmax_lse");
  REQUIRE(r0.outputs[1].tokens == std::vector<int64_t>{0, 1, 2, 3, 12, 13, 14, 15});
  REQUIRE(r0.outputs[1].head_begin == 0);
  REQUIRE(sched.ranks[1].outputs[1].head_begin == 2);  // a2a rank 1 holds query heads {2, 3}
}

TEST_CASE("core: every schedule passes check_invariants and check_hazards and frees what it allocates", "[core][schedule]") {
  for (auto [A, P] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 2}, {3, 2}, {2, 3}, {1, 5}, {4, 1}}) {
    for (bool causal : {true, false}) {
      const int64_t S = 2 * A * P * 2;
      const auto sched = build_schedule(test::comm_type_for(A, P), CpLayout(A, P, S), small_shape(S, 2 * A, A, 8, 8, causal));
      test::check_schedule(sched);  // aborts on violation
      for (const auto& r : sched.ranks) {
        std::map<BufferId, int> live;
        for (const auto& in : r.inputs) live[in.buffer] = 1;
        for (const auto& op : r.ops) {
          if (const auto* a = std::get_if<AllocOp>(&op.payload)) live[a->buffer] += 1;
          if (const auto* f = std::get_if<FreeOp>(&op.payload)) live[f->buffer] -= 1;
        }
        // Live at the end: the 4 inputs and the 5 outputs, nothing else.
        int64_t n_live = 0;
        for (auto& [id, n] : live) n_live += n;
        INFO("A=" << A << " P=" << P << " rank " << r.cp_rank);
        REQUIRE(n_live == 9);
      }
    }
  }
}
