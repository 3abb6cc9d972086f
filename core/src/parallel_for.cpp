#include "hcpsim/core/parallel_for.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace hcpsim {

void parallel_for(int64_t count, int threads, const std::function<void(int64_t)>& body) {
  if (count <= 0) return;
  if (threads <= 1 || count == 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    }
  };
  const auto helpers = static_cast<size_t>(std::min<int64_t>(threads, count) - 1);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  try {
    for (size_t t = 0; t < helpers; ++t) pool.emplace_back(worker);
  } catch (...) {
    next.store(count);  // no new items; the started threads finish theirs
    for (std::thread& t : pool) t.join();
    throw;
  }
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace hcpsim
