// Packed sequences (THD) in the CPU oracle: p2p, a2a and a2a+p2p schedules over padded packings verified against
// the fp64 reference, padding rows exactly empty, the packed-sequence faults caught, and the blockwise
// document-masked kernels against a naive per-pair implementation.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/oracles/block_attention.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/verify.hpp"

using namespace hcpsim;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// A THD shape for [A, P]: the lengths padded to multiples of 2·A·P (pad_between_seqs), batch 1, dk 8, dv 6.
AttentionShape thd_shape(const std::vector<int64_t>& lengths, int64_t A, int64_t P, bool causal, bool gqa) {
  AttentionShape shape = test::attention_shape(1, 0, 2 * A, gqa ? A : 2 * A, 8, 6, causal);
  shape.packing.seq_lengths = lengths;
  shape.packing.seq_lengths_padded = pad_sequence_lengths(lengths, 2 * A * P);
  shape.packing.pad_between_seqs = true;
  shape.seq_length = shape.packing.total_padded();
  return shape;
}

Schedule build_thd(int64_t A, int64_t P, const AttentionShape& shape) {
  return build_schedule(test::comm_type_for(A, P), CpLayout(A, P, shape.seq_length), shape);
}

/// Whether packed index t is a padding token of `packing`.
std::vector<bool> padding_mask(const PackedSequences& packing) {
  std::vector<bool> pad;
  for (size_t s = 0; s < packing.seq_lengths.size(); ++s) {
    for (int64_t x = 0; x < packing.seq_lengths_padded[s]; ++x) pad.push_back(x >= packing.seq_lengths[s]);
  }
  return pad;
}

/// Padding rows of every output of `o` exactly 0 (softmax_lse −inf), every valid entry finite.
void require_padding_empty(const AttentionOutputs& o, const PackedSequences& packing, const std::string& what) {
  const std::vector<bool> pad = padding_mask(packing);
  const HostTensor* all[] = {&o.out, &o.softmax_lse, &o.dq, &o.dk, &o.dv};
  for (size_t i = 0; i < 5; ++i) {
    const HostTensor& t = *all[i];
    for (int64_t r = 0; r < t.rows(); ++r) {
      for (int64_t h = 0; h < t.heads(); ++h) {
        for (int64_t w = 0; w < t.width(); ++w) {
          const double x = t(0, r, h, w);
          INFO(what << " tensor " << i << " row " << r << " head " << h << " value " << x);
          if (pad[static_cast<size_t>(r)]) {
            REQUIRE(x == (i == 1 ? kNegInf : 0.0));
          } else {
            REQUIRE(std::isfinite(x));
          }
        }
      }
    }
  }
}

/// Verifies a THD schedule in fp64 and requires max relative error ≤ 1e-10 on every tensor and empty padding rows.
void require_exact(int64_t A, int64_t P, const std::vector<int64_t>& lengths, bool causal, bool gqa) {
  const AttentionShape shape = thd_shape(lengths, A, P, causal, gqa);
  const Schedule schedule = build_thd(A, P, shape);
  VerifyOptions options;
  options.threads = 2;
  const VerifyRun run = verify_schedule_run(schedule, options);
  std::ostringstream text;  // (a string sum here trips GCC 12's -Wrestrict false positive)
  text << "[" << A << ", " << P << "] causal " << causal << " gqa " << gqa << " T " << shape.seq_length;
  const std::string what = text.str();
  INFO(what << "\n" << to_string(run.report));
  REQUIRE(run.report.verdict == VerifyVerdict::pass);
  for (const TensorError& e : run.report.tensors) {
    INFO(e.tensor);
    REQUIRE(e.finite);
    REQUIRE(e.max_rel_err <= 1e-10);
    REQUIRE(e.compared > 0);
  }
  require_padding_empty(run.reference, shape.packing, what + " reference");
  require_padding_empty(run.hcp, shape.packing, what + " schedule");
}

}  // namespace

