#include <string>

#include <nlohmann/json.hpp>

#include "catch_compat.hpp"
#include "hcpsim/io/chrome_trace.hpp"

using namespace hcpsim;

TEST_CASE("io: ps_to_us converts for trace output", "[io]") {
  REQUIRE(ps_to_us(0) == 0.0);
  REQUIRE(ps_to_us(1'000'000) == 1.0);
  REQUIRE(ps_to_us(16'000'000) == 16.0);
  REQUIRE(ps_to_us(1'500'000) == 1.5);
  const int64_t odd = 1'234'567;
  REQUIRE(ps_to_us(odd) == 1.234567);
  // Stream threads of GPU g are 3g .. 3g + 2; link threads start above every stream thread of 10^8 GPUs.
  REQUIRE(stream_tid(5, Stream::comm) == 17);
  REQUIRE(link_tid(4) == kLinkTidBase + 4);
  REQUIRE(stream_tid(100'000'000, Stream::compute) == kLinkTidBase);
}

TEST_CASE("io: a timeline becomes a Chrome trace with metadata first and typed args", "[io]") {
  TraceTimeline t;
  t.processes.push_back(TraceProcess{0, "node 0", 0});
  t.threads.push_back(TraceThread{0, stream_tid(0, Stream::cp), "gpu 0 cp rank 0 cp_stream"});
  t.slices.push_back(TraceSlice{"fwd \"step\" 0", "attn_fwd_block", 0, 1, 2'500'000, 4'000'000,
                                {{"cp_rank", int64_t{0}}, {"flops", 1.5e9}, {"phase", std::string("forward")}}});
  const std::string text = chrome_trace_json(t);
  REQUIRE(text.back() == '\n');
  const auto j = nlohmann::json::parse(text);
  REQUIRE(j.at("displayTimeUnit") == "ns");
  const auto& ev = j.at("traceEvents");
  REQUIRE(ev.size() == 4);  // process_name, process_sort_index, thread_name, one slice
  REQUIRE(ev[0].at("name") == "process_name");
  REQUIRE(ev[0].at("args").at("name") == "node 0");
  REQUIRE(ev[1].at("args").at("sort_index") == 0);
  REQUIRE(ev[2].at("tid") == 1);
  const auto& s = ev[3];
  REQUIRE(s.at("ph") == "X");
  REQUIRE(s.at("name") == "fwd \"step\" 0");  // escaped by the JSON writer, read back unchanged
  REQUIRE(s.at("ts").get<double>() == 2.5);
  REQUIRE(s.at("dur").get<double>() == 1.5);
  REQUIRE(s.at("args").at("cp_rank").is_number_integer());
  REQUIRE(s.at("args").at("flops").is_number_float());
  REQUIRE(s.at("args").at("phase") == "forward");
  // Key order is insertion order, so the same timeline always prints the same bytes.
  REQUIRE(text.find("\"cp_rank\"") < text.find("\"flops\""));
  REQUIRE(chrome_trace_json(t) == text);
}
