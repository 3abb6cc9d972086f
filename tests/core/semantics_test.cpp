#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/semantics.hpp"

using namespace hcpsim;
using namespace hcpsim::semantics;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// bf16 round-to-nearest-even on the bit pattern (add 0x7FFF plus the kept LSB, keep the top 16 bits): the
/// textbook definition, independent of round_to_dtype's frexp/ldexp form.
float bf16_by_bits(float x) {
  if (std::isnan(x)) return x;
  uint32_t u = bits_of(x);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return float_of(u & 0xFFFF0000u);
}

/// A 64-bit mix (splitmix64 finaliser) for spreading test inputs over every float bit pattern.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

// The rules are constexpr: the cost model and tests can evaluate them at compile time.
static_assert(block_pairs(4, 4, BlockMask::causal) == 10);
static_assert(visible_columns(BlockMask::causal_bottom_right, 0, 2, 4).end == 3);

TEST_CASE("semantics: causal visibility of a 4x4 block is the lower triangle with the diagonal", "[core][semantics]") {
  const MaskDesc causal = block_mask_desc(BlockMask::causal, 4, 4);
  const bool want[4][4] = {{true, false, false, false},
                           {true, true, false, false},
                           {true, true, true, false},
                           {true, true, true, true}};
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 4; ++c) {
      INFO("r " << r << " c " << c);
      REQUIRE(is_visible(causal, r, c) == want[r][c]);
      REQUIRE(is_visible(block_mask_desc(BlockMask::none, 4, 4), r, c));
    }
  }
  // A square block: bottom-right alignment is the same as top-left.
  REQUIRE(block_mask_desc(BlockMask::causal_bottom_right, 4, 4).diagonal == 0);
  REQUIRE(block_mask_desc(BlockMask::causal_bottom_right, 4, 4).kind == MaskKind::causal);
  REQUIRE(block_mask_desc(BlockMask::none, 4, 4).kind == MaskKind::full);
  REQUIRE_FALSE(is_masked(BlockMask::none));
  REQUIRE(is_masked(BlockMask::causal));
  REQUIRE(is_masked(BlockMask::causal_bottom_right));
}

TEST_CASE("semantics: the visible range of each row for every mask kind", "[core][semantics]") {
  // none: every row sees [0, nk).
  for (int64_t r = 0; r < 3; ++r) {
    REQUIRE(visible_columns(BlockMask::none, r, 3, 5).begin == 0);
    REQUIRE(visible_columns(BlockMask::none, r, 3, 5).end == 5);
  }
  // causal (top-left) 3 × 5: row r sees [0, r + 1); 5 × 2: rows 2.. see both columns.
  REQUIRE(visible_columns(BlockMask::causal, 0, 3, 5).end == 1);
  REQUIRE(visible_columns(BlockMask::causal, 2, 3, 5).end == 3);
  REQUIRE(visible_columns(BlockMask::causal, 4, 5, 2).end == 2);
  // causal_bottom_right 2 × 4 (diagonal +2): rows see [0, 3) and [0, 4).
  REQUIRE(visible_columns(BlockMask::causal_bottom_right, 0, 2, 4).end == 3);
  REQUIRE(visible_columns(BlockMask::causal_bottom_right, 1, 2, 4).end == 4);
  // causal_bottom_right 4 × 2 (diagonal −2): rows 0 and 1 are empty rows, rows 2 and 3 see 1 and 2 keys.
  const int64_t want_end[4] = {0, 0, 1, 2};
  for (int64_t r = 0; r < 4; ++r) {
    const IndexRange range = visible_columns(BlockMask::causal_bottom_right, r, 4, 2);
    REQUIRE(range.begin == 0);
    REQUIRE(range.end == want_end[r]);
    REQUIRE(range.count() == want_end[r]);
  }
  // Column view: the first row that sees column c.
  REQUIRE(visible_rows(BlockMask::causal, 2, 4, 4).begin == 2);
  REQUIRE(visible_rows(BlockMask::causal_bottom_right, 0, 4, 2).begin == 2);
  REQUIRE(visible_rows(BlockMask::causal_bottom_right, 3, 2, 4).begin == 1);
  REQUIRE(visible_rows(BlockMask::causal, 9, 4, 10).begin == 4);  // no row sees column 9
  REQUIRE(visible_rows(BlockMask::none, 3, 4, 10).begin == 0);
  // Tiles: rows 1..2 of a causal 4 × 4 block see [0, 3) together and [0, 2) each.
  const MaskDesc causal = block_mask_desc(BlockMask::causal, 4, 4);
  REQUIRE(tile_columns(causal, 1, 2, 4).end == 3);
  REQUIRE(tile_full_columns(causal, 1, 2, 4).end == 2);
}