TEST_CASE("thd: p2p, a2a and a2a+p2p schedules over padded packings match the fp64 reference", "[oracles][thd]") {
  // Short sequences (< 2·cp real tokens), a length-1 sequence (ranks holding only padding of it), lengths not
  // divisible by 2·cp, and one sequence exactly a multiple.
  const std::vector<std::vector<int64_t>> packings = {{5, 19, 1, 32}, {1, 3}, {37}, {16, 2, 9}};
  const std::vector<std::pair<int64_t, int64_t>> layouts = {{1, 4}, {4, 1}, {2, 2}, {2, 4}, {1, 2}, {2, 1}};
  for (const auto& [A, P] : layouts) {
    for (const auto& lengths : packings) {
      for (bool causal : {true, false}) {
        for (bool gqa : {true, false}) require_exact(A, P, lengths, causal, gqa);
      }
    }
  }
}

TEST_CASE("thd: padding inputs never reach a valid output", "[oracles][thd]") {
  const AttentionShape shape = thd_shape({5, 19, 1}, 2, 2, true, true);
  const Schedule schedule = build_thd(2, 2, shape);
  AttentionInputs in = make_attention_inputs(7, shape, "clamped_normal");
  const double scale = effective_softmax_scale(shape);
  const AttentionOutputs ref = reference_attention(in, shape, scale, 1);
  const ExecutionResult before = execute_schedule(schedule, in, 1);
  const std::vector<bool> pad = padding_mask(shape.packing);
  for (HostTensor* t : {&in.q, &in.k, &in.v, &in.dout}) {
    for (int64_t r = 0; r < t->rows(); ++r) {
      if (!pad[static_cast<size_t>(r)]) continue;
      for (int64_t h = 0; h < t->heads(); ++h)
        for (int64_t w = 0; w < t->width(); ++w) (*t)(0, r, h, w) = 1e3 * static_cast<double>(h + 1) + static_cast<double>(w);  // far from random
    }
  }
  const AttentionOutputs ref2 = reference_attention(in, shape, scale, 1);
  const ExecutionResult after = execute_schedule(schedule, in, 1);
  const HostTensor* a[] = {&ref.out, &ref.softmax_lse, &ref.dq, &ref.dk, &ref.dv};
  const HostTensor* b[] = {&ref2.out, &ref2.softmax_lse, &ref2.dq, &ref2.dk, &ref2.dv};
  const HostTensor* c[] = {&before.outputs.out, &before.outputs.softmax_lse, &before.outputs.dq,
                           &before.outputs.dk, &before.outputs.dv};
  const HostTensor* d[] = {&after.outputs.out, &after.outputs.softmax_lse, &after.outputs.dq, &after.outputs.dk,
                           &after.outputs.dv};
  for (size_t i = 0; i < 5; ++i) {
    REQUIRE(a[i]->values() == b[i]->values());
    REQUIRE(c[i]->values() == d[i]->values());
  }
}

