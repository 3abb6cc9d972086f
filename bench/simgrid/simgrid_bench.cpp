// SimGrid side by side: replays the flows of hcpsim simulations in hcpsim's FlowNetwork and in SimGrid's max-min
// flow model (CM02 without corrections) on the same platform, and compares every flow's completion time.
// Wall-clock timing lives in bench/ only (docs/architecture.md "Conventions"). Results and settings: bench/RESULTS.md "SimGrid side by side".
//
//   hcpsim_simgrid_bench [CASE ...] [--cfg=NAME:VALUE ...]
//
// CASE: a2a8 ring4 shared_nic a2a_nic large512 (the default set) and p2p512 (opt-in: 523,776 flows). Extra --cfg
// options are appended after the harness's SimGrid settings (later ones win), e.g. --cfg=surf/precision:1e-12.
//
// What is compared, per case:
// 1. hcpsim simulates one attention layer (forward + backward) of the case's schedule on
//    Topology::from_cluster(cluster) (full simulation, no symmetry reduction) and yields SimResult::flows: source
//    and destination GPU, bytes, the time the first byte enters the network (start_ps, after the per-message
//    software latency) and the route (link ids).
// 2. hcpsim replay: a fresh EventQueue + FlowNetwork with the topology's link capacities starts the same flows at
//    the same start_ps over the same routes (start events at priority 1, between drains (0) and the batched
//    recomputation (2), as in the simulator), one after the other as SimGrid's replay actor does (each start
//    event schedules the next, so the queue holds the flows in flight, as in the simulator). Its drain times must equal SimResult::flows[i].drained_ps; the
//    harness checks that (column "replay = sim").
// 3. SimGrid replay (in a child process per run, because a SimGrid Engine can be created once per process): every
//    directed topology link used by a flow becomes one SimGrid link (hcpsim links are directed, one capacity per
//    direction, so no SPLITDUPLEX is needed) with the same bandwidth; every (source GPU, destination GPU, route)
//    becomes an explicit route in one Full zone (a pair whose messages take several ECMP routes gets one extra
//    source host per further route, so each host pair has exactly one route); one actor sleeps until each flow's
//    start time and starts Comm::sendto_async(src, dst, bytes). Completion = Comm::get_finish_time().
//    Run (a) with every link latency 0: compared with hcpsim's drain time (pure bandwidth sharing).
//    Run (b) with the topology's link latencies: compared with hcpsim's drain time + the route latency (when
//    hcpsim delivers the message); SimGrid pays the latency before the flow takes bandwidth, hcpsim after.
// Per-flow completion time (FCT) = completion − start; relative difference = |FCT_simgrid − FCT_hcpsim| /
// FCT_hcpsim. Wall times: hcpsim replay (queue + network + run) vs SimGrid (platform + Engine::run), both measured
// around the replay only; the full hcpsim simulation of the layer is reported separately.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <simgrid/s4u.hpp>
#include <simgrid/version.h>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/event_queue.hpp"
#include "hcpsim/sim/flow_network.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "simgrid_cases.hpp"

