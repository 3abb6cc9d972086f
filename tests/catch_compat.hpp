#pragma once
// Catch2 v2 (Debian 12) has no SKIP(): GPU tests print a marker that CTest's SKIP_REGULAR_EXPRESSION turns
// into "Skipped"; CPU tests that need an optional tool (e.g. xmllint) print TEST_SKIP the same way.
#include <catch2/catch.hpp>
#define GPU_SKIP_IF_NO_DEVICE(msg) \
  do {                             \
    WARN("GPU_SKIP: " << msg);     \
    return;                        \
  } while (0)
#define TEST_SKIP_BECAUSE(msg) \
  do {                         \
    WARN("TEST_SKIP: " << msg); \
    return;                    \
  } while (0)
