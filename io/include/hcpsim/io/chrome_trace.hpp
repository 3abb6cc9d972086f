#pragma once
/// The one timeline type and its Chrome-trace writer (Trace Event Format, read by chrome://tracing and Perfetto),
/// shared by the simulator (sim fills it from a SimResult) and the GPU backend (gpu fills it from measured ops).
/// Output is deterministic: the same timeline gives byte-identical text (fixed key order, events in vector order,
/// numbers printed by nlohmann_json's shortest round-trip formatting).
/// Source: Google, "Trace Event Format" (complete events ph "X", metadata events ph "M", counter events ph "C", flow
/// events ph "s"/"f", ts and dur in µs).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hcpsim/core/schedule.hpp"
#include "hcpsim/io/provenance.hpp"

namespace hcpsim {

/// First thread id of link threads (above every stream thread id of up to 10^8 GPUs).
/// Source: arbitrary, chosen so that stream and link thread ids never collide.
constexpr int64_t kLinkTidBase = 300000000;

/// Trace thread id of a GPU stream: gpu · kStreamCount + stream.
int64_t stream_tid(int64_t gpu, Stream s);
/// Trace thread name of a GPU stream: "gpu <gpu> cp rank <cp_rank> compute|cp_stream|comm".
std::string stream_thread_name(int64_t gpu, int64_t cp_rank, Stream s);
/// Trace thread id of a directed link: kLinkTidBase + link id.
int64_t link_tid(int64_t link);

/// Picoseconds as the microseconds a trace's ts and dur hold (for trace output only; never used to order events):
/// the double nearest to ps / 10^6, exact for |ps| < 2^53, and its shortest decimal is exactly ps / 10^6 for times
/// below 10^15 ps.
double ps_to_us(int64_t ps);

/// An argument value: printed as a JSON integer, a JSON number or a JSON string.
using TraceValue = std::variant<int64_t, double, std::string>;

/// One `args` entry of an event.
struct TraceArg {
  std::string key;
  TraceValue value;
};

/// A process: its process_name and process_sort_index metadata events.
struct TraceProcess {
  int64_t pid = 0;
  std::string name;
  int64_t sort_index = 0;
};

/// A thread: its thread_name metadata event.
struct TraceThread {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string name;
};

/// A complete event (ph "X") from start_ps to end_ps on thread (pid, tid).
struct TraceSlice {
  std::string name;
  std::string category;  ///< the event's "cat"
  int64_t pid = 0;
  int64_t tid = 0;
  int64_t start_ps = 0;
  int64_t end_ps = 0;  ///< ≥ start_ps
  std::vector<TraceArg> args;
};

/// One end of a flow arrow (ph "s" at the sender, ph "f" with "bp": "e" at the receiver): viewers bind it to the
/// slice of thread (pid, tid) that encloses ts, and draw the arrow from the "s" event to the "f" event with the same
/// id and category. at_ps must lie inside that slice. Source: Google, "Trace Event Format", "Flow Events".
struct TraceFlowEnd {
  std::string name;
  std::string category;  ///< the event's "cat"; equal at both ends
  int64_t id = 0;        ///< equal at both ends, unique per arrow
  bool start = true;     ///< true: "s" (the arrow's tail), false: "f" (its head)
  int64_t pid = 0;
  int64_t tid = 0;
  int64_t at_ps = 0;
};

/// A counter sample (ph "C"): from at_ps on, the process's counter `name` (a track per "id" when id is not
/// empty) has each args value as one series. Source: Google, "Trace Event Format", "Counter Events".
struct TraceCounter {
  std::string name;
  std::string id;  ///< "" for none
  int64_t pid = 0;
  int64_t at_ps = 0;
  std::vector<TraceArg> args;
};

/// A whole timeline, in the order the trace lists it.
struct TraceTimeline {
  std::vector<TraceProcess> processes;
  std::vector<TraceThread> threads;
  std::vector<TraceSlice> slices;
  std::vector<TraceCounter> counters;
  std::vector<TraceFlowEnd> flows;  ///< arrow ends, each arrow's "s" before its "f"
  /// What produced the trace; written as the trace's "otherData" (the format's metadata object) when set.
  std::optional<Provenance> provenance;
};

/// {"displayTimeUnit": "ns", "traceEvents": [...]}: per process its process_name and process_sort_index events,
/// then every thread_name event, then every slice ({name, cat, ph "X", pid, tid, ts, dur, args}), every counter
/// ({name, ph "C", [id,] pid, ts, args}), every flow end ({name, cat, ph "s"|"f", [bp "e",] id, pid, tid, ts}), indented by one
/// space per level and ended by a newline; with a provenance, a last key "otherData" holds provenance_json.
std::string chrome_trace_json(const TraceTimeline& timeline);

/// Writes chrome_trace_json(timeline) to `path` through the output writer (temporary file, then rename).
/// @throws InputError located at `path` if it cannot be written.
void write_chrome_trace(const std::string& path, const TraceTimeline& timeline);

}  // namespace hcpsim