namespace {

namespace sg4 = simgrid::s4u;
using hcpsim::sim::TimePs;

// Event priorities of the replay, as the simulator uses them. Source: docs/simulator.md "Event engine"
// (completions 0, per-rank kick 1, batched network recomputation 2).
constexpr int kDrainPriority = 0;
constexpr int kStartPriority = 1;
constexpr int kRecomputePriority = 2;
// SimGrid host speed; unused (no computation is simulated) but a host needs one. Source: arbitrary.
constexpr double kHostFlopsPerS = 1e9;

// SimGrid settings of every run. Each one switches off a correction that CM02/LV08 add on top of max-min fairness,
// so that SimGrid computes what hcpsim's FlowNetwork computes (docs/simulator.md "Network model"). Option names
// and defaults checked against SimGrid 3.32 (`--help-cfg` and src/kernel/resource/models/network_cm02.cpp).
const std::vector<std::string> kSimgridConfig = {
    // CM02: Casanova & Marchal's max-min flow model (the legacy analytic model): bandwidth sharing is a max-min
    // fair allocation over the route's links, solved by progressive filling (lmm). Default is LV08.
    "--cfg=network/model:CM02",
    // No latency correction (LV08 multiplies latencies by 13.01 to model TCP slow start; CM02's default is 1).
    "--cfg=network/latency-factor:1",
    // No bandwidth correction (LV08: 0.97, the TCP/IP payload ratio; CM02's default is 1).
    "--cfg=network/bandwidth-factor:1",
    // No RTT-unfairness term: with weight-S > 0 a flow's sharing penalty adds S / bandwidth per link.
    // (Its penalty is still the route latency once the latency is paid, so flows of different route latencies
    // sharing a link would get rates ∝ 1/latency in run (b); in these platforms flows sharing a link have equal
    // route latencies: NVLink-only routes vs NIC routes.)
    "--cfg=network/weight-S:0",
    // No reverse traffic: by default every flow also loads its reverse route with 5% of its rate (TCP acks).
    "--cfg=network/crosstraffic:0",
    // No TCP window bound: with gamma > 0 a flow's rate is capped at gamma / (2 · route latency); 0 disables the
    // cap in 3.32 (default 4 MiB, which caps a 1 µs-latency flow near 2 TB/s).
    "--cfg=network/TCP-gamma:0",
    // Lazy action updates (the default, with selective maxmin update implied): exact like Full, only faster.
    "--cfg=network/optim:Lazy",
    // Time precision (s): events closer than this are merged (default 1e-9). Flows here last ≥ 1 µs.
    "--cfg=surf/precision:1e-9",
    // Rate precision in the maxmin solver (bytes/s; default 1e-5): negligible against ≥ 1e10 B/s capacities.
    "--cfg=maxmin/precision:1e-5",
    // Quiet: no "Configuration change" lines.
    "--log=root.thresh:warning",
};

/// Wall seconds since t0 (steady clock; benchmarks only).
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// What one SimGrid run returns through the pipe.
struct SimgridRun {
  bool ok = false;
  double platform_s = 0;             ///< wall time to build the platform (links, hosts, routes)
  double run_s = 0;                  ///< wall time of Engine::run()
  std::vector<double> start_s;       ///< per flow (hcpsim order): Comm::get_start_time(); NaN if not replayed
  std::vector<double> finish_s;      ///< per flow: Comm::get_finish_time(); NaN if not replayed
};

/// True for a flow SimGrid replays: bytes > 0 and a non-empty route (hcpsim drains the others at once).
bool replayed(const hcpsim::sim::FlowRecord& f) { return f.bytes > 0 && !f.route.empty(); }

/// The SimGrid Engine's command line: the harness's settings, then the user's --cfg options (later ones win).
std::vector<std::string> simgrid_args(const std::vector<std::string>& extra_cfg) {
  std::vector<std::string> args = {"hcpsim_simgrid_bench"};
  args.insert(args.end(), kSimgridConfig.begin(), kSimgridConfig.end());
  args.insert(args.end(), extra_cfg.begin(), extra_cfg.end());
  return args;
}

/// One SimGrid link per directed hcpsim link that some flow uses (nullptr for the others), same bandwidth and
/// (when `with_latency`) latency.
std::vector<sg4::Link*> create_links(sg4::NetZone* zone, const hcpsim::Topology& topology,
                                     const std::vector<hcpsim::sim::FlowRecord>& flows, bool with_latency) {
  const auto& links = topology.links();
  std::vector<sg4::Link*> sg_link(links.size(), nullptr);
  for (const auto& f : flows) {
    if (!replayed(f)) continue;
    for (int64_t id : f.route) {
      auto& l = sg_link[static_cast<size_t>(id)];
      if (l != nullptr) continue;
      const auto& tl = links[static_cast<size_t>(id)];
      std::string name = "l";  // not "l" + to_string(id): a GCC 12 -Wrestrict false positive once inlined
      l = zone->create_link(name.append(std::to_string(id)), tl.bandwidth_bytes_per_s);
      l->set_latency(with_latency ? tl.latency_s : 0.0);
      l->seal();
    }
  }
  return sg_link;
}

/// Per flow its SimGrid source and destination host (nullptr if not replayed); the replay actor runs on `driver`.
struct FlowHosts {
  std::vector<sg4::Host*> src, dst;
  sg4::Host* driver = nullptr;  ///< the host of the lowest-numbered GPU
};

/// Hosts: one per GPU that sends or receives; a (src, dst) pair whose flows take k distinct routes gets k − 1
/// extra source hosts, so that every (source host, destination host) has exactly one explicit route.
FlowHosts create_hosts_and_routes(sg4::NetZone* zone, const hcpsim::Topology& topology,
                                  const std::vector<hcpsim::sim::FlowRecord>& flows,
                                  const std::vector<sg4::Link*>& sg_link) {
  const auto& links = topology.links();
  std::map<int64_t, sg4::Host*> gpu_host;
  auto host_of = [&](int64_t gpu) {
    auto it = gpu_host.find(gpu);
    if (it != gpu_host.end()) return it->second;
    sg4::Host* h = zone->create_host("gpu" + std::to_string(gpu), kHostFlopsPerS);
    gpu_host.emplace(gpu, h);
    return h;
  };
  std::map<std::tuple<int64_t, int64_t, std::vector<int64_t>>, sg4::Host*> route_src;  // (src, dst, route) → host
  std::map<std::pair<int64_t, int64_t>, int64_t> pair_routes;                          // routes so far per pair
  FlowHosts hosts{std::vector<sg4::Host*>(flows.size()), std::vector<sg4::Host*>(flows.size())};  // nullptr
  for (size_t i = 0; i < flows.size(); ++i) {
    const auto& f = flows[i];
    if (!replayed(f)) continue;
    const int64_t src = links[static_cast<size_t>(f.route.front())].from;  // GPU vertices
    const int64_t dst = links[static_cast<size_t>(f.route.back())].to;
    sg4::Host* dst_host = host_of(dst);
    auto key = std::make_tuple(src, dst, f.route);
    auto it = route_src.find(key);
    if (it == route_src.end()) {
      const int64_t k = pair_routes[{src, dst}]++;
      sg4::Host* src_host = k == 0 ? host_of(src)
                                   : zone->create_host("gpu" + std::to_string(src) + ".to" + std::to_string(dst) +
                                                           ".route" + std::to_string(k),
                                                       kHostFlopsPerS);
      std::vector<sg4::LinkInRoute> route;
      for (int64_t id : f.route) route.emplace_back(sg_link[static_cast<size_t>(id)]);
      zone->add_route(src_host->get_netpoint(), dst_host->get_netpoint(), nullptr, nullptr, route, false);
      it = route_src.emplace(key, src_host).first;
    }
    hosts.src[i] = it->second;
    hosts.dst[i] = dst_host;
  }
  hosts.driver = gpu_host.begin()->second;
  return hosts;
}

/// The flows (only those SimGrid replays when `replayed_only`) in hcpsim's start order (starts are
/// non-decreasing; ties keep flow order).
std::vector<size_t> start_order(const std::vector<hcpsim::sim::FlowRecord>& flows, bool replayed_only) {
  std::vector<size_t> order;
  for (size_t i = 0; i < flows.size(); ++i)
    if (!replayed_only || replayed(flows[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return flows[x].start_ps < flows[y].start_ps; });
  return order;
}

/// The hcpsim replay's flow starts: each start event starts flow order[next] and schedules the next one, so the
/// queue holds one pending start at a time (see run_case). Every reference must outlive the run.
struct ChainedStarts {
  hcpsim::sim::EventQueue& queue;
  hcpsim::sim::FlowNetwork& network;
  const std::vector<hcpsim::sim::FlowRecord>& flows;
  const std::vector<size_t>& order;
  std::vector<TimePs>& drained;
  size_t next = 0;

  /// Schedules the start of flow order[next] at its start time (nothing once every flow has started).
  void schedule_next() {
    if (next < order.size()) queue.schedule_at(flows[order[next]].start_ps, kStartPriority, [this] { start(); });
  }
  void start() {
    const size_t i = order[next++];
    TimePs* slot = &drained[i];
    hcpsim::sim::EventQueue* q = &queue;
    network.start_flow(flows[i].route, flows[i].bytes, [slot, q] { *slot = q->now(); });
    schedule_next();
  }
};

/// One actor starts every flow at its start time, in `order`, into comms[i]; the arguments must outlive the run.
void create_replay_actor(const std::vector<hcpsim::sim::FlowRecord>& flows, const std::vector<size_t>& order,
                         const FlowHosts& hosts, std::vector<sg4::CommPtr>& comms) {
  sg4::Actor::create("replay", hosts.driver, [&]() {
    std::vector<sg4::CommPtr> started;
    started.reserve(order.size());
    for (size_t i : order) {
      const double start_s = static_cast<double>(flows[i].start_ps) / hcpsim::sim::kPsPerSecond;
      if (start_s > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(start_s);
      comms[i] = sg4::Comm::sendto_async(hosts.src[i], hosts.dst[i], static_cast<uint64_t>(flows[i].bytes));
      started.push_back(comms[i]);
    }
    sg4::Comm::wait_all(started);
  });
}

/// Builds the SimGrid platform for `flows` on `topology`, replays them, and returns per-flow times. Runs inside a
/// child process (it creates the process's only SimGrid Engine). @param with_latency  false: every link latency 0.
SimgridRun simgrid_replay(const hcpsim::Topology& topology, const std::vector<hcpsim::sim::FlowRecord>& flows,
                          bool with_latency, const std::vector<std::string>& extra_cfg) {
  std::vector<std::string> args = simgrid_args(extra_cfg);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());

  SimgridRun out;
  const size_t n = flows.size();
  out.start_s.assign(n, std::nan(""));
  out.finish_s.assign(n, std::nan(""));

  const auto t0 = std::chrono::steady_clock::now();
  sg4::Engine engine(&argc, argv.data());
  sg4::NetZone* zone = sg4::create_full_zone("hcpsim");
  const std::vector<sg4::Link*> sg_link = create_links(zone, topology, flows, with_latency);
  const FlowHosts hosts = create_hosts_and_routes(zone, topology, flows, sg_link);
  zone->seal();
  const std::vector<size_t> order = start_order(flows, true);
  std::vector<sg4::CommPtr> comms(n);
  create_replay_actor(flows, order, hosts, comms);
  out.platform_s = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  engine.run();
  out.run_s = seconds_since(t1);
  for (size_t i = 0; i < n; ++i) {
    if (!comms[i]) continue;
    out.start_s[i] = comms[i]->get_start_time();
    out.finish_s[i] = comms[i]->get_finish_time();
  }
  out.ok = true;
  return out;
}

/// Writes all of `size` bytes to fd. @return false on error.
bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t w = ::write(fd, p, size);
    if (w <= 0) return false;
    p += w;
    size -= static_cast<size_t>(w);
  }
  return true;
}

