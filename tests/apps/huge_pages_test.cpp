// huge_page_tunables (apps/hcpsim/huge_pages.hpp): the GLIBC_TUNABLES value hcpsim restarts with, or none.
#include <optional>
#include <string>

#include "../../apps/hcpsim/huge_pages.hpp"
#include "catch_compat.hpp"

using hcpsim::app::huge_page_tunables;

TEST_CASE("huge pages: the tunable is added to what the user set, and never twice", "[apps][huge_pages]") {
  REQUIRE(huge_page_tunables(nullptr, false) == std::optional<std::string>("glibc.malloc.hugetlb=1"));
  REQUIRE(huge_page_tunables("", false) == std::optional<std::string>("glibc.malloc.hugetlb=1"));
  REQUIRE(huge_page_tunables("glibc.malloc.check=0", false) ==
          std::optional<std::string>("glibc.malloc.check=0:glibc.malloc.hugetlb=1"));
  // A process restarted with the value does not restart again.
  REQUIRE_FALSE(huge_page_tunables(huge_page_tunables(nullptr, false)->c_str(), false).has_value());
  // The user's own value stands, whatever it is and wherever it is in the list.
  REQUIRE_FALSE(huge_page_tunables("glibc.malloc.hugetlb=0", false).has_value());
  REQUIRE_FALSE(huge_page_tunables("glibc.malloc.check=0:glibc.malloc.hugetlb=2", false).has_value());
  // HCPSIM_NO_HUGEPAGES: no restart at all.
  REQUIRE_FALSE(huge_page_tunables(nullptr, true).has_value());
  REQUIRE_FALSE(huge_page_tunables("glibc.malloc.check=0", true).has_value());
}
