#pragma once
// Progress and cost up front for long commands, on stderr only: the admission estimate before the work starts and a
// progress display while it runs — on a terminal one bar rewritten in place with "\r", otherwise a plain line every
// interval (10 s, or HCPSIM_PROGRESS_INTERVAL_S). The wall clock (std::chrono::steady_clock) is read here and only
// for this display; nothing it reads reaches stdout or an output file.

#include <atomic>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>

namespace hcpsim::app {

/// How the display behaves in this process.
struct ProgressSettings {
  bool quiet = false;        ///< --quiet: print nothing
  bool terminal = false;     ///< stderr is a terminal (isatty(2)): a \r-updated bar instead of plain lines
  double interval_s = 10;    ///< plain lines: at most one per interval (0: one per update)
  bool forced = false;       ///< HCPSIM_PROGRESS_INTERVAL_S was set: the estimate line and lines always appear
};

/// Estimates shorter than this are not announced (short commands keep their stderr unchanged), in seconds.
/// Source: the requirement's "longer than a few seconds".
constexpr double kAnnounceAboveSeconds = 2.0;

/// A terminal bar appears once the work has run this long, in seconds (a quick run never draws one).
constexpr double kBarAfterSeconds = 1.0;

/// --quiet (any long command or the top level): silence every display of this process.
void set_progress_quiet(bool quiet);

/// This process's settings: quiet from set_progress_quiet, terminal from isatty(2), interval from the environment
/// variable HCPSIM_PROGRESS_INTERVAL_S (seconds ≥ 0; setting it forces the display, which tests use with 0).
/// @throws InputError (key HCPSIM_PROGRESS_INTERVAL_S) when the variable is not a number ≥ 0.
ProgressSettings progress_settings();

/// "12.3 s", "4 min 05 s", "1 h 02 min": a duration for the display.
std::string display_duration(double seconds);

/// The estimated time left after `elapsed_s` with `done` of `total` units finished, at the rate so far:
/// elapsed · (total − done) / done; negative (unknown) when nothing is done yet.
double eta_seconds(double elapsed_s, size_t done, size_t total);

/// One progress line (no newline): "<label>: <done>/<total> (<pct>%), elapsed <t>, ETA <t>", with a 24-character
/// bar "[#####...]" after the label when `bar`; "ETA ?" before the first unit is done.
std::string progress_line(const std::string& label, size_t done, size_t total, double elapsed_s, bool bar);

/// One command's display: an optional estimate line, updates from any thread, a last line at finish().
/// Thread-safe: update() stores the count atomically and prints only from the thread that holds the print lock
/// (others skip that print; a later update or finish() prints the newer count).
class ProgressReporter {
 public:
  /// Seconds since an arbitrary origin, monotonic; the default reads std::chrono::steady_clock.
  using Clock = std::function<double()>;

  /// @param label   what runs, e.g. "verify a2a+p2p"; starts every line
  /// @param total   units of work (≥ 0; 0 shows no percentage)
  /// @param out     where lines go (stderr; tests pass a temporary file)
  /// @param clock   the time source (tests inject one)
  ProgressReporter(std::string label, size_t total, ProgressSettings settings, std::FILE* out = stderr,
                   Clock clock = {});
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  /// Calls finish().
  ~ProgressReporter();

  /// Prints "<label>: <text> (estimate)" when not quiet and estimated_seconds > kAnnounceAboveSeconds or the
  /// display is forced. Also arms the display (an announced run shows progress from the start).
  /// @return whether the line was printed.
  bool announce(const std::string& text, double estimated_seconds);
  /// Sets the work done to `done` of `total` (total replaces the constructor's when ≠ 0) and prints if due.
  void update(size_t done, size_t total = 0);
  /// If anything was shown: prints the last line (a plain one only when the count changed since the last line;
  /// the bar always, ending it with a newline). Idempotent.
  void finish();
  /// Lines printed so far (tests).
  [[nodiscard]] size_t lines_printed() const { return lines_; }

 private:
  void print_locked(bool last);

  std::string label_;
  std::atomic<size_t> total_;
  std::atomic<size_t> done_{0};
  ProgressSettings settings_;
  std::FILE* out_;
  Clock clock_;
  double start_s_ = 0;
  double last_print_s_ = 0;
  size_t printed_done_ = 0;  ///< the count the last line showed
  bool armed_ = false;     ///< announced (or forced): show progress from the start
  bool shown_ = false;     ///< something was printed
  bool finished_ = false;
  size_t lines_ = 0;
  std::mutex print_;
};

/// A progress callback for a library's options (std::function<void(size_t done, size_t total)>) that updates
/// `reporter`; an empty function when `reporter` is null.
std::function<void(size_t, size_t)> progress_callback(ProgressReporter* reporter);

}  // namespace hcpsim::app