TEST_CASE("thd: the packed-sequence faults make verify fail, naming tensor and rank", "[oracles][thd]") {
  struct Case {
    FaultKind fault;
    std::vector<int64_t> lengths;
    int64_t A, P;
  };
  const std::vector<Case> cases = {
      {FaultKind::floor_cu_seqlens, {5, 19, 1, 32}, 2, 2},     {FaultKind::floor_cu_seqlens, {5, 19, 1, 32}, 1, 4},
      {FaultKind::tail_padding_blind, {16, 8, 5}, 2, 2},       {FaultKind::tail_padding_blind, {16, 8, 5}, 1, 4},
      {FaultKind::unguarded_empty_merge, {5, 19, 1, 32}, 2, 2}, {FaultKind::unguarded_empty_merge, {5, 19, 1}, 1, 4},
  };
  for (const Case& c : cases) {
    const AttentionShape shape = thd_shape(c.lengths, c.A, c.P, true, true);
    const Schedule faulty = inject_fault(build_thd(c.A, c.P, shape), c.fault);
    const VerifyRun run = verify_schedule_run(faulty, VerifyOptions{});
    INFO(to_string(c.fault) << " [" << c.A << ", " << c.P << "]\n" << to_string(run.report));
    REQUIRE(run.report.verdict == VerifyVerdict::fail);
    REQUIRE(run.report.worst_tensor >= 0);
    const TensorError& worst = run.report.tensors[static_cast<size_t>(run.report.worst_tensor)];
    REQUIRE_FALSE(worst.pass);
    REQUIRE_FALSE(worst.tensor.empty());
    REQUIRE(worst.worst_cp_rank >= 0);
    if (c.fault == FaultKind::unguarded_empty_merge) {  // NaN where an empty row's softmax_lse must be −inf
      REQUIRE(run.report.tensors[1].nonfinite > 0);
    }
  }
}

TEST_CASE("thd: the packed-sequence faults refuse what they cannot break", "[oracles][thd]") {
  AttentionShape bshd = thd_shape({16}, 2, 2, true, true);
  bshd.packing = PackedSequences{};
  const Schedule plain = build_thd(2, 2, bshd);
  for (FaultKind k : {FaultKind::floor_cu_seqlens, FaultKind::tail_padding_blind, FaultKind::unguarded_empty_merge}) {
    REQUIRE(fault_needs_packing(k));
    REQUIRE_THROWS_AS(inject_fault(plain, k), InputError);
  }
  // Padding before the last sequence, or none at all: the old detection saw it, the fault changes nothing.
  for (const std::vector<int64_t>& lengths : std::vector<std::vector<int64_t>>{{5, 16}, {8, 16}}) {
    const Schedule s = build_thd(2, 2, thd_shape(lengths, 2, 2, true, true));
    REQUIRE_THROWS_AS(inject_fault(s, FaultKind::tail_padding_blind), InputError);
  }
  // No sequence padded at all (every length a multiple of 2·cp = 8): cu_seqlens // cp is exact and no row is empty,
  // so floor_cu_seqlens and unguarded_empty_merge printed PASS; refused, and accepted once a sequence is padded.
  const Schedule unpadded = build_thd(2, 2, thd_shape({8, 16}, 2, 2, true, true));
  const Schedule padded = build_thd(2, 2, thd_shape({5, 16}, 2, 2, true, true));
  for (FaultKind k : {FaultKind::floor_cu_seqlens, FaultKind::unguarded_empty_merge}) {
    try {
      (void)inject_fault(unpadded, k);
      FAIL("inject_fault accepted " << to_string(k) << " without padding");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("changes nothing when no sequence is padded") != std::string::npos);
    }
    CHECK_NOTHROW(inject_fault(padded, k));
  }
  REQUIRE_FALSE(fault_needs_packing(FaultKind::stale_kv_backward));
}

// ------------------------------------------------------------------------------------------------------------------
// Blockwise document-masked kernels vs a naive per-pair implementation
// ------------------------------------------------------------------------------------------------------------------

