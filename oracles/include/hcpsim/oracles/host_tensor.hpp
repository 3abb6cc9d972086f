#pragma once
/// An owning 4-D host tensor [b, rows, heads, width] in bshd order, the element store of the CPU oracle.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hcpsim {

/// Owning row-major 4-D tensor with dims [batch, rows, heads, width] (bshd: `rows` is the sequence dimension,
/// `width` the head dimension; softmax_lse tensors have width 1). Element (b, r, h, w) lives at flat index
/// ((b·rows + r)·heads + h)·width + w. The scalar type is a template parameter so an fp32 oracle can be added
/// later; the oracle currently instantiates only `HostTensor` (= double, see below).
/// `operator()` is unchecked (it sits in hot loops); `at()` checks every index with HCPSIM_ASSERT.
template <typename T>
class BasicHostTensor {
 public:
  using Scalar = T;

  /// An empty tensor with all dims 0.
  BasicHostTensor() = default;
  /// A tensor of the given dims (each ≥ 0, HCPSIM_ASSERT), every element set to `fill`.
  BasicHostTensor(int64_t batch, int64_t rows, int64_t heads, int64_t width, T fill = T(0));

  [[nodiscard]] int64_t batch() const { return dims_[0]; }
  [[nodiscard]] int64_t rows() const { return dims_[1]; }
  [[nodiscard]] int64_t heads() const { return dims_[2]; }
  [[nodiscard]] int64_t width() const { return dims_[3]; }
  /// Dims {batch, rows, heads, width}.
  [[nodiscard]] const std::array<int64_t, 4>& shape() const { return dims_; }
  /// batch·rows·heads·width.
  [[nodiscard]] int64_t elements() const { return static_cast<int64_t>(values_.size()); }

  /// Flat row-major index of (b, r, h, w); unchecked.
  [[nodiscard]] int64_t index(int64_t b, int64_t r, int64_t h, int64_t w) const {
    return ((b * dims_[1] + r) * dims_[2] + h) * dims_[3] + w;
  }
  /// Unchecked element access.
  T& operator()(int64_t b, int64_t r, int64_t h, int64_t w) { return values_[static_cast<std::size_t>(index(b, r, h, w))]; }
  const T& operator()(int64_t b, int64_t r, int64_t h, int64_t w) const {
    return values_[static_cast<std::size_t>(index(b, r, h, w))];
  }
  /// Bounds-checked element access (HCPSIM_ASSERT on an index outside its dim).
  T& at(int64_t b, int64_t r, int64_t h, int64_t w);
  const T& at(int64_t b, int64_t r, int64_t h, int64_t w) const;

  /// Contiguous element storage, row-major as above.
  T* data() { return values_.data(); }
  const T* data() const { return values_.data(); }
  std::vector<T>& values() { return values_; }
  const std::vector<T>& values() const { return values_; }

  /// Sets every element to `value`.
  void fill(T value);
  /// True when both tensors have the same dims.
  [[nodiscard]] bool same_shape(const BasicHostTensor& other) const { return dims_ == other.dims_; }

 private:
  void check_index(int64_t b, int64_t r, int64_t h, int64_t w) const;

  std::array<int64_t, 4> dims_{0, 0, 0, 0};
  std::vector<T> values_;
};

/// The oracle's tensor: float64 throughout (docs/algorithm.md §6: the reference and the executor run in fp64).
using HostTensor = BasicHostTensor<double>;

extern template class BasicHostTensor<double>;

}  // namespace hcpsim