/// Reads exactly `size` bytes from fd. @return false on EOF or error.
bool read_all(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t r = ::read(fd, p, size);
    if (r <= 0) return false;
    p += r;
    size -= static_cast<size_t>(r);
  }
  return true;
}

/// Runs simgrid_replay in a forked child (one SimGrid Engine per process) and reads its results back.
SimgridRun simgrid_replay_in_child(const hcpsim::Topology& topology, const std::vector<hcpsim::sim::FlowRecord>& flows,
                                   bool with_latency, const std::vector<std::string>& extra_cfg) {
  int fds[2];
  SimgridRun out;
  if (::pipe(fds) != 0) return out;
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) return out;
  if (pid == 0) {
    ::close(fds[0]);
    const SimgridRun r = simgrid_replay(topology, flows, with_latency, extra_cfg);
    const size_t n = r.finish_s.size();
    const double header[2] = {r.platform_s, r.run_s};
    bool ok = write_all(fds[1], header, sizeof header);
    ok = ok && write_all(fds[1], r.start_s.data(), n * sizeof(double));
    ok = ok && write_all(fds[1], r.finish_s.data(), n * sizeof(double));
    ::close(fds[1]);
    std::fflush(stdout);
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  const size_t n = flows.size();
  double header[2] = {0, 0};
  out.start_s.resize(n);
  out.finish_s.resize(n);
  bool ok = read_all(fds[0], header, sizeof header);
  ok = ok && read_all(fds[0], out.start_s.data(), n * sizeof(double));
  ok = ok && read_all(fds[0], out.finish_s.data(), n * sizeof(double));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  out.platform_s = header[0];
  out.run_s = header[1];
  return out;
}

