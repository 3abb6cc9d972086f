// `hcpsim collective`: nccl-tests-style rows from the collective model, and its usage errors.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "catch_compat.hpp"
#include "run_command.hpp"

using hcpsim::test::run_hcpsim;

TEST_CASE("apps: collective prints nccl-tests rows with the algorithm and protocol", "[apps][collective]") {
  const auto r = run_hcpsim("collective all_reduce --cluster dgx-h100 --min-bytes 8 --max-bytes 64M --step-factor 256");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // 8 B: ring LL, 6.6 + 14 · 0.6 = 15.0 µs. 64 MiB: NVLS, 74 µs + 1.75 · 64 MiB / 470 GB/s = 323.87 µs.
  REQUIRE(r.output.find("           8            2  float    sum      15.00     0.00     0.00  ring       LL\n") !=
          std::string::npos);
  REQUIRE(r.output.find("      524288       131072  float    sum      21.51    24.38    42.66  ring       LL\n") !=
          std::string::npos);
  CHECK(r.output.find("Tree algorithm is not modelled") == std::string::npos);  // one node: NCCL uses ring/NVLS
  const auto nodes4 = run_hcpsim("collective all_reduce --cluster dgx-h100 --nodes 4 --max-bytes 64");
  CHECK(nodes4.output.find("# NCCL's Tree algorithm is not modelled: across nodes NCCL may pick it for small sizes")
        != std::string::npos);
  const auto big = run_hcpsim("collective all_reduce --cluster dgx-h100 --min-bytes 64M --max-bytes 64M");
  REQUIRE(big.output.find("    67108864     16777216  float    sum     323.87   207.21   362.61  nvls       Simple\n") !=
          std::string::npos);
  // Alltoall across 2 nodes: no reduction; the row goes to --csv as well.
  const auto dir = std::filesystem::temp_directory_path() / "hcpsim_collective_cli";
  std::filesystem::create_directories(dir);
  const auto csv = (dir / "a2a.csv").string();
  const auto a = run_hcpsim("collective alltoall --cluster dgx-h100 --nodes 2 --min-bytes 1G --max-bytes 1G --csv " + csv);
  INFO(a.output);
  REQUIRE(a.exit_code == 0);
  std::ifstream in(csv);
  std::stringstream ss;
  ss << in.rdbuf();
  REQUIRE(ss.str() == "size_bytes,count,type,redop,time_us,algbw_GBps,busbw_GBps,algorithm,protocol\n"
                      "1073741824,16777216,float,none,11207.21,95.81,89.82,pairwise,Simple\n");  // count per rank
  std::filesystem::remove_all(dir);
  // As nccl-tests: all_gather, reduce_scatter and alltoall print each rank's count, (size/4)/ranks rounded down to
  // 4 elements (16 B), and the size those counts move; 8 B over 8 ranks is less than one element each: size 0.
  const auto row = [](long bytes, long count, const char* redop) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "\n %11ld %12ld %6s %6s ", bytes, count, "float", redop);
    return std::string(buf);
  };
  const auto g = run_hcpsim("collective all_gather --cluster dgx-h100 --min-bytes 8 --max-bytes 1M --step-factor 131072");
  INFO(g.output);
  REQUIRE(g.exit_code == 0);
  CHECK(g.output.find(row(0, 0, "none")) != std::string::npos);
  CHECK(g.output.find(row(1048576, 32768, "none")) != std::string::npos);
  const auto rs = run_hcpsim("collective reduce_scatter --cluster dgx-h100 --min-bytes 1000 --max-bytes 1000");
  CHECK(rs.output.find(row(896, 28, "sum")) != std::string::npos);  // 250 floats / 8 ranks -> 28 each
  const auto ar = run_hcpsim("collective all_reduce --cluster dgx-h100 --min-bytes 7 --max-bytes 7");
  CHECK(ar.output.find(row(4, 1, "sum")) != std::string::npos);  // whole floats only
}

