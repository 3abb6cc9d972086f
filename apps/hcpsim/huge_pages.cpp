#include "huge_pages.hpp"

#include <cstring>

namespace hcpsim::app {

std::optional<std::string> huge_page_tunables(const char* current, bool opted_out) {
  if (opted_out) return std::nullopt;
  if (current != nullptr && std::strstr(current, "glibc.malloc.hugetlb") != nullptr) return std::nullopt;
  const std::string before = current != nullptr ? current : "";
  return (before.empty() ? before : before + ":") + "glibc.malloc.hugetlb=1";
}

}  // namespace hcpsim::app
