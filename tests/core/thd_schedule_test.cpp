// THD (packed sequence) schedules: the builders' document masks cover exactly the pairs of per-sequence full
// attention, the per-sequence a2a moves every token to where the ring expects it, the dense pieces of a document
// mask are exactly its visible pairs, and THD schedules satisfy the IR invariants and the hazard check.
#include <algorithm>
#include <cstdint>
#include <random>
#include <variant>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/document_mask.hpp"
#include "hcpsim/core/lowering.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/core/schedule_hazards.hpp"
#include "hcpsim/core/thd_layout.hpp"

using namespace hcpsim;

namespace {

/// A packing of `lengths` padded for cp, pad_between_seqs resolved true.
PackedSequences packing_of(const std::vector<int64_t>& lengths, int64_t cp) {
  PackedSequences p;
  p.seq_lengths = lengths;
  p.seq_lengths_padded = pad_sequence_lengths(lengths, 2 * cp);
  p.pad_between_seqs = true;
  return p;
}

AttentionShape thd_shape(const PackedSequences& packing, bool causal) {
  AttentionShape sh;
  sh.batch = 1;
  sh.seq_length = packing.total_padded();
  sh.heads_q = 8;
  sh.heads_kv = 4;  // GQA, divisible by every A below
  sh.head_dim_qk = 8;
  sh.head_dim_v = 8;
  sh.causal = causal;
  sh.dtype = Dtype::fp32;
  sh.packing = packing;
  return sh;
}

/// Pairs of full per-sequence attention over the packed tensor (the reference's mask).
int64_t global_pairs(const PackedSequences& packing, int64_t A, int64_t P, bool causal) {
  const ThdLayout thd(A, P, packing, ThdLayout::ValidRule::padded);
  return document_mask_pairs(DocumentMask{thd.global_runs(), thd.global_runs()}, causal);
}

struct Case {
  CpCommType type;
  int64_t A, P;
};

}  // namespace

TEST_CASE("core thd: the blocks of every rank cover exactly the per-sequence pairs, once per head group",
          "[core][thd]") {
  const std::vector<int64_t> lengths{13, 1, 40, 7, 24};  // a 1-token sequence, lengths not divisible by 2cp
  for (const Case c : {Case{CpCommType::p2p, 1, 4}, Case{CpCommType::a2a, 4, 1}, Case{CpCommType::a2a_p2p, 2, 2},
                       Case{CpCommType::a2a_p2p, 2, 4}, Case{CpCommType::all_gather, 1, 4}}) {
    for (bool causal : {true, false}) {
      INFO("A " << c.A << " P " << c.P << " causal " << causal);
      const PackedSequences packing = packing_of(lengths, c.A * c.P);
      const AttentionShape sh = thd_shape(packing, causal);
      const Schedule s = build_schedule(c.type, CpLayout(c.A, c.P, sh.seq_length), sh);
      s.check_invariants();
      check_hazards(s);
      int64_t fwd = 0, bwd = 0;
      for (const RankProgram& r : s.ranks) {
        for (const Op& op : r.ops) {
          if (const auto* f = std::get_if<AttnFwdBlockOp>(&op.payload)) {
            REQUIRE(!f->doc.empty());
            fwd += document_mask_pairs(f->doc, f->mask != BlockMask::none);
          }
          if (const auto* b = std::get_if<AttnBwdBlockOp>(&op.payload)) {
            bwd += document_mask_pairs(b->doc, b->mask != BlockMask::none);
          }
        }
      }
      // Every member of an a2a group computes the pairs of its p2p rank for its own head group.
      const int64_t want = c.A * global_pairs(packing, c.A, c.P, causal);
      REQUIRE(fwd == want);
      REQUIRE(bwd == want);
    }
  }
}