TEST_CASE("semantics: ranges, tiles and pair counts agree with pairwise visibility", "[core][semantics]") {
  for (BlockMask mask : {BlockMask::none, BlockMask::causal, BlockMask::causal_bottom_right}) {
    for (int64_t nq = 0; nq <= 9; ++nq) {
      for (int64_t nk = 0; nk <= 9; ++nk) {
        INFO("mask " << static_cast<int>(mask) << " nq " << nq << " nk " << nk);
        const MaskDesc m = block_mask_desc(mask, nq, nk);
        int64_t pairs = 0;
        for (int64_t r = 0; r < nq; ++r) {
          const IndexRange range = visible_columns(m, r, nk);
          for (int64_t c = 0; c < nk; ++c) {
            const bool in_range = c >= range.begin && c < range.end;
            REQUIRE(in_range == is_visible(m, r, c));
            const IndexRange rows = visible_rows(m, c, nq);
            REQUIRE((r >= rows.begin && r < rows.end) == is_visible(m, r, c));
            pairs += is_visible(m, r, c) ? 1 : 0;
          }
        }
        REQUIRE(block_pairs(nq, nk, mask) == pairs);
        // Tile hull and intersection over every row interval.
        for (int64_t r0 = 0; r0 < nq; ++r0) {
          for (int64_t r1 = r0; r1 < nq; ++r1) {
            for (int64_t c = 0; c < nk; ++c) {
              bool any = false, all = true;
              for (int64_t r = r0; r <= r1; ++r) {
                any = any || is_visible(m, r, c);
                all = all && is_visible(m, r, c);
              }
              const IndexRange hull = tile_columns(m, r0, r1, nk);
              const IndexRange meet = tile_full_columns(m, r0, r1, nk);
              REQUIRE((c >= hull.begin && c < hull.end) == any);
              REQUIRE((c >= meet.begin && c < meet.end) == all);
            }
          }
        }
      }
    }
  }
  // Hand values: a square causal block, a tall one and a wide bottom-right one.
  REQUIRE(block_pairs(4, 4, BlockMask::causal) == 10);
  REQUIRE(block_pairs(10, 4, BlockMask::causal) == 10 + 6 * 4);
  REQUIRE(block_pairs(4, 10, BlockMask::causal_bottom_right) == 7 + 8 + 9 + 10);
  REQUIRE(block_pairs(4, 10, BlockMask::none) == 40);
  REQUIRE(block_pairs(1 << 20, 1 << 20, BlockMask::causal) == (int64_t{1} << 19) * ((int64_t{1} << 20) + 1));
}

