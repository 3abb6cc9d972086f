#include "progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::app {

namespace {

std::atomic<bool> g_quiet{false};

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void set_progress_quiet(bool quiet) { g_quiet = quiet; }

ProgressSettings progress_settings() {
  ProgressSettings s;
  s.quiet = g_quiet;
  s.terminal = isatty(STDERR_FILENO) == 1;
  if (const char* v = std::getenv("HCPSIM_PROGRESS_INTERVAL_S"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !std::isfinite(x) || x < 0)
      throw InputError(SourceLoc{}, "HCPSIM_PROGRESS_INTERVAL_S",
                       fmt::format("the environment variable is '{}', not a number of seconds >= 0", v),
                       "set it to e.g. 10, or unset it");
    s.interval_s = x;
    s.forced = true;
    s.terminal = false;  // a forced interval asks for plain lines (tests, logs)
  }
  return s;
}

std::string display_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 3600) return fmt::format("{} min {:02d} s", total / 60, total % 60);
  return fmt::format("{} h {:02d} min", total / 3600, (total % 3600) / 60);
}

double eta_seconds(double elapsed_s, size_t done, size_t total) {
  if (done == 0) return -1;
  if (done >= total) return 0;
  return elapsed_s * static_cast<double>(total - done) / static_cast<double>(done);
}

std::string progress_line(const std::string& label, size_t done, size_t total, double elapsed_s, bool bar) {
  constexpr int kBarWidth = 24;
  const double fraction = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  std::string line = label + ": ";
  if (bar) {
    const auto filled = static_cast<int>(fraction * kBarWidth);
    line += '[';  // appended piecewise: GCC 12's -Wrestrict misfires on "[" + std::string(...)
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(kBarWidth - filled), '.');
    line += "] ";
  }
  line += fmt::format("{}/{}", done, total);
  if (total > 0) line += fmt::format(" ({:.0f}%)", 100 * fraction);
  const double eta = eta_seconds(elapsed_s, done, total);
  line += ", elapsed " + display_duration(elapsed_s) + ", ETA " + (eta < 0 ? std::string("?") : display_duration(eta));
  return line;
}

ProgressReporter::ProgressReporter(std::string label, size_t total, ProgressSettings settings, std::FILE* out,
                                   Clock clock)
    : label_(std::move(label)),
      total_(total),
      settings_(settings),
      out_(out),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  start_s_ = clock_();
  last_print_s_ = start_s_;
  armed_ = settings_.forced;
}

ProgressReporter::~ProgressReporter() { finish(); }

bool ProgressReporter::announce(const std::string& text, double estimated_seconds) {
  if (settings_.quiet || !(settings_.forced || estimated_seconds > kAnnounceAboveSeconds)) return false;
  const std::lock_guard<std::mutex> lock(print_);
  fmt::print(out_, "{}: {} (estimate)\n", label_, text);
  std::fflush(out_);
  ++lines_;
  armed_ = true;
  return true;
}

void ProgressReporter::update(size_t done, size_t total) {
  if (total != 0) total_ = total;
  done_ = done;
  if (settings_.quiet) return;
  std::unique_lock<std::mutex> lock(print_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;  // another thread is printing; a later update shows the newer count
  const double now = clock_();
  const double since_start = now - start_s_;
  if (settings_.terminal) {
    // A bar at most 10 times a second, once the run is visibly long (or announced).
    if ((armed_ || since_start >= kBarAfterSeconds) && (now - last_print_s_ >= 0.1 || !shown_)) print_locked(false);
  } else if (now - last_print_s_ >= settings_.interval_s && (armed_ || since_start >= settings_.interval_s)) {
    print_locked(false);
  }
}

void ProgressReporter::finish() {
  const std::lock_guard<std::mutex> lock(print_);
  if (finished_) return;
  finished_ = true;
  if (settings_.quiet || !shown_) return;  // nothing shown: a quick run stays silent
  if (!settings_.terminal && printed_done_ == done_) return;  // the last line already shows the final count
  print_locked(true);
}

void ProgressReporter::print_locked(bool last) {
  const double now = clock_();
  const std::string line = progress_line(label_, done_, total_, now - start_s_, settings_.terminal);
  if (settings_.terminal) {
    fmt::print(out_, "\r{}\x1b[K{}", line, last ? "\n" : "");  // \x1b[K: clear what a longer line left
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
  last_print_s_ = now;
  printed_done_ = done_;
  shown_ = true;
  ++lines_;
}

std::function<void(size_t, size_t)> progress_callback(ProgressReporter* reporter) {
  if (reporter == nullptr) return {};
  return [reporter](size_t done, size_t total) { reporter->update(done, total); };
}

}  // namespace hcpsim::app
