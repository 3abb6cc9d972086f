#pragma once
/// Writers of a SimResult: a Chrome trace (chrome://tracing, Perfetto) and a JSON summary.
/// Output is deterministic: the same SimResult gives byte-identical text (fixed key order, ops in
/// (cp_rank, op_index) order, numbers printed by nlohmann_json's shortest round-trip formatting).
/// Files are written to "<path>.tmp" in the same directory and renamed onto <path> when complete.

#include <string>

#include "hcpsim/io/chrome_trace.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::sim {

/// The timeline of a result for the Chrome-trace writer (io/chrome_trace.hpp): a process per node ("node <n>",
/// pid n) and one "fabric" process (pid = node_count) for leaf/spine links; a thread per GPU stream ("gpu <g> cp
/// rank <r> compute|cp_stream|comm", tid stream_tid) and per link direction that carried a flow ("link <from> -> <to>",
/// tid link_tid, in the process of the link's source node); a slice per timeline entry on its stream thread
/// (name = op label, cat = op kind, args {cp_rank, op_index, kind, phase, ring_step, start_ps, end_ps, flops,
/// bytes}) except alloc and free (zero-time); then, per flow and per link of its route, a slice "cp <src>-><dst>"
/// (cat "flow") from its first byte to its last, args {flow, bytes, phase, start_ps, drained_ps}. With a timeline
/// (SimOptions::record_timeline) also: per GPU that holds memory a counter "memory" (id "gpu <g>", in its node's
/// process) whose series allocated_bytes is the GPU's live bytes — RankStats::input_bytes at 0, then the value after each alloc and
/// free in run order (TimelineEntry::live_bytes), so its maximum is RankStats::peak_memory_bytes; and per message
/// (FlowRecord with both ops) a flow arrow "cp <src>-><dst>" (cat "message", id = the flow's index in
/// SimResult::flows) from inside the sending op's slice (at the first byte, clamped into the slice) to inside the
/// receiving op's slice (at the last byte, clamped), so every send/recv side and every collective member's message
/// is one arrow.
/// `tensor_model_parallel_size` > 1: the result is a transformer layer of TP x CP ranks (step/layer_builder.hpp:
/// rank r is tp rank r % TP of cp rank r / TP): threads are "gpu <g> tp rank <t> cp rank <c> <stream>", slices
/// carry args cp_rank = c and tp_rank = t, and arrows and flow slices are named "gpu <src>-><dst>" (TP and CP
/// messages alike).
TraceTimeline trace_timeline(const SimResult& result, int64_t tensor_model_parallel_size = 1);

/// The Chrome trace JSON of a result: chrome_trace_json(trace_timeline(result)) (io/chrome_trace.hpp).
std::string chrome_trace_json(const SimResult& result);

/// Writes chrome_trace_json(result) to `path` (temporary file, then rename).
/// @throws InputError (located at `path`) if the file cannot be written, with the OS reason and a fix.
void write_chrome_trace(const std::string& path, const SimResult& result);

/// The JSON summary of a result (no timeline): the model options, comm type, A, P, forward/backward/total
/// times in ps, FLOPs and messages per phase and link level, the largest exposed communication and peak
/// memory, utilisation per link class (nvlink, pcie, network), and per-rank stats (busy, exposed comm, memory
/// overall and per phase, messages).
std::string summary_json(const SimResult& result);

/// Writes summary_json(result) to `path` (temporary file, then rename).
/// @throws InputError (located at `path`) if the file cannot be written, with the OS reason and a fix.
void write_summary_json(const std::string& path, const SimResult& result);

/// Per-link CSV: header "link,from,to,class,bandwidth_bytes_per_s,bytes,busy_ps,flows,utilisation", one row per
/// directed link in id order; utilisation = bytes / (bandwidth · total time). Doubles printed with {:.17g}.
std::string links_csv(const SimResult& result);

/// Writes links_csv(result) to `path` (temporary file, then rename).
/// @throws InputError (located at `path`) if the file cannot be written, with the OS reason and a fix.
void write_links_csv(const std::string& path, const SimResult& result);

}  // namespace hcpsim::sim