TEST_CASE("semantics: lse_merge of known states, empty rows and NaN", "[core][semantics]") {
  // Two rows with the same sum: log(2e^x) = x + log 2.
  REQUIRE(lse_merge(0.0, 0.0) == std::log1p(1.0));
  REQUIRE(lse_merge(0.0f, 0.0f) == std::log1p(1.0f));
  REQUIRE(lse_merge(1.0, 3.0) == 3.0 + std::log1p(std::exp(-2.0)));
  REQUIRE(lse_merge(3.0, 1.0) == lse_merge(1.0, 3.0));
  REQUIRE(lse_merge(110.0f, 111.0f) == 111.0f + std::log1p(std::exp(-1.0f)));
  // Empty rows (no visible key, lse −inf): merge(x, −inf) = x, merge(−inf, −inf) = −inf, never NaN.
  REQUIRE(lse_merge(1.5, -kInf) == 1.5);
  REQUIRE(lse_merge(-kInf, -2.0) == -2.0);
  REQUIRE(lse_merge(-kInf, -kInf) == -kInf);
  REQUIRE(lse_merge(-kInfF, -kInfF) == -kInfF);
  REQUIRE(lse_merge(3.0f, -kInfF) == 3.0f);
  // Any NaN input gives the positive quiet NaN (the executors' dumps hold that bit pattern).
  const float nan_f = lse_merge(std::numeric_limits<float>::quiet_NaN(), 1.0f);
  REQUIRE(bits_of(nan_f) == bits_of(std::numeric_limits<float>::quiet_NaN()));
  REQUIRE(std::isnan(lse_merge(-kInf, std::numeric_limits<double>::quiet_NaN())));
  REQUIRE(std::isnan(lse_merge(-std::numeric_limits<double>::quiet_NaN(), 0.0)));
  // The naive fault merge overflows in fp32 where the max-shifted one is exact.
  REQUIRE(lse_merge_naive(0.0f, 0.0f) == std::log(2.0f));
  REQUIRE(std::isinf(lse_merge_naive(110.0f, 111.0f)));
  REQUIRE(std::isfinite(lse_merge(110.0f, 111.0f)));
}

TEST_CASE("semantics: output correction weights, empty steps and rounding", "[core][semantics]") {
  // A step that saw no key (lse −inf) contributes 0: init writes 0, accumulate leaves dst.
  REQUIRE_FALSE(out_correction_contributes(-kInfF));
  REQUIRE(out_correction_contributes(-1e30f));
  REQUIRE(out_correction(5.0f, 7.0f, -kInfF, 1.0f, false, Dtype::bf16) == 0.0f);
  REQUIRE(out_correction(5.0f, 7.0f, -kInfF, 1.0f, true, Dtype::bf16) == 5.0f);
  REQUIRE(out_correction(5.0, 7.0, -kInf, 1.0, true, Dtype::fp64) == 5.0);
  // exp(0) = 1: 1.5 + 2.25 = 3.75 exactly; init copies.
  REQUIRE(out_correction(1.5f, 2.25f, 0.5f, 0.5f, true, Dtype::bf16) == 3.75f);
  REQUIRE(out_correction(1.5f, 2.25f, 0.5f, 0.5f, false, Dtype::bf16) == 2.25f);
  // Weight exp(src_lse − lse), fp64 unrounded.
  REQUIRE(out_correction_weight(-1.0, 0.0) == std::exp(-1.0));
  REQUIRE(out_correction(0.25, 2.0, -1.0, 0.0, true, Dtype::fp64) == 0.25 + 2.0 * std::exp(-1.0));
  // The sum is rounded once to the output format: 1 + 2⁻⁸ is a bf16 tie and rounds to even (1).
  REQUIRE(out_correction(1.0f, 0x1p-8f, 0.0f, 0.0f, true, Dtype::bf16) == 1.0f);
  REQUIRE(out_correction(1.0f, 0x1p-8f, 0.0f, 0.0f, true, Dtype::fp32) == 1.0f + 0x1p-8f);
}

