#include "hcpsim/io/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/input_file.hpp"

namespace hcpsim {

namespace {

constexpr const char* kWriteFix = "check that the directory exists, is writable and has free space";

SourceLoc located_at(const std::string& path) { return SourceLoc{path, 0, 0, ""}; }

// Temporary files being written, removed by the SIGINT/SIGTERM/SIGHUP handler: fixed slots of plain chars, so that the
// handler only reads memory and calls unlink (async-signal-safe, POSIX.1-2008 §2.4.3).
constexpr size_t kTempSlots = 16;
constexpr size_t kTempPathMax = 4096;
std::array<std::array<char, kTempPathMax>, kTempSlots> g_temp_paths{};
std::array<std::atomic<bool>, kTempSlots> g_temp_used{};
std::mutex g_temp_mutex;
std::once_flag g_handlers_installed;

extern "C" void remove_temps_and_reraise(int sig) {
  for (size_t i = 0; i < kTempSlots; ++i)
    if (g_temp_used[i].load()) ::unlink(g_temp_paths[i].data());
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

/// Registers `tmp` for removal on SIGINT/SIGTERM/SIGHUP; returns its slot, or kTempSlots when every slot is taken or
/// the path is too long (then only the normal error paths remove it).
size_t track_temp(const std::string& tmp) {
  std::call_once(g_handlers_installed, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP})  // Ctrl-C, kill / timeout, a closed terminal or ssh session
      if (std::signal(sig, remove_temps_and_reraise) == SIG_IGN) std::signal(sig, SIG_IGN);  // keep an ignore
  });
  if (tmp.size() >= kTempPathMax) return kTempSlots;
  std::lock_guard<std::mutex> lock(g_temp_mutex);
  for (size_t i = 0; i < kTempSlots; ++i)
    if (!g_temp_used[i].load()) {
      std::memcpy(g_temp_paths[i].data(), tmp.c_str(), tmp.size() + 1);
      g_temp_used[i].store(true);
      return i;
    }
  return kTempSlots;
}

void untrack_temp(const std::string& tmp) {
  std::lock_guard<std::mutex> lock(g_temp_mutex);
  for (size_t i = 0; i < kTempSlots; ++i)
    if (g_temp_used[i].load() && tmp == g_temp_paths[i].data()) g_temp_used[i].store(false);
}

void remove_temp(const std::string& tmp) {
  ::unlink(tmp.c_str());
  untrack_temp(tmp);
}

/// Writes all of `text` to `fd`; false with errno set on failure.
bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Writes `text` into an existing character device or FIFO (opened without truncation or creation).
void write_in_place(const OutputTarget& t, const std::string& path, const std::string& text, const std::string& what,
                    const std::string& key) {
  // O_NONBLOCK first: a FIFO without a reader fails with ENXIO instead of blocking the run forever.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | (t.kind == OutputKind::fifo ? O_NONBLOCK : 0));
  if (fd < 0) {
    const int e = errno;
    throw InputError(located_at(path), key,
                     "cannot open " + what + " '" + path + "' (" + to_string(t.kind) + ") for writing: " +
                         (e == ENXIO ? std::string("no process is reading the FIFO") : std::strerror(e)),
                     t.kind == OutputKind::fifo ? "start the reader first, or write to a regular file" : kWriteFix);
  }
  if (t.kind == OutputKind::fifo) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const bool ok = write_all(fd, text);
  const int e = errno;
  ::close(fd);
  if (!ok)
    throw InputError(located_at(path), key, "cannot write " + what + " '" + path + "': " + std::strerror(e), kWriteFix);
}

}  // namespace

std::string to_string(OutputKind k) {
  switch (k) {
    case OutputKind::absent: return "a new file";
    case OutputKind::regular: return "a regular file";
    case OutputKind::character_device: return "a character device";
    case OutputKind::fifo: return "a FIFO";
    case OutputKind::refused: return "refused";
  }
  return "?";
}

OutputTarget classify_output(const std::string& path) {
  OutputTarget t;
  t.path = path;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0) {
    t.kind = OutputKind::absent;
    return t;
  }
  struct stat st = lst;
  if (S_ISLNK(lst.st_mode)) {
    // Follow the link: a link to a regular file is replaced through its target (the link stays); a link to a
    // device (e.g. /dev/stdout → /proc/self/fd/1) is written in place; a dangling link is refused.
    if (::stat(path.c_str(), &st) != 0) {
      t.kind = OutputKind::refused;
      t.reason = "it is a symbolic link to nothing";
      return t;
    }
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::canonical(path, ec);
    if (!ec) t.path = target.string();
  }
  if (S_ISREG(st.st_mode)) t.kind = OutputKind::regular;
  else if (S_ISCHR(st.st_mode)) t.kind = OutputKind::character_device;
  else if (S_ISFIFO(st.st_mode)) t.kind = OutputKind::fifo;
  else {
    t.kind = OutputKind::refused;
    t.reason = S_ISDIR(st.st_mode) ? "it is a directory" : "it is neither a regular file, a character device nor a FIFO";
  }
  return t;
}

namespace {

std::string create_temp(const std::string& path, const std::string& what, const std::string& key) {
  std::string tmpl = path + ".XXXXXX";
  // mkstemp creates the file exclusively (O_CREAT | O_EXCL, mode 0600): a name planted by someone else, a symlink
  // included, is never opened, and two runs writing the same output never share a temporary.
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw InputError(located_at(path), key,
                     "cannot create a temporary file for " + what + " next to '" + path + "': " + std::strerror(errno),
                     kWriteFix);
  // The final file gets the usual permissions (0666 less the umask), not mkstemp's 0600.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, static_cast<mode_t>(0666 & ~mask));
  ::close(fd);
  track_temp(tmpl);
  return tmpl;
}

}  // namespace