namespace {

/// Segment and position of every row of `runs`.
std::vector<std::pair<int64_t, int64_t>> row_tokens(const std::vector<TokenRun>& runs) {
  std::vector<std::pair<int64_t, int64_t>> t;
  for (const TokenRun& r : runs)
    for (int64_t x = 0; x < r.rows; ++x) t.push_back({r.segment, r.position + x});
  return t;
}

/// Zero outputs of a block of nq query rows and nk kv rows with the heads and widths of `in`.
AttentionOutputs block_outputs(const AttentionInputs& in, int64_t nq, int64_t nk) {
  const int64_t B = in.q.batch(), H = in.q.heads(), Hkv = in.k.heads(), dk = in.q.width(), dv = in.v.width();
  return AttentionOutputs{HostTensor(B, nq, H, dv), HostTensor(B, nq, H, 1), HostTensor(B, nq, H, dk),
                          HostTensor(B, nk, Hkv, dk), HostTensor(B, nk, Hkv, dv)};
}

/// Naive fp64 attention of one document-masked block (q rows q0.., kv rows k0..), its own out/lse as the global
/// ones in the backward: per (b, h, r) the visible keys by the definition (same segment ≥ 0, causal: key
/// position ≤ query position), plain loops.
AttentionOutputs naive_document_block(const AttentionInputs& in, int64_t q0, int64_t k0, const DocumentMask& doc,
                                      bool causal, double scale) {
  const auto qt = row_tokens(doc.q), kt = row_tokens(doc.kv);
  const auto nq = static_cast<int64_t>(qt.size()), nk = static_cast<int64_t>(kt.size());
  const int64_t B = in.q.batch(), H = in.q.heads(), Hkv = in.k.heads(), dk = in.q.width(), dv = in.v.width();
  AttentionOutputs o = block_outputs(in, nq, nk);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      for (int64_t r = 0; r < nq; ++r) {
        std::vector<int64_t> cols;
        for (int64_t c = 0; c < nk; ++c) {
          const auto [sq, xq] = qt[static_cast<size_t>(r)];
          const auto [sk, xk] = kt[static_cast<size_t>(c)];
          if (sq >= 0 && sq == sk && (!causal || xk <= xq)) cols.push_back(c);
        }
        if (cols.empty()) {
          o.softmax_lse(b, r, h, 0) = kNegInf;
          continue;
        }
        std::vector<double> s;
        double m = kNegInf;
        for (int64_t c : cols) {
          double dot = 0;
          for (int64_t d = 0; d < dk; ++d) dot += in.q(b, q0 + r, h, d) * in.k(b, k0 + c, g, d);
          s.push_back(scale * dot);
          m = std::max(m, s.back());
        }
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - m));
        for (double& x : s) x /= l;
        o.softmax_lse(b, r, h, 0) = m + std::log(l);
        for (size_t j = 0; j < cols.size(); ++j)
          for (int64_t d = 0; d < dv; ++d) o.out(b, r, h, d) += s[j] * in.v(b, k0 + cols[j], g, d);
        double delta = 0;
        for (int64_t d = 0; d < dv; ++d) delta += in.dout(b, q0 + r, h, d) * o.out(b, r, h, d);
        for (size_t j = 0; j < cols.size(); ++j) {
          const int64_t c = cols[j];
          double dp = 0;
          for (int64_t d = 0; d < dv; ++d) {
            dp += in.dout(b, q0 + r, h, d) * in.v(b, k0 + c, g, d);
            o.dv(b, c, g, d) += s[j] * in.dout(b, q0 + r, h, d);
          }
          const double ds = s[j] * (dp - delta);
          for (int64_t d = 0; d < dk; ++d) {
            o.dq(b, r, h, d) += scale * ds * in.k(b, k0 + c, g, d);
            o.dk(b, c, g, d) += scale * ds * in.q(b, q0 + r, h, d);
          }
        }
      }
    }
  }
  return o;
}

/// Random runs over `rows` rows: segments in [−1, segments), each segment's positions ascending and disjoint
/// (segment s from 1000·s on), run lengths 1-40, so a segment's keys fall into several runs between others'.
std::vector<TokenRun> random_runs(std::mt19937_64& rng, int64_t rows, int64_t segments) {
  std::vector<int64_t> next(static_cast<size_t>(segments));
  for (int64_t s = 0; s < segments; ++s) next[static_cast<size_t>(s)] = 1000 * s;
  std::uniform_int_distribution<int64_t> len(1, 40), seg(-1, segments - 1), gap(0, 6);
  std::vector<TokenRun> runs;
  int64_t pad_position = 100000;
  for (int64_t row = 0; row < rows;) {
    const int64_t n = std::min(len(rng), rows - row);
    const int64_t s = seg(rng);
    if (s < 0) {
      runs.push_back(TokenRun{n, -1, pad_position});
      pad_position += n;
    } else {
      int64_t& x = next[static_cast<size_t>(s)];
      x += gap(rng);
      runs.push_back(TokenRun{n, s, x});
      x += n;
    }
    row += n;
  }
  return runs;
}

