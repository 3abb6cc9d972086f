#pragma once
/// Writers of a SimResult: a Chrome trace (chrome://tracing, Perfetto) and a JSON summary.
/// Output is deterministic: the same SimResult gives byte-identical text (fixed key order, ops in
/// (cp_rank, op_index) order, numbers printed by nlohmann_json's shortest round-trip formatting).
/// Files are written to "<path>.tmp" in the same directory and renamed onto <path> when complete.

#include <string>

#include "hcpsim/sim/simulator.hpp"

namespace hcpsim::sim {

/// The Chrome trace JSON of a result: {"displayTimeUnit": "ns", "traceEvents": [...]}.
/// Metadata events (ph "M") name each process "cp rank <g> (node <n>)" and each thread by its stream
/// ("compute", "cp", "comm"); then one complete event (ph "X") per timeline entry with pid = cp rank,
/// tid = stream index (Stream value), name = op label, cat = op kind, ts and dur in microseconds
/// (ps_to_us: the printed decimal is exactly ps / 10^6 for times below 10^15 ps, as it then has at most 15
/// significant digits), and args {op_index, kind, phase, ring_step, start_ps, end_ps, flops, bytes}
/// (the exact integer picoseconds are kept in args).
std::string chrome_trace_json(const SimResult& result);

/// Writes chrome_trace_json(result) to `path` (temporary file, then rename).
/// @throws InputError (located at `path`) if the file cannot be written, with the OS reason and a fix.
void write_chrome_trace(const std::string& path, const SimResult& result);

/// The JSON summary of a result (no timeline): the model options, comm type, A, P, forward/backward/total
/// times in ps, FLOPs and messages per phase and link level, and per-rank stats (busy, exposed comm, memory,
/// messages).
std::string summary_json(const SimResult& result);

/// Writes summary_json(result) to `path` (temporary file, then rename).
/// @throws InputError (located at `path`) if the file cannot be written, with the OS reason and a fix.
void write_summary_json(const std::string& path, const SimResult& result);

}  // namespace hcpsim::sim
