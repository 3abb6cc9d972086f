#include "hcpsim/io/csv.hpp"

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

[[noreturn]] void csv_error(const std::string& path, int64_t line, const std::string& what, const std::string& fix) {
  throw InputError(SourceLoc{path, static_cast<int>(line), 0, ""}, "", what, fix);
}

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && s[b] == ' ') ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

/// Reads the quoted field that starts at text[i] == '"'; returns the index after the closing quote.
size_t read_quoted(std::string_view text, size_t i, std::string& field, int64_t& line, const std::string& path) {
  const int64_t start_line = line;
  for (++i; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      if (i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
        continue;
      }
      return i + 1;
    }
    if (c == '\n') ++line;
    if (c == '\0') csv_error(path, line, "binary data (a NUL byte) in the CSV", "give a text CSV file");
    field.push_back(c);
  }
  csv_error(path, start_line, "a quoted field is never closed", "close the field with a double quote");
}

}  // namespace

std::string csv_quoted(std::string_view text) {
  std::string q = "\"";
  for (char c : text) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string csv_field(std::string_view text) {
  return text.find_first_of(",\"\r\n") == std::string_view::npos ? std::string(text) : csv_quoted(text);
}

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& path, const CsvReadOptions& options) {
  std::vector<CsvRecord> records;
  int64_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    CsvRecord rec;
    rec.line = line;
    if (options.skip_comment_lines && text[i] == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      ++i;
      ++line;
      continue;
    }
    bool record_done = false;
    while (!record_done) {
      std::string field;
      bool quoted = false;
      while (i < text.size() && text[i] == ' ' && options.trim_unquoted) ++i;
      if (i < text.size() && text[i] == '"') {
        quoted = true;
        i = read_quoted(text, i, field, line, path);
        while (i < text.size() && (text[i] == ' ' || text[i] == '\r')) ++i;
        if (i < text.size() && text[i] != ',' && text[i] != '\n')
          csv_error(path, line, "text after a closing quote", "quote the whole field or remove the quotes");
      }
      for (; i < text.size() && text[i] != ',' && text[i] != '\n'; ++i) {
        if (text[i] == '\0') csv_error(path, line, "binary data (a NUL byte) in the CSV", "give a text CSV file");
        field.push_back(text[i]);
      }
      rec.fields.push_back(quoted || !options.trim_unquoted ? field : trimmed(field));
      if (i >= text.size() || text[i] == '\n') record_done = true;
      ++i;  // past the comma or the line feed
    }
    const bool empty_line = rec.fields.size() == 1 && rec.fields[0].empty();
    if (!empty_line) records.push_back(std::move(rec));
    ++line;
  }
  return records;
}

}  // namespace hcpsim
