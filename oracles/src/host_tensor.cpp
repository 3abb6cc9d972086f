#include "hcpsim/oracles/host_tensor.hpp"

#include <algorithm>
#include <string>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

template <typename T>
BasicHostTensor<T>::BasicHostTensor(int64_t batch, int64_t rows, int64_t heads, int64_t width, T fill)
    : dims_{batch, rows, heads, width} {
  HCPSIM_ASSERT(batch >= 0, "HostTensor: negative batch");
  HCPSIM_ASSERT(rows >= 0, "HostTensor: negative rows");
  HCPSIM_ASSERT(heads >= 0, "HostTensor: negative heads");
  HCPSIM_ASSERT(width >= 0, "HostTensor: negative width");
  values_.assign(static_cast<size_t>(batch * rows * heads * width), fill);
}

namespace {
std::string index_text(int64_t b, int64_t r, int64_t h, int64_t w, const std::array<int64_t, 4>& dims) {
  return "HostTensor::at(" + std::to_string(b) + ", " + std::to_string(r) + ", " + std::to_string(h) + ", " +
         std::to_string(w) + ") outside [" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " +
         std::to_string(dims[2]) + ", " + std::to_string(dims[3]) + "]";
}
}  // namespace

template <typename T>
void BasicHostTensor<T>::check_index(int64_t b, int64_t r, int64_t h, int64_t w) const {
  // The message is built only on failure (HCPSIM_ASSERT evaluates it lazily).
  HCPSIM_ASSERT(b >= 0 && b < dims_[0], index_text(b, r, h, w, dims_));
  HCPSIM_ASSERT(r >= 0 && r < dims_[1], index_text(b, r, h, w, dims_));
  HCPSIM_ASSERT(h >= 0 && h < dims_[2], index_text(b, r, h, w, dims_));
  HCPSIM_ASSERT(w >= 0 && w < dims_[3], index_text(b, r, h, w, dims_));
}

template <typename T>
T& BasicHostTensor<T>::at(int64_t b, int64_t r, int64_t h, int64_t w) {
  check_index(b, r, h, w);
  return (*this)(b, r, h, w);
}

template <typename T>
const T& BasicHostTensor<T>::at(int64_t b, int64_t r, int64_t h, int64_t w) const {
  check_index(b, r, h, w);
  return (*this)(b, r, h, w);
}

template <typename T>
void BasicHostTensor<T>::fill(T value) {
  std::fill(values_.begin(), values_.end(), value);
}

template class BasicHostTensor<double>;

}  // namespace hcpsim