namespace {

/// The packed index of every row of the output of the first collective of type OpT on every rank, moved by the
/// lowering's segments from the ranks' q/k input bindings (binding `input`).
template <typename OpT>
std::vector<std::vector<int64_t>> tokens_after_first(const Schedule& s, size_t input) {
  std::vector<OpRef> batch;
  for (const RankProgram& r : s.ranks) {
    for (size_t i = 0; i < r.ops.size(); ++i) {
      if (std::holds_alternative<OpT>(r.ops[i].payload)) {
        batch.push_back(OpRef{r.rank, static_cast<OpIndex>(i)});
        break;
      }
    }
  }
  REQUIRE(batch.size() == s.ranks.size());
  std::vector<std::vector<int64_t>> out;
  for (const OpRef& me : batch) {
    const RankProgram& prog = s.ranks[static_cast<size_t>(me.rank)];
    const auto& op = std::get<OpT>(prog.ops[static_cast<size_t>(me.op)].payload);
    const BufferDecl& o = prog.buffers[static_cast<size_t>(op.output)];
    std::vector<int64_t> token_of_row(static_cast<size_t>(o.rows), -1);
    for (const CopySegment& seg : incoming_segments(s, batch, me)) {
      const RankProgram& src = s.ranks[static_cast<size_t>(seg.src_rank)];
      const BufferDecl& in = src.buffers[static_cast<size_t>(seg.src)];
      REQUIRE(src.inputs[input].buffer == seg.src);
      for (int64_t r = 0; r < seg.rows; ++r) {
        const int64_t src_row = (seg.src_offset + r * seg.src_row_stride) / (in.heads * in.width);
        const int64_t dst_row = (seg.dst_offset + r * seg.dst_row_stride) / (o.heads * o.width);
        token_of_row[static_cast<size_t>(dst_row)] = src.inputs[input].tokens[static_cast<size_t>(src_row)];
      }
    }
    out.push_back(token_of_row);
  }
  return out;
}

}  // namespace

TEST_CASE("core thd: the per-sequence all_gather gathers K into packed natural order", "[core][thd]") {
  const PackedSequences packing = packing_of({5, 16, 3, 9}, 4);
  const AttentionShape sh = thd_shape(packing, true);
  const Schedule s = build_schedule(CpCommType::all_gather, CpLayout(1, 4, sh.seq_length), sh);
  std::vector<int64_t> natural(static_cast<size_t>(sh.seq_length));
  for (size_t i = 0; i < natural.size(); ++i) natural[i] = static_cast<int64_t>(i);
  for (const auto& rows : tokens_after_first<AllGatherOp>(s, 1)) REQUIRE(rows == natural);  // binding 1 = k
}

TEST_CASE("core thd: the per-sequence a2a puts every token where post_a2a_tokens says", "[core][thd]") {
  const PackedSequences packing = packing_of({5, 16, 3, 9}, 4);
  const AttentionShape sh = thd_shape(packing, true);
  const int64_t A = 2, P = 2;
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(A, P, sh.seq_length), sh);
  const ThdLayout thd(A, P, packing, ThdLayout::ValidRule::padded);
  for (const RankProgram& r : s.ranks) {
    for (const Op& op : r.ops) {
      if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) REQUIRE(a2a->seq_half_rows == thd.seq_half_rows());
    }
  }
  // The first all-to-all of every rank scatters q (binding 0).
  const auto rows = tokens_after_first<AllToAllOp>(s, 0);
  for (size_t g = 0; g < rows.size(); ++g) REQUIRE(rows[g] == thd.post_a2a_tokens(static_cast<int64_t>(g) / A));
}

