#include "hcpsim/sim/trace_writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "hcpsim/core/error.hpp"

namespace hcpsim::sim {

namespace {

using Json = nlohmann::ordered_json;  // keys in insertion order: stable, readable output

/// Writes `text` to path + ".tmp" and renames it onto `path`, so a reader never sees a partial file.
void write_atomically(const std::string& path, const std::string& text, const char* what) {
  const std::string tmp = path + ".tmp";
  const SourceLoc where{path, 0, 0, ""};
  const std::string fix = "check that the directory exists, is writable and has free space";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw InputError(where, "", std::string("cannot open ") + what + " temporary file '" + tmp +
                                    "' for writing: " + std::strerror(errno),
                     fix);
  }
  const size_t written = std::fwrite(text.data(), 1, text.size(), f);
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (written != text.size() || !closed) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw InputError(where, "", std::string("cannot write ") + what + " '" + tmp + "': " +
                                    std::strerror(written != text.size() ? write_errno : errno),
                     fix);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw InputError(where, "", std::string("cannot rename ") + what + " '" + tmp + "' onto '" + path +
                                    "': " + ec.message(),
                     fix);
  }
}

Json message_table_json(const MessageTable& table) {
  Json out = Json::object();
  for (size_t p = 0; p < kPhaseCount; ++p) {
    Json phase = Json::object();
    for (size_t l = 0; l < kLinkLevelCount; ++l) {
      const MessageTotals& t = table[p][l];
      phase[to_string(static_cast<LinkLevel>(l))] = Json{{"count", t.count}, {"bytes", t.bytes}};
    }
    out[to_string(static_cast<Phase>(p))] = phase;
  }
  return out;
}

}  // namespace

std::string chrome_trace_json(const SimResult& result) {
  Json events = Json::array();
  for (const RankStats& r : result.ranks) {
    events.push_back(Json{{"name", "process_name"},
                          {"ph", "M"},
                          {"pid", r.cp_rank},
                          {"args", Json{{"name", "cp rank " + std::to_string(r.cp_rank) + " (node " +
                                                     std::to_string(r.node) + ")"}}}});
    events.push_back(Json{{"name", "process_sort_index"},
                          {"ph", "M"},
                          {"pid", r.cp_rank},
                          {"args", Json{{"sort_index", r.cp_rank}}}});
    for (int s = 0; s < kStreamCount; ++s) {
      events.push_back(Json{{"name", "thread_name"},
                            {"ph", "M"},
                            {"pid", r.cp_rank},
                            {"tid", s},
                            {"args", Json{{"name", to_string(static_cast<Stream>(s))}}}});
    }
  }
  for (const TimelineEntry& e : result.timeline) {
    events.push_back(Json{{"name", e.label},
                          {"cat", to_string(e.kind)},
                          {"ph", "X"},
                          {"pid", e.cp_rank},
                          {"tid", static_cast<int>(e.stream)},
                          {"ts", ps_to_us(e.start_ps)},
                          {"dur", ps_to_us(e.end_ps - e.start_ps)},
                          {"args", Json{{"op_index", e.op_index},
                                        {"kind", to_string(e.kind)},
                                        {"phase", to_string(e.phase)},
                                        {"ring_step", e.ring_step},
                                        {"start_ps", e.start_ps},
                                        {"end_ps", e.end_ps},
                                        {"flops", e.flops},
                                        {"bytes", e.bytes}}}});
  }
  Json trace{{"displayTimeUnit", "ns"}, {"traceEvents", std::move(events)}};
  return trace.dump(1) + "\n";
}

void write_chrome_trace(const std::string& path, const SimResult& result) {
  write_atomically(path, chrome_trace_json(result), "trace");
}

std::string summary_json(const SimResult& result) {
  Json ranks = Json::array();
  for (const RankStats& r : result.ranks) {
    ranks.push_back(Json{{"cp_rank", r.cp_rank},
                         {"node", r.node},
                         {"end_ps", r.end_ps},
                         {"compute_busy_ps", r.compute_busy_ps},
                         {"compute_kernel_ps", r.compute_kernel_ps},
                         {"comm_busy_ps", r.comm_busy_ps},
                         {"exposed_comm_ps", r.exposed_comm_ps},
                         {"input_bytes", r.input_bytes},
                         {"peak_memory_bytes", r.peak_memory_bytes},
                         {"final_memory_bytes", r.final_memory_bytes},
                         {"messages_sent", message_table_json(r.messages_sent)}});
  }
  Json flops = Json::object();
  for (size_t p = 0; p < kPhaseCount; ++p) flops[to_string(static_cast<Phase>(p))] = result.flops[p];
  Json summary{{"network_model", "contention-free"},
               {"share_gpu_between_kernels", result.share_gpu_between_kernels},
               {"cp_comm_type", to_string(result.cp_comm_type)},
               {"a2a_size", result.a2a_size},
               {"p2p_size", result.p2p_size},
               {"forward_ps", result.forward_ps},
               {"backward_start_ps", result.backward_start_ps},
               {"backward_ps", result.backward_ps},
               {"total_ps", result.total_ps},
               {"flops", std::move(flops)},
               {"messages", message_table_json(result.messages)},
               {"event_count", result.event_count},
               {"ranks", std::move(ranks)}};
  return summary.dump(2) + "\n";
}

void write_summary_json(const std::string& path, const SimResult& result) {
  write_atomically(path, summary_json(result), "summary");
}

}  // namespace hcpsim::sim