TEST_CASE("apps: collective rejects bad sizes, ranges, factors and operations with exit 2", "[apps][collective]") {
  for (const char* args : {"collective all_reduce --cluster dgx-h100 --min-bytes 1X",
                           "collective all_reduce --cluster dgx-h100 --min-bytes 2M --max-bytes 1M",
                           "collective all_reduce --cluster dgx-h100 --step-factor 1",
                           "collective broadcast --cluster dgx-h100", "collective all_gather --cluster dgx-x",
                           "collective all_reduce --cluster dgx-h100 --gpus-per-node 0"}) {
    const auto r = run_hcpsim(args);
    INFO(args << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find("error:") != std::string::npos);
  }
  // nccl-tests' closing line: the mean busbw of the rows (65.50 and 89.45 GB/s at 1 and 2 MiB).
  CHECK(run_hcpsim("collective all_reduce --cluster dgx-h100 --min-bytes 1M --max-bytes 2M").output.find(
            "# Avg bus bandwidth    : 77.48") != std::string::npos);
  const auto r = run_hcpsim("collective all_reduce --cluster dgx-h100 --min-bytes 12Q");
  CHECK(r.output.find("'12Q' is not a size") != std::string::npos);
  // Sizes whose shift overflowed int64 (8589934592G read as a negative size; 999999999999G as rows up to 2^61) and a
  // node count that ran out of memory with the oracle's advice are named, not run.
  for (const auto& [args, message] :
       {std::pair{"--min-bytes 8589934592G --max-bytes 8589934592G", "--min-bytes: '8589934592G' is more than 1 PiB"},
        std::pair{"--min-bytes 1G --max-bytes 999999999999G", "--max-bytes: '999999999999G' is more than 1 PiB"},
        std::pair{"--nodes 100000000", "--nodes: 100000000 is outside 1..100000"},
        // One rank: NCCL copies locally; rows of 0 us and 0 GB/s (printed before) say nothing.
        std::pair{"--gpus-per-node 1", "--gpus-per-node: a group of 1 rank communicates nothing"},
        // The option the user gave is the one named (it blamed the default --min-bytes 8), and a zero size is
        // called that (its fix said "--min-bytes <= --max-bytes", which 0 <= 64 already was).
        std::pair{"--max-bytes 2", "--max-bytes: --min-bytes 8 B (the default) is above --max-bytes 2 B; fix: give "
                                   "--max-bytes 8 or more, or a smaller --min-bytes"},
        std::pair{"--min-bytes 4G", "--min-bytes: --min-bytes 4294967296 B is above --max-bytes 1073741824 B (the "
                                    "default); fix: give --min-bytes 1073741824 or less, or a larger --max-bytes"},
        std::pair{"--min-bytes 0 --max-bytes 64", "--min-bytes: 0 B: a collective moves at least 1 byte"}}) {
    const auto bad = run_hcpsim(std::string("collective all_reduce --cluster dgx-h100 ") + args);
    INFO(args << "\n" << bad.output);
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find(message) != std::string::npos);
  }
  // A range with no row of one element: it printed a 0-element row and exited 0. The fix names the least size.
  for (const auto& [args, message] :
       {std::pair{"all_reduce --min-bytes 3 --max-bytes 3", "--max-bytes: 3 B holds no float element (4 B)"},
        std::pair{"all_gather --nodes 2 --max-bytes 200",
                  "--max-bytes: 200 B holds no float element per rank for 16 ranks"}}) {
    const auto bad = run_hcpsim(std::string("collective --cluster dgx-h100 ") + args);
    INFO(args << "\n" << bad.output);
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find(message) != std::string::npos);
  }
  CHECK(run_hcpsim("collective all_gather --cluster dgx-h100 --nodes 2 --max-bytes 200").output.find(
            "fix: give --max-bytes 256 or more") != std::string::npos);
  // A range that reaches one element keeps nccl-tests' empty rows below it: 128 B = 4 floats per rank over 8.
  const auto ok = run_hcpsim("collective all_gather --cluster dgx-h100 --min-bytes 64 --max-bytes 128");
  CHECK(ok.exit_code == 0);
  CHECK(ok.output.find("           0            0  float   none") != std::string::npos);
  CHECK(ok.output.find("         128            4  float   none") != std::string::npos);
}
