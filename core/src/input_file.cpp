#include "hcpsim/core/input_file.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <system_error>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

[[noreturn]] void refuse_text(const InputFileSpec& spec, const std::string& text, const std::string& fix) {
  SourceLoc where;
  where.file = spec.path;
  throw InputError(where, "", text, fix);
}
[[noreturn]] void refuse(const InputFileSpec& spec, const std::string& problem, const std::string& fix) {
  refuse_text(spec, "the " + spec.what + " " + problem, fix);
}

std::mutex& inputs_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::string>& inputs() {
  static std::vector<std::string> v;
  return v;
}

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

[[noreturn]] void refuse_too_large(const InputFileSpec& spec) {
  refuse(spec, "is larger than " + mib(spec.max_bytes), "give a " + spec.what + " of at most " + mib(spec.max_bytes));
}

/// Reads `in` to its end, refusing more than spec.max_bytes.
std::string read_bounded(std::istream& in, const InputFileSpec& spec) {
  std::string text;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    const auto got = static_cast<size_t>(in.gcount());
    if (text.size() + got > spec.max_bytes)
      refuse_too_large(spec);
    text.append(buffer, got);
  }
  if (in.bad()) refuse(spec, "could not be read", spec.fix);
  return text;
}

}  // namespace

std::string read_input_file(const InputFileSpec& spec) {
  if (spec.allow_stdin && spec.path == "-") return read_bounded(std::cin, spec);
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(spec.path, ec);
  if (ec || !std::filesystem::exists(st)) refuse_text(spec, "cannot open the " + spec.what, spec.fix);
  if (std::filesystem::is_directory(st)) refuse(spec, "is a directory", spec.fix);
  if (!std::filesystem::is_regular_file(st))
    refuse(spec, "is not a regular file (a FIFO, device or socket)", "give a regular file" +
                     std::string(spec.allow_stdin ? ", or '-' to read standard input" : ""));
  const auto size = std::filesystem::file_size(spec.path, ec);
  if (!ec && size > spec.max_bytes)
    refuse_too_large(spec);
  std::ifstream in(spec.path, std::ios::binary);
  if (!in) refuse_text(spec, "cannot open the " + spec.what, spec.fix);
  note_input_file(spec.path);
  return read_bounded(in, spec);
}

void note_input_file(const std::string& path) {
  const std::lock_guard<std::mutex> lock(inputs_mutex());
  for (const std::string& p : inputs())
    if (p == path) return;
  inputs().push_back(path);
}

std::vector<std::string> input_files_read() {
  const std::lock_guard<std::mutex> lock(inputs_mutex());
  return inputs();
}

}  // namespace hcpsim