double max_rel_diff(const HostTensor& got, const HostTensor& want) {
  double scale = 0, worst = 0;
  for (double x : want.values())
    if (std::isfinite(x)) scale = std::max(scale, std::abs(x));
  for (int64_t i = 0; i < want.elements(); ++i) {
    const double a = got.data()[i], b = want.data()[i];
    if (a == b) continue;  // also −inf == −inf
    worst = std::max(worst, std::abs(a - b) / std::max(scale, 1e-300));
  }
  return worst;
}

}  // namespace

TEST_CASE("thd: blockwise document-masked kernels agree with a naive per-pair implementation", "[oracles][thd]") {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 8; ++trial) {
    const bool causal = trial % 2 == 0;
    // Trial 0: self-attention positions (kv runs = q runs), the ring's diagonal block, where a row sees itself.
    const int64_t nq = 150 + 37 * trial, nk = trial == 0 ? nq : 170 + 29 * trial, q0 = 3, k0 = 5;
    DocumentMask doc{random_runs(rng, nq, 4), {}};
    doc.kv = trial == 0 ? doc.q : random_runs(rng, nk, 4);
    const int64_t rows_total = std::max(q0 + nq, k0 + nk);
    const AttentionShape shape = test::attention_shape(2, rows_total, 4, 2, 8, 6, causal);
    const AttentionInputs in = make_attention_inputs(100 + static_cast<uint64_t>(trial), shape, "clamped_normal");
    const double scale = 0.35;
    const AttentionOutputs want = naive_document_block(in, q0, k0, doc, causal, scale);
    const BlockMask mask = causal ? BlockMask::causal : BlockMask::none;
    AttentionOutputs got = block_outputs(in, nq, nk);
    HostTensor &out = got.out, &lse = got.softmax_lse, &dq = got.dq, &dk = got.dk, &dv = got.dv;
    attention_block_forward(in.q, RowRange{q0, nq}, in.k, in.v, RowRange{k0, nk}, mask, scale, out, lse, 2,
                            Dtype::fp64, doc);
    // The backward reads the global out, lse and dout at q_rows: place the block's own there.
    HostTensor gout(2, rows_total, 4, 6), glse(2, rows_total, 4, 1);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t r = 0; r < nq; ++r)
        for (int64_t h = 0; h < 4; ++h) {
          glse(b, q0 + r, h, 0) = lse(b, r, h, 0);
          for (int64_t d = 0; d < 6; ++d) gout(b, q0 + r, h, d) = out(b, r, h, d);
        }
    attention_block_backward(in.q, in.k, in.v, gout, in.dout, glse, RowRange{q0, nq}, RowRange{k0, nk}, mask, scale,
                             dq, dk, dv, 2, Dtype::fp64, doc);
    INFO("trial " << trial << " causal " << causal);
    REQUIRE(max_rel_diff(out, want.out) < 1e-12);
    REQUIRE(max_rel_diff(lse, want.softmax_lse) < 1e-12);
    REQUIRE(max_rel_diff(dq, want.dq) < 1e-12);
    REQUIRE(max_rel_diff(dk, want.dk) < 1e-12);
    REQUIRE(max_rel_diff(dv, want.dv) < 1e-12);
    // Exact emptiness: rows that see nothing.
    for (int64_t r = 0; r < nq; ++r) {
      if (want.softmax_lse(0, r, 0, 0) != kNegInf) continue;
      REQUIRE(lse(0, r, 0, 0) == kNegInf);
      REQUIRE(out(0, r, 0, 0) == 0.0);
      REQUIRE(dq(0, r, 0, 0) == 0.0);
    }
  }
}

