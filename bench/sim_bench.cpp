// Simulator benchmark: one attention layer, forward + backward, of an a2a+p2p schedule with the a2a
// inside DGX H100 nodes (A = 8) and the ring across nodes (P = CP / 8), on the rail-optimised fabric.
// Prints build time, simulation wall time, events, events/s and peak RSS (getrusage; the process-wide peak, so
// run one CP per process for a clean number). The timeline is not recorded (as `hcpsim simulate` without --trace). Wall-clock timing lives here only (docs/architecture.md "Conventions").
// By default the symmetry reduction is used (as `hcpsim simulate` does for this placement): only the P
// representatives (a2a_rank 0) are built and executed; `full` builds and simulates all CP ranks.
//
//   hcpsim_sim_bench CP [seq_per_rank] [full]      e.g. hcpsim_sim_bench 512, hcpsim_sim_bench 512 4096 full

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama3_8b_shape.hpp"
#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/simulator.hpp"

namespace {

// A2A size: one DGX node of 8 GPUs. Source: DGX H100 has 8 GPUs per node (cluster_spec.cpp).
constexpr int64_t kA2aSize = 8;
// Default tokens per CP rank. Source: assumption, a typical long-context shard (128k tokens over CP = 32).
constexpr int64_t kDefaultSeqPerRank = 4096;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CP [seq_per_rank]\n", argv[0]);
    return 2;
  }
  const int64_t cp = std::atoll(argv[1]);
  const int64_t seq_per_rank = argc > 2 ? std::atoll(argv[2]) : kDefaultSeqPerRank;
  const bool full = argc > 3 && std::string(argv[3]) == "full";
  if (cp < kA2aSize || cp % kA2aSize != 0 || seq_per_rank < 2 || seq_per_rank % 2 != 0) {
    std::fprintf(stderr, "CP must be a multiple of %lld and seq_per_rank even\n", static_cast<long long>(kA2aSize));
    return 2;
  }
  const int64_t p2p = cp / kA2aSize;
  const hcpsim::AttentionShape shape = hcpsim::bench::llama3_8b_shape(cp, seq_per_rank);
  const auto cluster = *hcpsim::cluster_preset("dgx-h100", cp / kA2aSize);

  std::vector<int64_t> gpus;
  for (int64_t r = 0; r < cp; ++r) gpus.push_back(r);  // tp-cp-ep-dp-pp with TP = 1: cp rank = global rank
  const bool reduce =
      !full && hcpsim::sim::symmetry_reduction_blocker(hcpsim::CpCommType::a2a_p2p, kA2aSize, p2p, cluster, gpus).empty();
  const hcpsim::CpLayout layout(kA2aSize, p2p, shape.seq_length);

  const auto t0 = std::chrono::steady_clock::now();
  const hcpsim::Schedule schedule =
      reduce ? hcpsim::build_schedule_ranks(hcpsim::CpCommType::a2a_p2p, layout, shape,
                                            hcpsim::sim::symmetry_representatives(kA2aSize, p2p))
             : hcpsim::build_schedule(hcpsim::CpCommType::a2a_p2p, layout, shape);
  const double build_s = seconds_since(t0);
  int64_t ops = 0;
  for (const auto& r : schedule.ranks) ops += static_cast<int64_t>(r.ops.size());

  const auto t1 = std::chrono::steady_clock::now();
  const hcpsim::Topology topology = hcpsim::Topology::from_cluster(cluster);
  hcpsim::sim::SimOptions options;
  options.record_timeline = false;  // as `hcpsim simulate` without --trace
  options.record_flows = false;
  options.symmetry_reduction = reduce;
  options.schedule_checked = true;  // build_schedule checked it, as `hcpsim simulate` relies on
  const hcpsim::sim::SimResult result = hcpsim::sim::simulate(schedule, cluster, topology, gpus, options);
  const double sim_s = seconds_since(t1);

  std::printf("cp=%lld A=%lld P=%lld mode=%s exact=%d nodes=%lld seq=%lld ops=%lld flows=%zu recomputes=%lld "
              "events=%lld build_s=%.3f sim_s=%.3f total_s=%.3f events_per_s=%.3g peak_rss_MiB=%.1f layer_ps=%lld\n",
              static_cast<long long>(cp), static_cast<long long>(kA2aSize), static_cast<long long>(p2p),
              reduce ? "reduced" : "full", result.symmetry_exact ? 1 : 0,
              static_cast<long long>(cluster.nodes), static_cast<long long>(shape.seq_length),
              static_cast<long long>(ops), static_cast<size_t>(result.flow_count), static_cast<long long>(result.network_recomputes),
              static_cast<long long>(result.event_count), build_s, sim_s, build_s + sim_s,
              static_cast<double>(result.event_count) / sim_s, peak_rss_mib(),
              static_cast<long long>(result.total_ps));
  return 0;
}
