#include "hcpsim/io/measured_ops.hpp"

#include "hcpsim/core/input_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

#include "hcpsim/core/error.hpp"
#include "hcpsim/io/csv.hpp"

namespace hcpsim {

namespace {

constexpr const char* kHeaderFix =
    "give a per-op CSV with the header op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s";

[[noreturn]] void fail(const std::string& path, int64_t line, const std::string& key, const std::string& problem,
                       const std::string& fix) {
  SourceLoc l;
  l.file = path;
  l.line = static_cast<int>(line);
  throw InputError(l, key, problem, fix);
}

/// A NUL byte anywhere is binary data: named at its line before any parsing.
void check_text(const std::string& text, const std::string& path) {
  const size_t nul = text.find('\0');
  if (nul == std::string::npos) return;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
  fail(path, line, "", "binary data in the measured CSV", kHeaderFix);
}

bool is_attention(const std::string& kind) { return kind == "attn_fwd_block" || kind == "attn_bwd_block"; }

}  // namespace

std::string measured_ops_csv(const std::vector<MeasuredOpRow>& rows) {
  std::string csv = "op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s,cp_rank,op_index,stream,"
                    "kernel,label\n";
  for (const MeasuredOpRow& r : rows) {
    const bool attention = is_attention(r.op_kind), gemm = r.op_kind == "gemm";
    auto when = [](bool on, int64_t v) { return on ? std::to_string(v) : std::string(); };
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{:.17g},{:.17g},{},{},{},{},{}\n", r.op_kind, r.dtype,
                       when(attention, r.head_dim), when(attention, r.q_rows), when(attention, r.kv_rows),
                       attention ? (r.causal ? "1" : "0") : "", when(gemm, r.m), when(gemm, r.n), when(gemm, r.k),
                       r.bytes, r.flops, r.measured_s, r.cp_rank, r.op_index, r.stream, r.kernel, csv_quoted(r.label));
  }
  return csv;
}

std::vector<MeasuredOpRow> read_measured_ops_csv(const std::string& path) {
  const std::string text = read_input_file({path, "measured CSV", kMaxCsvBytes, false, "check the path"});
  check_text(text, path);
  std::map<std::string, size_t> col;
  std::vector<MeasuredOpRow> rows;
  for (const CsvRecord& record : parse_csv(text, path)) {
    const int64_t line_no = record.line;
    const auto& cells = record.fields;
    if (col.empty()) {
      for (size_t i = 0; i < cells.size(); ++i) {
        // A spreadsheet's UTF-8 byte order mark in front of the first column name is not part of it.
        std::string name = cells[i];
        if (i == 0 && name.rfind("\xEF\xBB\xBF", 0) == 0) name.erase(0, 3);
        if (name.empty()) continue;  // a trailing comma's empty column
        if (!col.emplace(name, i).second)
          fail(path, line_no, name,
               fmt::format("the header names column '{}' twice (columns {} and {})", name, col.at(name) + 1, i + 1),
               "keep one '" + name + "' column");
      }
      for (const char* need : {"op_kind", "measured_s"})
        if (!col.count(need))
          fail(path, line_no, need, std::string("the header has no '") + need + "' column",
               "start the file with a header such as op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,"
               "measured_s");
      continue;
    }
    auto cell = [&](const char* name) -> std::string {
      const auto it = col.find(name);
      return it == col.end() || it->second >= cells.size() ? std::string() : cells[it->second];
    };
    auto integer = [&](const char* name) -> int64_t {
      const std::string c = cell(name);
      if (c.empty()) return 0;
      try {
        size_t used = 0;
        const long long v = std::stoll(c, &used);
        if (used != c.size() || v < 0) throw std::invalid_argument(c);
        return v;
      } catch (const std::exception&) {
        fail(path, line_no, name, "'" + c + "' is not a non-negative integer", "write a plain integer");
      }
    };
    auto real = [&](const char* name) -> double {
      const std::string c = cell(name);
      if (c.empty()) return 0;
      try {
        size_t used = 0;
        const double v = std::stod(c, &used);
        if (used != c.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument(c);
        return v;
      } catch (const std::exception&) {
        fail(path, line_no, name, "'" + c + "' is not a finite non-negative number", "write e.g. 1.25e-05");
      }
    };
    MeasuredOpRow op;
    op.line = line_no;
    op.op_kind = cell("op_kind");
    static const char* const kKinds[] = {"attn_fwd_block", "attn_bwd_block", "gemm", "elementwise", "copy",
                                         "lse_merge", "out_correction", "send_recv", "all_to_all", "all_gather",
                                         "reduce_scatter", "alloc", "free"};
    if (std::find(std::begin(kKinds), std::end(kKinds), op.op_kind) == std::end(kKinds))
      fail(path, line_no, "op_kind", "unknown op_kind '" + op.op_kind + "'",
           "use an op kind of the schedule IR: attn_fwd_block, attn_bwd_block, gemm, elementwise, copy, lse_merge, "
           "out_correction (fitted) or send_recv, all_to_all, all_gather, reduce_scatter, alloc, free (skipped)");
    if (op.op_kind == "alloc" || op.op_kind == "free") continue;  // take no device time
    if (!cell("dtype").empty()) op.dtype = cell("dtype");
    op.head_dim = integer("head_dim");
    op.q_rows = integer("q_rows");
    op.kv_rows = integer("kv_rows");
    // An attention row's mask decides which table it calibrates: read it strictly (any other word, an empty cell
    // or no causal column was read as non-causal, and a causal kernel went into the non-causal table).
    const std::string c = cell("causal");
    const bool attention = op.op_kind == "attn_fwd_block" || op.op_kind == "attn_bwd_block";
    if (c == "1" || c == "true" || c == "True" || c == "TRUE") {
      op.causal = true;
    } else if (c == "0" || c == "false" || c == "False" || c == "FALSE") {
      op.causal = false;
    } else if (attention) {
      fail(path, line_no, "causal",
           c.empty() ? std::string(col.count("causal") ? "is empty" : "has no column in the header") +
                           " for an attention row"
                     : "'" + c + "' is not a mask flag",
           "write 1 (causal) or 0 (no mask), or true / false, in a 'causal' column");
    }
    op.m = integer("m");
    op.n = integer("n");
    op.k = integer("k");
    op.bytes = integer("bytes");
    op.flops = real("flops");
    op.measured_s = real("measured_s");
    if (op.measured_s <= 0) fail(path, line_no, "measured_s", "must be > 0", "give the measured duration in seconds");
    rows.push_back(op);
  }
  if (col.empty())
    fail(path, 0, "", "the measured CSV is empty",
         "give a per-op CSV with the header op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s");
  if (rows.empty()) fail(path, 0, "", "the measured CSV has a header but no rows", "measure at least one op");
  return rows;
}

}  // namespace hcpsim