std::string create_output_temp(const std::string& path, const std::string& what, const std::string& key) {
  refuse_if_input(path, what, key);
  return create_temp(path, what, key);
}

void refuse_if_input(const std::string& path, const std::string& what, const std::string& key) {
  for (const std::string& input : input_files_read()) {
    std::error_code ec;
    if (std::filesystem::equivalent(path, input, ec) && !ec)
      throw InputError(located_at(path), key, "will not write " + what + " to '" + path + "': it is this command's input '" +
                                                  input + "'",
                       "write the " + what + " to another path");
  }
}

void check_requested_outputs(const std::vector<RequestedOutput>& outputs) {
  namespace fs = std::filesystem;
  std::vector<const RequestedOutput*> files;  // the outputs that are (or will be) regular files
  for (const RequestedOutput& o : outputs) {
    if (o.path.empty()) continue;
    const fs::path dir = fs::path(o.path).parent_path();
    std::error_code ec;
    if (!dir.empty() && !fs::is_directory(dir, ec))
      throw InputError(located_at(o.path), o.option, "directory '" + dir.string() + "' does not exist",
                       "create it first or choose another path");
    const OutputTarget t = classify_output(o.path);
    if (t.kind == OutputKind::refused)
      throw InputError(located_at(o.path), o.option, "will not write " + o.what + " to '" + o.path + "': " + t.reason,
                       o.regular_file_only ? "give the path of a regular file"
                                           : "give the path of a regular file (or /dev/null, /dev/stdout)");
    if (t.kind == OutputKind::character_device || t.kind == OutputKind::fifo) {
      if (o.regular_file_only)
        throw InputError(located_at(o.path), o.option,
                         "will not write the " + o.what + " to '" + o.path + "' (" + to_string(t.kind) +
                             "): an HDF5 " + o.what + " is a regular file, written with seeks",
                         "give the path of a regular file");
      continue;
    }
    refuse_if_input(o.path, o.what, o.option);
    for (const RequestedOutput* other : files) {
      std::error_code e1, e2, e3;
      // Absolute first: weakly_canonical leaves a relative path whose file does not exist yet relative, so
      // "z.h5" and "/cwd/z.h5" (or "./z.h5") would compare different while both name one new file.
      const fs::path a = fs::weakly_canonical(fs::absolute(o.path, e1), e1);
      const fs::path b = fs::weakly_canonical(fs::absolute(other->path, e2), e2);
      const bool same = (!e1 && !e2 && a == b) || (fs::equivalent(o.path, other->path, e3) && !e3);
      if (same)
        throw InputError(located_at(o.path), o.option,
                         "both " + other->option + " and " + o.option + " name '" + o.path +
                             "': the one written last would replace the other",
                         "give each output its own path");
    }
    files.push_back(&o);
  }
}

namespace {

void write_output(const std::string& path, const std::string& text, const std::string& what, const std::string& key,
                  bool may_replace_input) {
  const OutputTarget t = classify_output(path);
  if (t.kind == OutputKind::refused)
    throw InputError(located_at(path), key, "will not write " + what + " to '" + path + "': " + t.reason,
                     "give the path of a regular file (or /dev/null, /dev/stdout)");
  if (t.kind == OutputKind::character_device || t.kind == OutputKind::fifo) {
    write_in_place(t, t.path, text, what, key);
    return;
  }
  if (!may_replace_input) refuse_if_input(path, what, key);
  const std::string tmp = create_temp(t.path, what, key);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  bool ok = fd >= 0 && write_all(fd, text);
  int e = errno;
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    e = errno;
  }
  if (fd >= 0 && ::close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    remove_temp(tmp);
    throw InputError(located_at(path), key, "cannot write " + what + " '" + tmp + "': " + std::strerror(e), kWriteFix);
  }
  commit_output_file(tmp, t.path, what, key);
}

}  // namespace

void write_output_file(const std::string& path, const std::string& text, const std::string& what,
                       const std::string& key) {
  write_output(path, text, what, key, false);
}

void rewrite_input_file(const std::string& path, const std::string& text, const std::string& what,
                        const std::string& key) {
  write_output(path, text, what, key, true);
}

void commit_output_file(const std::string& temp_path, const std::string& path, const std::string& what,
                        const std::string& key) {
  const OutputTarget t = classify_output(path);
  if (t.kind != OutputKind::absent && t.kind != OutputKind::regular) {
    remove_temp(temp_path);
    throw InputError(located_at(path), key,
                     "will not replace '" + path + "' (" + (t.reason.empty() ? to_string(t.kind) : t.reason) +
                         ") with the " + what,
                     "give the path of a regular file");
  }
  // A replaced file keeps its permissions (a 0600 result stays private; the temporary was made 0666 & ~umask).
  struct stat old_file {};
  if (t.kind == OutputKind::regular && ::stat(t.path.c_str(), &old_file) == 0)
    ::chmod(temp_path.c_str(), old_file.st_mode & 07777);
  std::error_code ec;
  std::filesystem::rename(temp_path, t.path, ec);
  if (ec) {
    remove_temp(temp_path);
    throw InputError(located_at(path), key,
                     "cannot rename " + what + " '" + temp_path + "' onto '" + path + "': " + ec.message(), kWriteFix);
  }
  untrack_temp(temp_path);
}

void discard_output_temp(const std::string& temp_path) { remove_temp(temp_path); }

}  // namespace hcpsim