TEST_CASE("thd: a dump records cu_seqlens and every rank's token order (hcpsim's and TE's)", "[oracles][thd]") {
  const AttentionShape shape = thd_shape({5, 19, 1, 32}, 2, 2, true, true);
  const Schedule schedule = build_thd(2, 2, shape);
  const VerifyRun run = verify_schedule_run(schedule, VerifyOptions{});
  DumpContents d;
  d.dtype = Dtype::fp64;
  d.inputs = run.inputs;
  d.reference = run.reference;
  d.hcp = run.hcp;
  d.metrics = run.report.tensors;
  d.thd = thd_dump_layout(shape.packing, 2, 2);
  REQUIRE(d.thd.cu_seqlens == std::vector<int64_t>{0, 5, 24, 25, 57});
  REQUIRE(d.thd.cu_seqlens_padded == std::vector<int64_t>{0, 8, 32, 40, 72});
  REQUIRE(d.thd.rank_tokens.size() == 4);
  for (size_t g = 0; g < 4; ++g) {
    // hcpsim's rows are the schedule's input binding, TE's order its thd_get_partitioned_indices: same tokens.
    for (const IoBinding& b : schedule.ranks[g].inputs) {
      if (b.tensor == "q") REQUIRE(d.thd.rank_tokens[g] == b.tokens);
    }
    REQUIRE(d.thd.te_indices[g] == thd_partitioned_indices(d.thd.cu_seqlens_padded, 4, static_cast<int64_t>(g)));
    auto a = d.thd.rank_tokens[g], b = d.thd.te_indices[g];
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    REQUIRE(a == b);
  }
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "hcpsim_thd_dump_test.h5";
  write_dump(path.string(), d);
  const DumpContents back = read_dump(path.string());
  std::filesystem::remove(path);
  REQUIRE(back.thd.cu_seqlens == d.thd.cu_seqlens);
  REQUIRE(back.thd.cu_seqlens_padded == d.thd.cu_seqlens_padded);
  REQUIRE(back.thd.rank_tokens == d.thd.rank_tokens);
  REQUIRE(back.thd.te_indices == d.thd.te_indices);
  REQUIRE(back.reference.softmax_lse.values() == d.reference.softmax_lse.values());  // −inf rows round-trip
  // A bshd dump has none of it.
  REQUIRE(thd_dump_layout(PackedSequences{}, 2, 2).empty());
}

TEST_CASE("thd: the GPU backend refuses packed sequences, the CPU oracle runs them", "[oracles][thd]") {
  const Schedule s = build_thd(2, 2, thd_shape({5, 19}, 2, 2, true, true));
  const RunBlocker blocker = gpu::gpu_can_run(s);
  REQUIRE(blocker.blocked());
  REQUIRE(blocker.problem.find("does not run packed sequences") != std::string::npos);
  REQUIRE(blocker.fix.find("CPU oracle") != std::string::npos);
  REQUIRE_FALSE(cpu_can_run(s).blocked());
  REQUIRE_THROWS_AS(gpu::build_execution_plan(s), InputError);
}

TEST_CASE("thd: emulated fp32 and bf16 runs pass against the same-precision THD baseline", "[oracles][thd]") {
  for (const auto& [A, P] : std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {1, 4}}) {
    const AttentionShape shape = thd_shape({5, 19, 1, 32}, A, P, true, true);
    for (Dtype dt : {Dtype::fp32, Dtype::bf16}) {
      VerifyOptions options;
      options.dtype = dt;
      const VerifyRun run = verify_schedule_run(build_thd(A, P, shape), options);
      INFO(to_string(run.report));
      REQUIRE(run.report.verdict == VerifyVerdict::pass);
      require_padding_empty(run.hcp, shape.packing, "emulated run");
    }
  }
}
