#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/io/measured_ops.hpp"
#include "hcpsim/io/output_file.hpp"
#include "test_util.hpp"

using namespace hcpsim;

TEST_CASE("io: the measured per-op CSV reads back what it writes", "[io]") {
  MeasuredOpRow attn;
  attn.op_kind = "attn_fwd_block";
  attn.head_dim = 128;
  attn.q_rows = 1024;
  attn.kv_rows = 2048;
  attn.causal = true;
  attn.flops = 0.1 + 0.2;  // not a short decimal: needs all 17 digits to round-trip
  attn.measured_s = 1.25e-5;
  attn.stream = "compute";
  attn.kernel = "tensor_core";
  attn.label = "fwd step 1, \"lower\"";
  MeasuredOpRow gemm;
  gemm.op_kind = "gemm";
  gemm.dtype = "fp8";
  gemm.m = 4096;
  gemm.n = 8192;
  gemm.k = 2048;
  gemm.flops = 2.0 * 4096 * 8192 * 2048;
  gemm.measured_s = 3e-4;
  const std::string text = measured_ops_csv({attn, gemm});
  // Attention columns only for attention, m/n/k only for gemm; the label always quoted with doubled quotes.
  REQUIRE(text.find("attn_fwd_block,bf16,128,1024,2048,1,,,,0,0.30000000000000004,1.2500000000000001e-05,0,0,"
                    "compute,tensor_core,\"fwd step 1, \"\"lower\"\"\"\n") != std::string::npos);
  REQUIRE(text.find("\ngemm,fp8,,,,,4096,8192,2048,") != std::string::npos);
  const auto dir = test::scratch_dir("io_measured_ops");
  const std::string path = (dir / "ops.csv").string();
  write_output_file(path, text + "alloc,bf16,,,,,,,,0,0,1e-9,0,2,compute,,\"a\"\n", "test file");
  const auto rows = read_measured_ops_csv(path);
  REQUIRE(rows.size() == 2);  // the alloc row takes no device time and is left out
  REQUIRE(rows[0].op_kind == "attn_fwd_block");
  REQUIRE(rows[0].causal);
  REQUIRE(rows[0].kv_rows == 2048);
  REQUIRE(rows[0].flops == attn.flops);
  REQUIRE(rows[0].measured_s == attn.measured_s);
  REQUIRE(rows[0].line == 2);
  REQUIRE(rows[1].dtype == "fp8");
  REQUIRE(rows[1].k == 2048);
  REQUIRE(rows[1].flops == gemm.flops);
  std::filesystem::remove_all(dir);
}

TEST_CASE("io: an attention row's causal flag is read strictly", "[io]") {
  // 'yes', an empty cell or no causal column were read as non-causal: a causal kernel calibrated the no-mask table.
  const auto dir = test::scratch_dir("io_measured_causal");
  const std::string path = (dir / "ops.csv").string();
  auto read = [&](const std::string& text) {
    std::filesystem::remove(path);
    write_output_file(path, text, "test file");
    return test::input_error_of([&] { return read_measured_ops_csv(path); });
  };
  const std::string header = "op_kind,head_dim,q_rows,kv_rows,causal,flops,measured_s\n";
  CHECK(read(header + "attn_fwd_block,128,4096,4096,yes,3.44e10,7.0e-5\n")
            .find(":2: causal: 'yes' is not a mask flag; fix: write 1 (causal) or 0 (no mask)") != std::string::npos);
  CHECK(read(header + "attn_bwd_block,128,4096,4096,,3.44e10,7.0e-5\n")
            .find(":2: causal: is empty for an attention row") != std::string::npos);
  CHECK(read("op_kind,head_dim,q_rows,kv_rows,flops,measured_s\nattn_fwd_block,128,4096,4096,3.44e10,7.0e-5\n")
            .find(":2: causal: has no column in the header for an attention row") != std::string::npos);
  // Every accepted spelling, and rows that have no mask need no flag.
  for (const std::string yes : {"1", "true", "True", "TRUE"}) {
    std::filesystem::remove(path);
    write_output_file(path, header + "attn_fwd_block,128,64,64," + yes + ",1e6,1e-6\n", "test file");
    CHECK(read_measured_ops_csv(path).at(0).causal);
  }
  for (const std::string no : {"0", "false", "False", "FALSE"}) {
    std::filesystem::remove(path);
    write_output_file(path, header + "attn_fwd_block,128,64,64," + no + ",1e6,1e-6\n", "test file");
    CHECK_FALSE(read_measured_ops_csv(path).at(0).causal);
  }
  std::filesystem::remove(path);
  write_output_file(path, "op_kind,m,n,k,flops,measured_s\ngemm,64,64,64,524288,1e-6\n", "test file");
  CHECK(read_measured_ops_csv(path).size() == 1);
  std::filesystem::remove_all(dir);
}
