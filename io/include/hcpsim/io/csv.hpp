#pragma once
/// The one CSV writer and reader (RFC 4180: comma-separated fields, a field in double quotes may hold commas,
/// line breaks and doubled quotes). Used by the plan CSV, the link CSV and the measured per-op CSV.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hcpsim {

/// `text` as a quoted field: in double quotes, each inner quote doubled (RFC 4180 §2.5–2.7). For columns that
/// are always quoted (labels), so their bytes do not depend on their content.
std::string csv_quoted(std::string_view text);

/// `text` as a field: unchanged when it holds no comma, double quote, CR or LF, else csv_quoted(text).
std::string csv_field(std::string_view text);

/// One parsed record.
struct CsvRecord {
  std::vector<std::string> fields;  ///< unquoted; a record of n commas has n + 1 fields
  int64_t line = 0;                 ///< 1-based line on which the record starts
};

/// How parse_csv treats what RFC 4180 leaves open.
struct CsvReadOptions {
  bool skip_comment_lines = true;  ///< a line starting with '#' outside quotes is no record
  bool trim_unquoted = true;       ///< spaces around an unquoted field (and a trailing CR) are dropped
};

/// Parses CSV text. Records end at LF or CRLF outside quotes; empty lines are skipped.
/// @param path  named in errors. @throws InputError (file `path`, the line, a fix) for a NUL byte, a quote that is
///   never closed, or text between a closing quote and the next comma.
std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& path, const CsvReadOptions& options = {});

}  // namespace hcpsim
