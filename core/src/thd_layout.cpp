// Packed sequences with context parallelism: TE's per-sequence dual-chunk split and valid lengths
// (context_parallel.py get_cu_seqlens_on_cp_rank, thd_get_partitioned_indices; docs/algorithm.md "THD layout").
#include "hcpsim/core/thd_layout.hpp"

#include <algorithm>
#include <utility>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

std::vector<int64_t> cumulative(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu{0};
  cu.reserve(lengths.size() + 1);
  for (int64_t l : lengths) cu.push_back(cu.back() + l);
  return cu;
}

int64_t clamp_to(int64_t x, int64_t hi) { return std::clamp<int64_t>(x, 0, hi); }

/// Appends a run unless it is empty.
void push_run(std::vector<TokenRun>& runs, int64_t rows, int64_t segment, int64_t position) {
  if (rows > 0) runs.push_back(TokenRun{rows, segment, position});
}

}  // namespace

std::vector<int64_t> PackedSequences::cu_seqlens() const { return cumulative(seq_lengths); }
std::vector<int64_t> PackedSequences::cu_seqlens_padded() const { return cumulative(seq_lengths_padded); }

int64_t PackedSequences::total_padded() const { return cumulative(seq_lengths_padded).back(); }

bool PackedSequences::has_padding() const {
  for (size_t s = 0; s < seq_lengths.size(); ++s) {
    if (seq_lengths_padded[s] != seq_lengths[s]) return true;
  }
  return false;
}

bool PackedSequences::only_tail_padded() const {
  if (seq_lengths.empty() || seq_lengths_padded.back() == seq_lengths.back()) return false;
  for (size_t s = 0; s + 1 < seq_lengths.size(); ++s) {
    if (seq_lengths_padded[s] != seq_lengths[s]) return false;
  }
  return true;
}

std::vector<int64_t> pad_sequence_lengths(const std::vector<int64_t>& seq_lengths, int64_t multiple) {
  HCPSIM_ASSERT(multiple >= 1, "pad_sequence_lengths: multiple must be >= 1");
  std::vector<int64_t> padded;
  padded.reserve(seq_lengths.size());
  for (int64_t l : seq_lengths) padded.push_back((l + multiple - 1) / multiple * multiple);
  return padded;
}

std::vector<int64_t> thd_partitioned_indices(const std::vector<int64_t>& cu_seqlens_padded, int64_t cp_size,
                                             int64_t cp_rank) {
  HCPSIM_ASSERT(cp_size >= 1 && cp_rank >= 0 && cp_rank < cp_size, "thd_partitioned_indices: bad cp rank");
  std::vector<int64_t> out;
  for (size_t s = 0; s + 1 < cu_seqlens_padded.size(); ++s) {
    const int64_t len = cu_seqlens_padded[s + 1] - cu_seqlens_padded[s];
    HCPSIM_ASSERT(len % (2 * cp_size) == 0, "thd_partitioned_indices: a padded length is not a multiple of 2*cp");
    const int64_t h = len / (2 * cp_size);
    for (int64_t chunk : {cp_rank, 2 * cp_size - 1 - cp_rank}) {
      for (int64_t x = 0; x < h; ++x) out.push_back(cu_seqlens_padded[s] + chunk * h + x);
    }
  }
  return out;
}

std::vector<ThdHalfValid> thd_valid_on_cp_rank(const PackedSequences& packing, int64_t cp_size, int64_t cp_rank) {
  std::vector<ThdHalfValid> out;
  for (size_t s = 0; s < packing.seq_lengths.size(); ++s) {
    const int64_t half = packing.seq_lengths_padded[s] / (2 * cp_size);
    const int64_t len = packing.seq_lengths[s];
    out.push_back(ThdHalfValid{clamp_to(len - cp_rank * half, half),
                               clamp_to(len - (2 * cp_size - cp_rank - 1) * half, half)});
  }
  return out;
}

namespace {

// The floor rule for one sequence of actual length `len` on a ring of `cp` ranks whose two local chunks hold
// `half` rows each: per-step length len // cp counts as a prefix of [first chunk | second chunk].
ThdHalfValid floor_valid_halves(int64_t len, int64_t cp, int64_t half) {
  const int64_t n = len / cp;  // cu_seqlens // cp, per sequence
  return ThdHalfValid{clamp_to(n, half), clamp_to(n - half, half)};
}

}  // namespace

std::vector<ThdHalfValid> thd_floor_valid_on_cp_rank(const PackedSequences& packing, int64_t cp_size) {
  std::vector<ThdHalfValid> out;
  for (size_t s = 0; s < packing.seq_lengths.size(); ++s)
    out.push_back(floor_valid_halves(packing.seq_lengths[s], cp_size, packing.seq_lengths_padded[s] / (2 * cp_size)));
  return out;
}

