#pragma once
/// The measured per-op CSV: the GPU backend writes one row per executed op (`verify --backend gpu --ops-csv`) and
/// `hcpsim calibrate` reads it to fit the compute cost model. This is its one owner (writer and reader).
///
/// Columns (header required on reading, columns in any order, extra columns ignored, empty field = not applicable):
///   op_kind      attn_fwd_block | attn_bwd_block | gemm | elementwise | copy | lse_merge | out_correction, or a
///                communication / bookkeeping kind (send_recv, all_to_all, all_gather, reduce_scatter, alloc, free)
///   dtype        bf16 | fp16 | fp32 | fp64 | fp8 (gemm only)
///   head_dim, q_rows, kv_rows, causal   attention blocks (causal: 0/1 or false/true)
///   m, n, k      gemm
///   bytes        bytes read + written
///   flops        Op::flops
///   measured_s   measured duration in seconds (> 0)
///   cp_rank, op_index, stream, kernel, label   where the op ran (written; ignored on reading)

#include <cstdint>
#include <string>
#include <vector>

namespace hcpsim {

/// One row of the measured per-op CSV.
struct MeasuredOpRow {
  std::string op_kind;
  std::string dtype = "bf16";
  int64_t head_dim = 0, q_rows = 0, kv_rows = 0;  ///< attention blocks
  bool causal = false;                            ///< attention blocks
  int64_t m = 0, n = 0, k = 0;                    ///< gemm
  int64_t bytes = 0;
  double flops = 0;
  double measured_s = 0;
  // Written, not read back:
  int64_t cp_rank = 0;
  int64_t op_index = 0;
  std::string stream;  ///< "compute", "cp_stream" or "comm"
  std::string kernel;  ///< attention blocks: "tensor_core" or "clear"
  std::string label;
  int64_t line = 0;  ///< on reading: the 1-based line in the CSV (for messages)
};

/// The CSV text: the header "op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s,cp_rank,
/// op_index,stream,kernel,label" and one line per row; the attention columns only for attention blocks, m, n, k
/// only for gemm; flops and measured_s with 17 significant digits (exact round trip); labels always quoted.
std::string measured_ops_csv(const std::vector<MeasuredOpRow>& rows);

/// Reads a measured CSV; alloc and free rows (no device time) are left out.
/// @throws InputError naming `path`, the line, the column and the fix for a missing file, binary data, a missing
///   header column (op_kind, measured_s), an unknown op_kind, a malformed or negative number, measured_s ≤ 0, or a
///   file without rows.
std::vector<MeasuredOpRow> read_measured_ops_csv(const std::string& path);

}  // namespace hcpsim
