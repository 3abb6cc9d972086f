#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "sim_test_util.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
namespace fs = std::filesystem;

namespace {

SimResult small_result() {
  const int64_t S = 64;
  const AttentionShape sh = test::small_attention_shape(S);
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, S), sh);
  return simulate(s, test::round_cluster(2, 2), {0, 0, 1, 1});
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh directory under the system temp dir, named by the process id (no randomness needed).
fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("hcpsim_sim_test_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("sim: Chrome trace has one complete event per op, ts/dur in µs from exact ps", "[sim]") {
  const SimResult r = small_result();
  REQUIRE(!r.timeline.empty());
  REQUIRE(!r.flows.empty());
  const auto trace = nlohmann::json::parse(chrome_trace_json(r));
  const auto& events = trace.at("traceEvents");
  size_t metadata = 0;
  size_t ops = 0;    // op events follow the timeline order
  size_t flow_events = 0;
  for (const auto& e : events) {
    if (e.at("ph") == "M") {
      ++metadata;
      continue;
    }
    if (e.at("ph") != "X") continue;  // memory counters and flow arrows: trace_flow_test.cpp
    if (e.at("cat") == "flow") {
      ++flow_events;
      REQUIRE(e.at("tid").get<int64_t>() >= kLinkTidBase);
      continue;
    }
    while (r.timeline[ops].kind == OpKind::alloc || r.timeline[ops].kind == OpKind::free) ++ops;  // counters
    const TimelineEntry& t = r.timeline[ops++];
    const RankStats& rank = r.ranks[static_cast<size_t>(t.cp_rank)];
    // A process per node, a thread per GPU stream.
    REQUIRE(e.at("pid").get<int64_t>() == rank.node);
    REQUIRE(e.at("tid").get<int64_t>() == stream_tid(rank.gpu, t.stream));
    REQUIRE(e.at("args").at("cp_rank").get<int64_t>() == t.cp_rank);
    REQUIRE(e.at("name").get<std::string>() == t.label);
    REQUIRE(e.at("cat").get<std::string>() == to_string(t.kind));
    REQUIRE(e.at("ts").get<double>() == ps_to_us(t.start_ps));
    REQUIRE(e.at("dur").get<double>() == ps_to_us(t.end_ps - t.start_ps));
    REQUIRE(e.at("args").at("start_ps").get<int64_t>() == t.start_ps);
    REQUIRE(e.at("args").at("end_ps").get<int64_t>() == t.end_ps);
  }
  while (ops < r.timeline.size() && (r.timeline[ops].kind == OpKind::alloc || r.timeline[ops].kind == OpKind::free))
    ++ops;
  REQUIRE(ops == r.timeline.size());
  // One flow event per link of every route.
  size_t hops = 0;
  for (const FlowRecord& f : r.flows) hops += f.route.size();
  REQUIRE(hops > 0);
  REQUIRE(flow_events == hops);
  // 2 nodes + the fabric process: name and sort index each; three stream threads per rank; one thread per link
  // direction that carried a flow.
  size_t used_links = 0;
  for (const LinkStats& l : r.links) used_links += l.flows > 0 ? 1 : 0;
  REQUIRE(r.node_count == 2);
  REQUIRE(metadata == 2 * 3 + 3 * r.ranks.size() + used_links);
}

TEST_CASE("sim: summary JSON carries the result's totals", "[sim]") {
  const SimResult r = small_result();
  const auto j = nlohmann::json::parse(summary_json(r));
  REQUIRE(j.at("forward_ps").get<int64_t>() == r.forward_ps);
  REQUIRE(j.at("backward_ps").get<int64_t>() == r.backward_ps);
  REQUIRE(j.at("total_ps").get<int64_t>() == r.total_ps);
  REQUIRE(j.at("cp_comm_type").get<std::string>() == "a2a+p2p");
  REQUIRE(j.at("flops").at("forward").get<double>() == r.phase_flops(Phase::forward));
  REQUIRE(j.at("messages").at("forward").at("inter_node").at("bytes").get<int64_t>() ==
          r.message_totals(Phase::forward, LinkLevel::inter_node).bytes);
  REQUIRE(j.at("ranks").size() == r.ranks.size());
  REQUIRE(j.at("ranks")[1].at("peak_memory_bytes").get<int64_t>() == r.ranks[1].peak_memory_bytes);
}

TEST_CASE("sim: trace and summary files are written whole and deterministically", "[sim]") {
  const SimResult r = small_result();
  const fs::path dir = scratch_dir("write");
  const fs::path trace = dir / "trace.json";
  const fs::path summary = dir / "summary.json";
  write_chrome_trace(trace.string(), r);
  write_summary_json(summary.string(), r);
  REQUIRE(fs::exists(trace));
  REQUIRE(fs::exists(summary));
  REQUIRE_FALSE(fs::exists(dir / "trace.json.tmp"));
  REQUIRE_FALSE(fs::exists(dir / "summary.json.tmp"));
  REQUIRE(read_all(trace) == chrome_trace_json(r));
  REQUIRE(read_all(summary) == summary_json(r));
  // Writing again (over the existing file) gives the same bytes.
  write_chrome_trace(trace.string(), r);
  REQUIRE(read_all(trace) == chrome_trace_json(r));
  fs::remove_all(dir);
}

TEST_CASE("sim: writing into a missing directory is an InputError naming the path and a fix", "[sim]") {
  const SimResult r = small_result();
  const fs::path dir = scratch_dir("missing");
  const std::string path = (dir / "no_such_dir" / "trace.json").string();
  try {
    write_chrome_trace(path, r);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string what = e.what();
    REQUIRE(what.find(path) != std::string::npos);
    REQUIRE(e.fix().find("directory exists") != std::string::npos);
  }
  fs::remove_all(dir);
}
