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