/// Max and mean of per-flow FCT relative differences, and the worst flow.
struct Diff {
  double max_rel = 0;
  double mean_rel = 0;
  size_t worst = 0;
  int64_t compared = 0;
  int64_t start_mismatch = 0;  ///< SimGrid start ≠ hcpsim start by more than 1 ps
};

/// Compares SimGrid completion times with hcpsim's: hcpsim completion = drained_ps (+ route latency).
Diff compare(const std::vector<hcpsim::sim::FlowRecord>& flows, const std::vector<TimePs>& hc_drained,
             const std::vector<TimePs>& route_latency_ps, const SimgridRun& sg, bool with_latency) {
  Diff d;
  double sum = 0;
  for (size_t i = 0; i < flows.size(); ++i) {
    if (!replayed(flows[i])) continue;
    const double start_ps = static_cast<double>(flows[i].start_ps);
    const double hc_fct =
        static_cast<double>(hc_drained[i] + (with_latency ? route_latency_ps[i] : 0)) - start_ps;
    const double sg_fct = sg.finish_s[i] * hcpsim::sim::kPsPerSecond - start_ps;
    if (std::fabs(sg.start_s[i] * hcpsim::sim::kPsPerSecond - start_ps) > 1.0) ++d.start_mismatch;
    const double rel = std::fabs(sg_fct - hc_fct) / hc_fct;
    sum += rel;
    ++d.compared;
    if (!(rel <= d.max_rel)) {  // also catches NaN
      d.max_rel = rel;
      d.worst = i;
    }
  }
  d.mean_rel = d.compared > 0 ? sum / static_cast<double>(d.compared) : 0;
  return d;
}

