#include "hcpsim/io/chrome_trace.hpp"

#include <nlohmann/json.hpp>

#include "hcpsim/io/output_file.hpp"

namespace hcpsim {

namespace {

using Json = nlohmann::ordered_json;  // keys in insertion order: stable, readable output

Json value_json(const TraceValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return Json(*i);
  if (const auto* d = std::get_if<double>(&v)) return Json(*d);
  return Json(std::get<std::string>(v));
}

}  // namespace

int64_t stream_tid(int64_t gpu, Stream s) { return gpu * kStreamCount + static_cast<int64_t>(s); }
int64_t link_tid(int64_t link) { return kLinkTidBase + link; }
std::string stream_thread_name(int64_t gpu, int64_t cp_rank, Stream s) {
  return "gpu " + std::to_string(gpu) + " cp rank " + std::to_string(cp_rank) + " " + to_string(s);
}
double ps_to_us(int64_t ps) { return static_cast<double>(ps) / 1e6; }

std::string chrome_trace_json(const TraceTimeline& timeline) {
  Json events = Json::array();
  for (const TraceProcess& p : timeline.processes) {
    events.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", p.pid}, {"args", Json{{"name", p.name}}}});
    events.push_back(Json{
        {"name", "process_sort_index"}, {"ph", "M"}, {"pid", p.pid}, {"args", Json{{"sort_index", p.sort_index}}}});
  }
  for (const TraceThread& t : timeline.threads) {
    events.push_back(Json{
        {"name", "thread_name"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid}, {"args", Json{{"name", t.name}}}});
  }
  for (const TraceSlice& s : timeline.slices) {
    Json args = Json::object();
    for (const TraceArg& a : s.args) args[a.key] = value_json(a.value);
    events.push_back(Json{{"name", s.name},
                          {"cat", s.category},
                          {"ph", "X"},
                          {"pid", s.pid},
                          {"tid", s.tid},
                          {"ts", ps_to_us(s.start_ps)},
                          {"dur", ps_to_us(s.end_ps - s.start_ps)},
                          {"args", std::move(args)}});
  }
  for (const TraceCounter& c : timeline.counters) {
    Json args = Json::object();
    for (const TraceArg& a : c.args) args[a.key] = value_json(a.value);
    Json e{{"name", c.name}, {"ph", "C"}};
    if (!c.id.empty()) e["id"] = c.id;
    e["pid"] = c.pid;
    e["ts"] = ps_to_us(c.at_ps);
    e["args"] = std::move(args);
    events.push_back(std::move(e));
  }
  for (const TraceFlowEnd& f : timeline.flows) {
    Json e{{"name", f.name}, {"cat", f.category}, {"ph", f.start ? "s" : "f"}};
    if (!f.start) e["bp"] = "e";  // bind the head to the enclosing slice, not to the next one
    e["id"] = f.id;
    e["pid"] = f.pid;
    e["tid"] = f.tid;
    e["ts"] = ps_to_us(f.at_ps);
    events.push_back(std::move(e));
  }
  Json trace{{"displayTimeUnit", "ns"}, {"traceEvents", std::move(events)}};
  if (timeline.provenance) trace["otherData"] = Json::parse(provenance_json(*timeline.provenance));
  return trace.dump(1) + "\n";
}

void write_chrome_trace(const std::string& path, const TraceTimeline& timeline) {
  write_output_file(path, chrome_trace_json(timeline), "trace");
}

}  // namespace hcpsim
