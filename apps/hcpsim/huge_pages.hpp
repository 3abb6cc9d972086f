#pragma once
/// Whether and how `hcpsim` restarts itself with glibc's huge-page tunable (main.cpp restart_with_huge_pages,
/// README "Memory settings of the process"). Pure: it reads nothing from the process, so tests can check it.

#include <optional>
#include <string>

namespace hcpsim::app {

/// The GLIBC_TUNABLES value to restart with, or nullopt for no restart.
/// @param current the present GLIBC_TUNABLES value (nullptr when unset)
/// @param opted_out whether HCPSIM_NO_HUGEPAGES is set
/// @return "glibc.malloc.hugetlb=1" appended to `current` with glibc's ':' separator (alone when `current` is
///   unset or empty); nullopt when opted out or when `current` already names glibc.malloc.hugetlb (any value: the
///   user's choice stands, and a restarted process does not restart again).
std::optional<std::string> huge_page_tunables(const char* current, bool opted_out);

}  // namespace hcpsim::app