TEST_CASE("semantics: bf16 and fp16 rounding of ties, subnormals and values near the maximum", "[core][semantics]") {
  // bf16 keeps 8 significant bits: ties go to the even neighbour.
  REQUIRE(round_to_dtype(1.0 + 0x1p-8, Dtype::bf16) == 1.0);
  REQUIRE(round_to_dtype(1.0 + 3 * 0x1p-8, Dtype::bf16) == 1.0 + 0x1p-6);
  REQUIRE(round_to_dtype(1.0 + 0x1p-8 + 0x1p-30, Dtype::bf16) == 1.0 + 0x1p-7);  // above the tie: up
  REQUIRE(round_to_dtype(-3.0, Dtype::bf16) == -3.0);
  // Near the maximum (2 − 2⁻⁷)·2¹²⁷: below the tie stays, the tie rounds to even (2¹²⁸) and overflows to inf.
  REQUIRE(round_to_dtype(0x1.fep127, Dtype::bf16) == 0x1.fep127);
  REQUIRE(round_to_dtype(0x1.feffp127, Dtype::bf16) == 0x1.fep127);
  REQUIRE(round_to_dtype(0x1.ffp127, Dtype::bf16) == kInf);
  REQUIRE(round_to_dtype(-0x1.ffp127, Dtype::bf16) == -kInf);
  REQUIRE(round_to_dtype(0x1.fcp127, Dtype::bf16) == 0x1.fcp127);
  REQUIRE(round_to_dtype(0x1.fdp127, Dtype::bf16) == 0x1.fcp127);  // a tie below the maximum: to even (down)
  REQUIRE(round_to_dtype(std::numeric_limits<float>::max(), Dtype::bf16) == kInfF);
  // Subnormals: the spacing is 2⁻¹³³; 3·2⁻¹³⁴ is a tie between 2⁻¹³³ and 2⁻¹³², even is 2⁻¹³².
  REQUIRE(round_to_dtype(0x1p-133, Dtype::bf16) == 0x1p-133);
  REQUIRE(round_to_dtype(3 * 0x1p-134, Dtype::bf16) == 0x1p-132);
  // fp16: 11 significant bits, 65504 the largest finite, 65520 the tie that rounds up to inf, subnormals 2⁻²⁴.
  REQUIRE(round_to_dtype(2049.0, Dtype::fp16) == 2048.0);
  REQUIRE(round_to_dtype(2051.0, Dtype::fp16) == 2052.0);
  REQUIRE(round_to_dtype(65504.0, Dtype::fp16) == 65504.0);
  REQUIRE(round_to_dtype(65519.99, Dtype::fp16) == 65504.0);
  REQUIRE(round_to_dtype(65520.0, Dtype::fp16) == kInf);
  REQUIRE(round_to_dtype(65520.0f, Dtype::fp16) == kInfF);
  REQUIRE(round_to_dtype(3 * 0x1p-26, Dtype::fp16) == 0x1p-24);
  // fp32 and fp64; NaN, ±inf and signed zero pass through.
  REQUIRE(round_to_dtype(0.1, Dtype::fp32) == static_cast<double>(0.1f));
  REQUIRE(round_to_dtype(0.1, Dtype::fp64) == 0.1);
  REQUIRE(std::isnan(round_to_dtype(std::numeric_limits<double>::quiet_NaN(), Dtype::bf16)));
  REQUIRE(round_to_dtype(-kInfF, Dtype::fp16) == -kInfF);
  REQUIRE(std::signbit(round_to_dtype(-0.0f, Dtype::bf16)));
  // A double is rounded once: 1 + 2⁻⁸ + 2⁻⁴⁰ rounds up in bf16, although (float) of it would be the tie.
  REQUIRE(round_to_dtype(1.0 + 0x1p-8 + 0x1p-40, Dtype::bf16) == 1.0 + 0x1p-7);
}

TEST_CASE("semantics: float and double rounding agree on every kind of float input", "[core][semantics]") {
  // The device kernels round in float, the oracle in double; both run round_to_dtype, whose steps are exact in
  // either type. Checked over hash-spread bit patterns (normals, subnormals, huge) and the bf16 bit definition.
  std::vector<float> values = {0.0f,    -0.0f,   1.0f,          65504.0f,      65519.996f, 65520.0f,
                               -65520.0f, 70000.0f, 5.9604645e-8f, 2.9802322e-8f, 1e-8f,      6.1035156e-5f,
                               1.00390625f, 1.01171875f, 3.0e38f, -3.4028235e38f, kInfF, -kInfF};
  for (uint64_t i = 0; i < 200000; ++i) {
    const float f = float_of(static_cast<uint32_t>(mix(i)));
    if (!std::isnan(f)) values.push_back(f);
  }
  for (float x : values) {
    INFO("x = " << x);
    REQUIRE(round_to_dtype(x, Dtype::bf16) == bf16_by_bits(x));
    for (Dtype d : {Dtype::bf16, Dtype::fp16, Dtype::fp32}) {
      const double from_double = round_to_dtype(static_cast<double>(x), d);
      REQUIRE(static_cast<double>(round_to_dtype(x, d)) == from_double);
    }
  }
}
