#include "hcpsim/io/output_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

constexpr const char* kWriteFix = "check that the directory exists, is writable and has free space";

SourceLoc located_at(const std::string& path) { return SourceLoc{path, 0, 0, ""}; }

}  // namespace

std::string output_temp_path(const std::string& path) { return path + ".tmp"; }

void write_output_file(const std::string& path, const std::string& text, const std::string& what,
                       const std::string& key) {
  const std::string tmp = output_temp_path(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw InputError(located_at(path), key,
                     "cannot open " + what + " temporary file '" + tmp + "' for writing: " + std::strerror(errno),
                     kWriteFix);
  }
  const size_t written = std::fwrite(text.data(), 1, text.size(), f);
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (written != text.size() || !closed) {
    const int reason = written != text.size() ? write_errno : errno;
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw InputError(located_at(path), key, "cannot write " + what + " '" + tmp + "': " + std::strerror(reason),
                     kWriteFix);
  }
  commit_output_file(tmp, path, what, key);
}

void commit_output_file(const std::string& temp_path, const std::string& path, const std::string& what,
                        const std::string& key) {
  std::error_code ec;
  std::filesystem::rename(temp_path, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp_path, ignored);
    throw InputError(located_at(path), key,
                     "cannot rename " + what + " '" + temp_path + "' onto '" + path + "': " + ec.message(), kWriteFix);
  }
}

}  // namespace hcpsim