/// One table row.
struct Row {
  std::string name;
  std::string description;
  size_t flows = 0;
  bool replay_equal = false;
  Diff no_lat;
  Diff lat;
  double hc_simulate_s = 0;
  double hc_replay_cold_s = 0;  ///< first replay in the process
  double hc_replay_s = 0;       ///< second replay (warm heap)
  SimgridRun sg0;  // without latencies (times only; vectors dropped)
  SimgridRun sg1;  // with latencies
  bool ok = false;
};

/// Simulates case `k` in hcpsim, replays its flows in FlowNetwork and (in child processes) in SimGrid without and
/// with latencies, prints the worst flow of each SimGrid run, and returns the table row (ok = false on a failed run).
Row run_case(const Case& k, const std::vector<std::string>& extra_cfg) {
  Row row;
  row.name = k.name;
  row.description = k.description;
  const int64_t cp = k.a2a_size * k.p2p_size;
  const hcpsim::AttentionShape shape = llama3_8b_shape(cp);
  const hcpsim::CpLayout layout(k.a2a_size, k.p2p_size, shape.seq_length);

  // 1. hcpsim: build and simulate the layer (full simulation: SimResult::flows are the flows the network ran).
  const auto t0 = std::chrono::steady_clock::now();
  const hcpsim::Schedule schedule = hcpsim::build_schedule(k.cp_comm_type, layout, shape);
  const hcpsim::Topology topology = hcpsim::Topology::from_cluster(k.cluster);
  hcpsim::sim::SimOptions options;
  options.record_timeline = false;
  options.symmetry_reduction = false;
  const hcpsim::sim::SimResult result = hcpsim::sim::simulate(schedule, k.cluster, topology, k.gpu_of_cp_rank, options);
  row.hc_simulate_s = seconds_since(t0);
  const auto& flows = result.flows;
  row.flows = flows.size();

  // 2. hcpsim replay of the same flow set in a fresh FlowNetwork, twice: the first run pays the first touch of its
  // heap pages (slow on the build VM, see "CPU oracle" in bench/RESULTS.md), the second reuses them. As SimGrid's
  // replay actor (one sleep_until per flow), and as the simulator, which starts a flow when its sender gets there,
  // the flows start one after the other: each start event schedules the next (flows in start order, ties in flow
  // order), so the queue holds the flows in flight, not every flow of the layer. The closures capture 16 bytes
  // (std::function's inline buffer): no heap allocation per flow in the harness.
  std::vector<TimePs> drained(flows.size(), -1);
  const std::vector<size_t> all_by_start = start_order(flows, false);
  auto replay = [&]() {
    std::fill(drained.begin(), drained.end(), -1);
    const auto t1 = std::chrono::steady_clock::now();
    {
      hcpsim::sim::EventQueue queue;
      std::vector<double> capacities;
      capacities.reserve(topology.links().size());
      for (const auto& l : topology.links()) capacities.push_back(l.bandwidth_bytes_per_s);
      hcpsim::sim::FlowNetwork network(queue, std::move(capacities), kDrainPriority, kRecomputePriority);
      ChainedStarts starts{queue, network, flows, all_by_start, drained};
      starts.schedule_next();
      queue.run();
    }
    const double s = seconds_since(t1);
    bool equal = true;
    for (size_t i = 0; i < flows.size(); ++i) equal = equal && drained[i] == flows[i].drained_ps;
    row.replay_equal = row.replay_equal && equal;
    return s;
  };
  row.replay_equal = true;
  row.hc_replay_cold_s = replay();
  row.hc_replay_s = replay();

  std::vector<TimePs> route_latency_ps(flows.size(), 0);
  for (size_t i = 0; i < flows.size(); ++i)
    route_latency_ps[i] = hcpsim::sim::seconds_to_ps(topology.route_latency_s(flows[i].route));

  // 3. SimGrid, without and with latencies.
  for (const bool with_latency : {false, true}) {
    SimgridRun sg = simgrid_replay_in_child(topology, flows, with_latency, extra_cfg);
    if (!sg.ok) {
      std::fprintf(stderr, "%s: SimGrid run (latency %s) failed\n", k.name.c_str(), with_latency ? "on" : "off");
      return row;
    }
    const Diff d = compare(flows, drained, route_latency_ps, sg, with_latency);
    const auto& w = flows[d.worst];
    const double w_hc = static_cast<double>(drained[d.worst] + (with_latency ? route_latency_ps[d.worst] : 0) -
                                            w.start_ps);
    std::printf("  %s latency %-3s: worst flow %zu: %lld B cp %lld -> %lld, %zu links, start %lld ps, FCT hcpsim "
                "%.6f us, SimGrid %.6f us (rel %.3g); start mismatches %lld\n",
                k.name.c_str(), with_latency ? "on" : "off", d.worst, static_cast<long long>(w.bytes),
                static_cast<long long>(w.src_cp_rank), static_cast<long long>(w.dst_cp_rank), w.route.size(),
                static_cast<long long>(w.start_ps), w_hc * 1e-6,
                (sg.finish_s[d.worst] * hcpsim::sim::kPsPerSecond - static_cast<double>(w.start_ps)) * 1e-6,
                d.max_rel, static_cast<long long>(d.start_mismatch));
    std::fflush(stdout);
    (with_latency ? row.lat : row.no_lat) = d;
    sg.start_s.clear();
    sg.finish_s.clear();
    (with_latency ? row.sg1 : row.sg0) = sg;
  }
  row.ok = true;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names;
  std::vector<std::string> extra_cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--cfg=", 0) == 0 || a.rfind("--log=", 0) == 0) {
      extra_cfg.push_back(a);
    } else {
      names.push_back(a);
    }
  }
  if (names.empty()) names = {"a2a8", "ring4", "shared_nic", "a2a_nic", "large512"};
  std::vector<Case> cases;
  for (const auto& n : names) {
    Case k = make_case(n);
    if (k.name.empty()) {
      std::fprintf(stderr, "unknown case '%s' (a2a8 ring4 shared_nic a2a_nic large512 p2p512)\n", n.c_str());
      return 2;
    }
    cases.push_back(k);
  }
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);
  std::printf("SimGrid %d.%d.%d; settings:", major, minor, patch);
  for (const auto& c : kSimgridConfig) std::printf(" %s", c.c_str());
  for (const auto& c : extra_cfg) std::printf(" %s", c.c_str());
  std::printf("\n");

  std::vector<Row> rows;
  bool all_ok = true;
  for (const auto& k : cases) {
    std::printf("case %s: %s\n", k.name.c_str(), k.description.c_str());
    std::fflush(stdout);
    rows.push_back(run_case(k, extra_cfg));
    all_ok = all_ok && rows.back().ok;
  }

  std::printf("\n| case | flows | replay = sim | FCT rel. diff, no latency: max / mean | with latency: max / mean | "
              "hcpsim simulate s | hcpsim replay s: 1st / 2nd | SimGrid s (platform + run) | SimGrid / hcpsim: 1st / 2nd |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    if (!r.ok) {
      std::printf("| %s | %zu | failed | | | | | | |\n", r.name.c_str(), r.flows);
      continue;
    }
    const double sg_s = r.sg0.platform_s + r.sg0.run_s;
    std::printf("| %s | %zu | %s | %.2e / %.2e | %.2e / %.2e | %.3f | %.4f / %.4f | %.3f (%.3f + %.3f) | "
                "%.1fx / %.1fx |\n",
                r.name.c_str(), r.flows, r.replay_equal ? "yes" : "NO", r.no_lat.max_rel, r.no_lat.mean_rel,
                r.lat.max_rel, r.lat.mean_rel, r.hc_simulate_s, r.hc_replay_cold_s, r.hc_replay_s, sg_s,
                r.sg0.platform_s, r.sg0.run_s, sg_s / r.hc_replay_cold_s, sg_s / r.hc_replay_s);
  }
  return all_ok ? 0 : 1;
}