TEST_CASE("core thd: post-a2a runs and pre-a2a tokens cover every packed index once", "[core][thd]") {
  const PackedSequences packing = packing_of({1, 30, 8}, 6);  // cp = 6: [3, 2]
  const ThdLayout thd(3, 2, packing, ThdLayout::ValidRule::padded);
  std::vector<int64_t> seen_pre, seen_post;
  for (int64_t g = 0; g < 6; ++g) {
    const auto t = thd.tokens_before_a2a(g);
    seen_pre.insert(seen_pre.end(), t.begin(), t.end());
  }
  int64_t valid = 0;
  for (int64_t p = 0; p < 2; ++p) {
    const auto t = thd.post_a2a_tokens(p);
    seen_post.insert(seen_post.end(), t.begin(), t.end());
    for (const TokenRun& r : thd.post_a2a_runs(p)) valid += r.segment >= 0 ? r.rows : 0;
  }
  std::sort(seen_pre.begin(), seen_pre.end());
  std::sort(seen_post.begin(), seen_post.end());
  std::vector<int64_t> all(static_cast<size_t>(packing.total_padded()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  REQUIRE(packing.total_padded() == 12 + 36 + 12);
  REQUIRE(seen_pre == all);
  REQUIRE(seen_post == all);
  REQUIRE(valid == 1 + 30 + 8);  // the exact rule keeps every real token and nothing else
}

TEST_CASE("core thd: the floor rule keeps the first L // P tokens of every local sequence", "[core][thd]") {
  // L = 10 padded to 12 with P = 2 (A = 1): chunks of 3; rank 0 holds tokens 0-2 and 9-11, rank 1 tokens 3-8.
  // Exact: rank 0 has 3 + 1 valid (9 < 10 ≤ 10, 11), rank 1 all 6. Floor: 10 // 2 = 5 rows of each local sequence.
  const PackedSequences packing = packing_of({10}, 2);
  REQUIRE(packing.seq_lengths_padded == std::vector<int64_t>{12});
  const ThdLayout exact(1, 2, packing, ThdLayout::ValidRule::padded);
  const ThdLayout floor(1, 2, packing, ThdLayout::ValidRule::floor);
  auto valid_rows = [](const std::vector<TokenRun>& runs) {
    int64_t n = 0;
    for (const TokenRun& r : runs) n += r.segment >= 0 ? r.rows : 0;
    return n;
  };
  REQUIRE(valid_rows(exact.post_a2a_runs(0)) == 4);
  REQUIRE(valid_rows(exact.post_a2a_runs(1)) == 6);
  REQUIRE(valid_rows(floor.post_a2a_runs(0)) == 5);
  REQUIRE(valid_rows(floor.post_a2a_runs(1)) == 5);
}

TEST_CASE("core thd: document-mask pieces are exactly the visible pairs on random runs", "[core][thd]") {
  std::mt19937_64 rng(20261201);  // the engine's output is specified by the standard; only raw draws are used
  for (int trial = 0; trial < 200; ++trial) {
    auto random_runs = [&](int64_t n_runs) {
      std::vector<TokenRun> runs;
      for (int64_t i = 0; i < n_runs; ++i) {
        const auto seg = static_cast<int64_t>(rng() % 4) - 1;  // -1 = padding
        const auto rows = static_cast<int64_t>(rng() % 6) + 1;
        const auto start = static_cast<int64_t>(rng() % 40);
        runs.push_back(TokenRun{rows, seg, 100 * (seg + 1) + start});
      }
      return runs;
    };
    DocumentMask m{random_runs(1 + static_cast<int64_t>(rng() % 5)), {}};
    // Keys: disjoint positions within a segment (TE's chunks never overlap): one run per segment per slot.
    for (int64_t seg = -1; seg < 3; ++seg) {
      int64_t pos = 100 * (seg + 1) + static_cast<int64_t>(rng() % 5);
      for (int slot = 0; slot < 2; ++slot) {
        const auto rows = static_cast<int64_t>(rng() % 7);
        if (rows > 0) m.kv.push_back(TokenRun{rows, seg, pos});
        pos += rows + static_cast<int64_t>(rng() % 9);
      }
    }
    if (m.kv.empty()) continue;
    std::shuffle(m.kv.begin(), m.kv.end(), rng);
    const bool causal = trial % 2 == 0;
    const int64_t nq = runs_rows(m.q), nk = runs_rows(m.kv);
    std::vector<std::vector<char>> seen(static_cast<size_t>(nq), std::vector<char>(static_cast<size_t>(nk), 0));
    int64_t piece_pairs = 0;
    for (const DocumentMaskPiece& pc : document_mask_pieces(m, causal)) {
      std::vector<int64_t> cols;  // gathered column -> block kv row
      for (const auto& rg : pc.kv_ranges)
        for (int64_t c = rg.begin; c < rg.end; ++c) cols.push_back(c);
      for (int64_t r = 0; r < pc.q_count; ++r) {
        const auto vis = semantics::visible_columns(pc.desc, r, pc.kv_count);
        for (int64_t c = vis.begin; c < vis.end; ++c) {
          auto& cell = seen[static_cast<size_t>(pc.q_begin + r)][static_cast<size_t>(cols[static_cast<size_t>(c)])];
          REQUIRE(cell == 0);
          cell = 1;
        }
      }
      piece_pairs += semantics::block_pairs(pc.desc, pc.q_count, pc.kv_count);
    }
    int64_t want = 0;
    for (int64_t r = 0; r < nq; ++r) {
      for (int64_t c = 0; c < nk; ++c) {
        const bool v = document_visible(m, causal, r, c);
        want += v ? 1 : 0;
        REQUIRE((seen[static_cast<size_t>(r)][static_cast<size_t>(c)] != 0) == v);
      }
    }
    REQUIRE(piece_pairs == want);
    REQUIRE(document_mask_pairs(m, causal) == want);
  }
}