ThdLayout::ThdLayout(int64_t a2a_size, int64_t p2p_size, PackedSequences packing, ValidRule rule)
    : a2a_size_(a2a_size), p2p_size_(p2p_size), packing_(std::move(packing)), rule_(rule) {
  HCPSIM_ASSERT(a2a_size_ >= 1 && p2p_size_ >= 1, "ThdLayout: A and P must be >= 1");
  HCPSIM_ASSERT(packing_.thd(), "ThdLayout: no packed sequences");
  HCPSIM_ASSERT(packing_.seq_lengths.size() == packing_.seq_lengths_padded.size(), "ThdLayout: length lists differ");
  const int64_t two_cp = 2 * a2a_size_ * p2p_size_;
  for (size_t s = 0; s < packing_.seq_lengths.size(); ++s) {
    HCPSIM_ASSERT(packing_.seq_lengths_padded[s] % two_cp == 0, "ThdLayout: padded length not a multiple of 2*cp");
    HCPSIM_ASSERT(packing_.seq_lengths[s] >= 0 && packing_.seq_lengths[s] <= packing_.seq_lengths_padded[s],
                  "ThdLayout: actual length outside [0, padded length]");
    half_rows_.push_back(packing_.seq_lengths_padded[s] / two_cp);
  }
  cu_padded_ = packing_.cu_seqlens_padded();
}

std::vector<int64_t> ThdLayout::tokens_before_a2a(int64_t cp_rank) const {
  const int64_t cp = a2a_size_ * p2p_size_;
  std::vector<int64_t> out;
  for (int64_t chunk : {cp_rank, 2 * cp - 1 - cp_rank}) {
    for (size_t s = 0; s < half_rows_.size(); ++s) {
      const int64_t h = half_rows_[s];
      for (int64_t x = 0; x < h; ++x) out.push_back(cu_padded_[s] + chunk * h + x);
    }
  }
  return out;
}

std::vector<int64_t> ThdLayout::post_a2a_tokens(int64_t p2p_rank) const {
  std::vector<int64_t> out;
  for (const TokenRun& r : post_a2a_runs(p2p_rank)) {
    for (int64_t x = 0; x < r.rows; ++x) out.push_back(r.position + x);
  }
  return out;
}

std::vector<TokenRun> ThdLayout::post_a2a_runs(int64_t p2p_rank) const {
  const int64_t P = p2p_size_;
  std::vector<TokenRun> runs;
  for (int64_t region = 0; region < 2; ++region) {
    const int64_t super_chunk = region == 0 ? p2p_rank : 2 * P - 1 - p2p_rank;
    for (size_t s = 0; s < half_rows_.size(); ++s) {
      const int64_t rows = a2a_size_ * half_rows_[s];  // one super-chunk of sequence s
      const int64_t x0 = super_chunk * rows;           // its first token's offset in the sequence
      const int64_t len = packing_.seq_lengths[s];
      int64_t valid = clamp_to(len - x0, rows);
      if (rule_ == ValidRule::floor) {  // a prefix of [super-chunk p | super-chunk 2P-1-p]
        const ThdHalfValid halves = floor_valid_halves(len, P, rows);
        valid = region == 0 ? halves.first : halves.second;
      }
      push_run(runs, valid, static_cast<int64_t>(s), cu_padded_[s] + x0);
      push_run(runs, rows - valid, -1, cu_padded_[s] + x0 + valid);
    }
  }
  return runs;
}

std::vector<TokenRun> ThdLayout::global_runs() const {
  std::vector<TokenRun> runs;
  for (size_t s = 0; s < half_rows_.size(); ++s) {
    const int64_t len = packing_.seq_lengths[s];
    push_run(runs, len, static_cast<int64_t>(s), cu_padded_[s]);
    push_run(runs, packing_.seq_lengths_padded[s] - len, -1, cu_padded_[s] + len);
  }
  return runs;
}

std::vector<TokenRun> slice_runs(const std::vector<TokenRun>& runs, int64_t begin, int64_t count) {
  HCPSIM_ASSERT(begin >= 0 && count >= 0, "slice_runs: negative range");
  std::vector<TokenRun> out;
  int64_t row = 0;
  const int64_t end = begin + count;
  for (const TokenRun& r : runs) {
    const int64_t lo = std::max(begin, row);
    const int64_t hi = std::min(end, row + r.rows);
    if (lo < hi) out.push_back(TokenRun{hi - lo, r.segment, r.position + (lo - row)});
    row += r.rows;
  }
  HCPSIM_ASSERT(end <= row, "slice_runs: range outside the runs");
  return out;
}

int64_t runs_rows(const std::vector<TokenRun>& runs) {
  int64_t n = 0;
  for (const TokenRun& r : runs) n += r.rows;
  return n;
}

}  // namespace hcpsim
