#pragma once
/// The discrete-event simulator: times one layer's Schedule (forward and backward) on a cluster topology, op by
/// op, with the compute durations of cost_model.hpp and a flow-level network (flow_network.hpp).
///
/// Execution semantics (the IR's ordering contract, schedule.hpp, as this executor times it):
/// * Each CP rank runs on one GPU and has three streams (Stream::compute, Stream::cp, Stream::comm). The ops of a
///   stream start in RankProgram::ops list order; an op starts when the previous op of its stream has finished
///   and all of its `deps` have finished.
/// * Compute ops (attention blocks, lse_merge, out_correction, copy) need their cost-model duration of GPU
///   time. Kernels that run at the same time on different streams of one GPU share its SMs equally
///   (processor sharing, SimOptions::share_gpu_between_kernels), and while a communication op of the GPU is
///   running they progress GpuSpec::compute_slowdown_during_comm times slower. alloc and free take 0 and change
///   the rank's live memory when they start.
/// * A message costs: per-message software latency (ClusterSpec::message_latency_s), then a flow of its bytes
///   over its route at the max-min fair rate, then the route's latency. A SendRecvOp's message (source, destination,
///   tag) starts when both the sender's op and the receiver's op have started (rendezvous); the op finishes
///   when its send has been delivered and its receive has arrived. Equal keys match in issue order.
/// * AllToAllOp, AllGatherOp and ReduceScatterOp start when every member of the group has reached the op with
///   the same tag; they are concurrent pairwise messages (all-to-all: input / A to each other member;
///   all-gather: the whole input to each other member; reduce-scatter: input / n to each other member), and all
///   members finish together when the last message is delivered.
/// * If no event is left while ops remain, the schedule deadlocks: HCPSIM_ASSERT with the blocked ops.
///
/// Routes: Topology::route with flow id = the ordinal of the message among the messages from its source rank to its
/// destination rank (0, 1, …): a function of the schedule alone, not of the order in which the run interleaves
/// ranks, so a reduced run (SimOptions::symmetry_reduction) routes every message as the full run does.
///
/// Symmetry reduction (SimOptions::symmetry_reduction, docs/simulator.md "Symmetry reduction"): when the a2a group
/// of every ring position is one whole node (A = GPUs per node, one NIC per GPU, rail-optimised fabric), the A
/// ranks of a group are identical up to relabelling (a2a_rank a ↔ GPU a of the node ↔ rail a). Only the a2a_rank 0
/// ranks (the representatives) are executed; the all-to-all flows of every member run in the network, and every
/// ring message of a representative stands for its A − 1 images on the other rails, whose routes, bytes, link
/// usage and message counts are accounted for. The per-rank results of an image equal its representative's.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule.hpp"
#include "hcpsim/sim/topology.hpp"
#include "hcpsim/sim/cost_model.hpp"
#include "hcpsim/sim/event_queue.hpp"

namespace hcpsim::sim {

/// Number of Phase values (forward, backward).
constexpr int kPhaseCount = 2;

/// One executed op: when it ran on which stream of which rank.
struct TimelineEntry {
  int64_t cp_rank = 0;
  Stream stream = Stream::compute;
  OpIndex op_index = 0;      ///< index in RankProgram::ops
  OpKind kind = OpKind::alloc;
  Phase phase = Phase::forward;
  int64_t ring_step = -1;    ///< Op::ring_step
  TimePs start_ps = 0;       ///< when the op started (for comm ops: when it was reached, before the rendezvous)
  TimePs end_ps = 0;         ///< when it finished
  double flops = 0;          ///< Op::flops
  int64_t bytes = 0;         ///< Op::bytes
  Label label;               ///< Op::label
  /// alloc and free: the rank's live bytes right after the op changed them (the Chrome trace's memory counter);
  /// −1 for every other op.
  int64_t live_bytes = -1;
  /// alloc and free: the ordinal of this change among the rank's memory changes in run order (0, 1, …), which
  /// orders changes that start at the same picosecond; −1 for every other op.
  int64_t memory_change = -1;
};

/// Number and total size of messages. An all-to-all over A members counts A·(A−1) messages of
/// input bytes / A each (what leaves each member); an all-gather over n members n·(n−1) messages of the
/// member's input; a reduce-scatter n·(n−1) messages of input / n; a SendRecvOp one message per send.
struct MessageTotals {
  int64_t count = 0;
  int64_t bytes = 0;
};

/// Message totals per phase (forward, backward) and link level (intra_node, inter_node),
/// indexed [static_cast<int>(phase)][static_cast<int>(level)]. The phase is the sender's op phase.
using MessageTable = std::array<std::array<MessageTotals, kLinkLevelCount>, kPhaseCount>;

/// Per-rank results. Busy times are measures of unions of op intervals [start_ps, end_ps), so two
/// overlapping kernels on the compute and cp streams count once. Ops are classified by stream (compute and
/// cp vs comm), as the builders put every communication op, and only those, on the comm stream.
/// Where one rank's time goes in one phase: summed durations (end − start) of its compute and cp stream ops by
/// kind, and the phase's exposed communication. The four op sums add up to the phase's part of
/// RankStats::compute_kernel_ps.
struct TimeBreakdown {
  TimePs attention_kernel_ps = 0;  ///< attn_fwd_block, attn_bwd_block
  TimePs merge_correction_ps = 0;  ///< lse_merge, out_correction
  TimePs copy_ps = 0;              ///< copy (ring-buffer and a2a reorder copies, dQ/dKV accumulation copies)
  TimePs other_compute_ps = 0;     ///< gemm, elementwise (and anything else on a compute stream)
  /// The phase's span on this rank (first op start to last op end) minus the time its compute and cp streams
  /// run an op of the phase: waiting for messages and peers.
  TimePs exposed_comm_ps = 0;
  /// Part of the four op sums: full-speed GPU time the kernels did not get because a communication op ran on
  /// the GPU beside them (GpuSpec::compute_slowdown_during_comm; NCCL's CTAs hold SMs). Kernels of the two
  /// compute streams sharing the GPU with each other lose nothing in total and add nothing here. 0 with
  /// SimOptions::share_gpu_between_kernels off or a slowdown of 1.
  TimePs comm_slowdown_ps = 0;
  /// attention_kernel_ps + merge_correction_ps + copy_ps + other_compute_ps.
  [[nodiscard]] TimePs compute_ps() const { return attention_kernel_ps + merge_correction_ps + copy_ps + other_compute_ps; }
};

struct RankStats {
  int64_t cp_rank = 0;
  int64_t node = 0;                 ///< node index of the rank's GPU
  int64_t gpu = 0;                  ///< global GPU index (Topology) the rank runs on
  TimePs end_ps = 0;                ///< end of the rank's last op
  /// Time during which the compute stream or the cp stream runs an op (ps).
  TimePs compute_busy_ps = 0;
  /// Time during which the comm stream runs an op, waiting in a rendezvous included (ps).
  TimePs comm_busy_ps = 0;
  /// Exposed communication: layer time (SimResult::total_ps) − compute_busy_ps, i.e. the time of the layer
  /// during which this GPU runs no compute kernel (DESIGN: waiting for messages, for late peers and for the
  /// other ranks to finish all count). Communication hidden behind compute is not exposed.
  TimePs exposed_comm_ps = 0;
  /// Sum of the durations (end − start) of the ops on the compute and cp streams; exceeds compute_busy_ps
  /// when the two streams overlap (with a shared GPU, overlapping kernels are also stretched).
  TimePs compute_kernel_ps = 0;
  /// compute_kernel_ps and the exposed communication by phase (forward, backward) and op category.
  std::array<TimeBreakdown, kPhaseCount> time_breakdown{};
  int64_t input_bytes = 0;          ///< bytes of RankProgram::inputs buffers, live from t = 0
  int64_t peak_memory_bytes = 0;    ///< maximum live bytes (inputs + allocated − freed) over the run
  /// Maximum live bytes while forward ops / backward ops run (the phase of the op that allocated last).
  std::array<int64_t, kPhaseCount> phase_peak_memory_bytes{};
  int64_t final_memory_bytes = 0;   ///< live bytes after the last op
  MessageTable messages_sent{};     ///< messages this rank sent
};

/// The link ids of a message's route, shared by the messages that take the same route: a ring sends P messages
/// between each pair and a symmetry-reduced run records every image message, so a run at CP = 4096 records
/// millions of flows over a few thousand routes. One pointer per FlowRecord instead of one link vector each.
/// Immutable once made; behaves as a const std::vector<int64_t> (iterate, size, empty, front, compare).
class SharedRoute {
 public:
  SharedRoute() = default;
  /// Holds `links` (an empty route is held as none).
  SharedRoute(std::vector<int64_t> links)  // NOLINT(google-explicit-constructor): routes are made as vectors
      : links_(links.empty() ? nullptr : std::make_shared<const std::vector<int64_t>>(std::move(links))) {}
  SharedRoute(std::initializer_list<int64_t> links) : SharedRoute(std::vector<int64_t>(links)) {}
  /// The link ids, in order from the source (empty for a message that stays on its GPU).
  [[nodiscard]] const std::vector<int64_t>& links() const;
  operator const std::vector<int64_t>&() const { return links(); }  // NOLINT(google-explicit-constructor)
  [[nodiscard]] std::vector<int64_t>::const_iterator begin() const { return links().begin(); }
  [[nodiscard]] std::vector<int64_t>::const_iterator end() const { return links().end(); }
  [[nodiscard]] size_t size() const { return links().size(); }
  [[nodiscard]] bool empty() const { return links_ == nullptr; }
  [[nodiscard]] int64_t front() const { return links().front(); }
  [[nodiscard]] int64_t back() const { return links().back(); }
  friend bool operator==(const SharedRoute& a, const SharedRoute& b) { return a.links() == b.links(); }

 private:
  std::shared_ptr<const std::vector<int64_t>> links_;
};

/// One message's flow through the network.
struct FlowRecord {
  int64_t src_cp_rank = 0;
  int64_t dst_cp_rank = 0;
  int64_t bytes = 0;
  Phase phase = Phase::forward;  ///< the sender's op phase
  TimePs start_ps = 0;           ///< first byte enters the network (after the software latency)
  TimePs drained_ps = 0;         ///< last byte left the last link (delivery is route latency later)
  SharedRoute route;             ///< link ids
  /// The op of src_cp_rank that sent the message and the op of dst_cp_rank that received it (the SendRecvOp
  /// sides, or the collective op of each member); the Chrome trace draws its arrow between them.
  OpIndex src_op = -1;
  OpIndex dst_op = -1;
};

/// Per-link totals (one entry per directed link of the topology, in link id order).
struct LinkStats {
  std::string from;                  ///< vertex names
  std::string to;
  int64_t from_node = -1;            ///< node of the `from` vertex, −1 for switches
  LinkClass link_class = LinkClass::network;
  double bandwidth_bytes_per_s = 0;
  int64_t bytes = 0;                 ///< bytes carried
  TimePs busy_ps = 0;                ///< time with ≥ 1 active flow
  int64_t flows = 0;                 ///< flows carried
};

/// Utilisation of one link class over the layer: bytes carried, links, and bytes / (capacity · total time)
/// averaged over the class's links (mean) and for the busiest link (max). 0 when the class has no link.
struct LinkClassUtilisation {
  int64_t links = 0;
  int64_t bytes = 0;
  double mean_utilisation = 0;
  double max_utilisation = 0;
};

/// Everything one simulation reports. Times are int64 picoseconds from t = 0 (all ranks start together).
struct SimResult {
  CpCommType cp_comm_type = CpCommType::a2a_p2p;
  int64_t a2a_size = 1;                  ///< A
  int64_t p2p_size = 1;                  ///< P
  bool share_gpu_between_kernels = true; ///< SimOptions used
  /// Forward time: max over ranks of the end of the rank's last forward op.
  TimePs forward_ps = 0;
  /// Start of the backward: min over ranks of the start of the rank's first backward op (0 if none).
  TimePs backward_start_ps = 0;
  /// Backward time: from backward_start_ps to the max over ranks of the end of the last backward op (0 if
  /// none). Ranks may still run forward ops after another rank started its backward, so forward_ps +
  /// backward_ps can exceed total_ps.
  TimePs backward_ps = 0;
  /// Makespan: the end of the last op of any rank.
  TimePs total_ps = 0;
  std::vector<RankStats> ranks;          ///< indexed by cp rank
  /// The busiest GPU: the rank with the largest RankStats::compute_busy_ps (the lowest cp rank among equals), the
  /// rank of most_busy_rank(), whose idle time critical_exposed_comm_ps() is. (It was the largest summed kernel
  /// time, compute_kernel_ps, which counts kernels overlapping on two streams twice, so "the busiest GPU" of the
  /// time breakdown could be another GPU than the one of the exposed-communication split.)
  int64_t busiest_cp_rank = 0;
  MessageTable messages{};               ///< all ranks
  /// FLOPs per phase, summed over ranks in cp-rank order and over ops in list order (the order
  /// Schedule::total_flops uses); equals Schedule::total_flops(phase).
  std::array<double, kPhaseCount> flops{};
  /// Every op of every rank, ordered by (cp_rank, op_index); empty when SimOptions::record_timeline is false.
  std::vector<TimelineEntry> timeline;
  int64_t event_count = 0;               ///< events the engine ran
  std::vector<FlowRecord> flows;         ///< every message, in start order (empty without record_flows)
  int64_t flow_count = 0;                ///< messages' flows, recorded or not (= flows.size() when recorded)
  std::vector<LinkStats> links;          ///< every directed link, in id order
  int64_t network_recomputes = 0;        ///< batched max-min recomputations
  int64_t node_count = 0;                ///< nodes of the topology
  /// Ranks whose programs were executed: all of them, or the representatives (a2a_rank 0) of a symmetry-reduced
  /// run. event_count and network_recomputes count the executed run only.
  int64_t simulated_ranks = 0;
  /// true: the run was symmetry-reduced (SimOptions::symmetry_reduction).
  bool symmetry_reduced = false;
  /// false only for a reduced run whose image messages could have been rated differently from their
  /// representatives' (a shared link without headroom, see docs/simulator.md): its results are then not
  /// guaranteed to equal the full simulation's, and callers must rerun without the reduction. true otherwise.
  bool symmetry_exact = true;
  /// Why the reduction was not exact (empty when symmetry_exact).
  std::string symmetry_note;

  /// Utilisation of one link class (nvlink, pcie, network) over total_ps.
  [[nodiscard]] LinkClassUtilisation link_class_utilisation(LinkClass c) const;

  /// Message totals of one phase and level.
  [[nodiscard]] const MessageTotals& message_totals(Phase phase, LinkLevel level) const {
    return messages[static_cast<size_t>(phase)][static_cast<size_t>(level)];
  }
  /// FLOPs of one phase.
  [[nodiscard]] double phase_flops(Phase phase) const { return flops[static_cast<size_t>(phase)]; }

  /// The rank with the largest RankStats::compute_busy_ps (the first of equals), the GPU whose idle time
  /// critical_exposed_comm_ps() is; nullptr without ranks. busiest_cp_rank is its cp rank.
  [[nodiscard]] const RankStats* most_busy_rank() const;
  /// Exposed communication of the busiest GPU: total_ps − the largest RankStats::compute_busy_ps (ps), the time of
  /// the run during which the GPU with the most kernel time runs none: messages its kernels could not hide and
  /// waits for the peers whose data it needs. 0 without ranks.
  [[nodiscard]] TimePs critical_exposed_comm_ps() const;
  /// Load imbalance: the largest minus the smallest RankStats::compute_busy_ps (ps), the extra time the least busy
  /// GPU idles besides what the busiest one does. The two split the worst GPU's idle time exactly: max over ranks
  /// of exposed_comm_ps = critical_exposed_comm_ps() + load_imbalance_ps(). 0 without ranks.
  [[nodiscard]] TimePs load_imbalance_ps() const;
};

/// Modelling choices of simulate().
struct SimOptions {
  /// true: kernels running at the same time on one GPU (compute, cp or comm stream) share its SMs equally —
  /// with n running, each progresses at 1/n of its roofline speed (work-conserving processor sharing).
  /// false: every stream computes at full speed whatever the others do (an idealised upper bound on
  /// overlap that can exceed the GPU's peak; kernel durations then equal the cost model's exactly).
  /// Source: assumption; concurrent kernels on one GPU divide its SMs, and TE overlaps consecutive ring
  /// steps on two streams only to fill the SMs left by wave quantization (docs/algorithm.md §4.3).
  bool share_gpu_between_kernels = true;
  /// true: SimResult::timeline holds every op (needed for the Chrome trace); false: it stays empty (all other
  /// results are unchanged), which saves a copy of every op label at large CP.
  bool record_timeline = true;
  /// true: SimResult::flows holds every message's FlowRecord (the Chrome trace's arrows and link events, the
  /// timeline chart, a flow replay); false: it stays empty and SimResult::flow_count still counts them (all
  /// other results are unchanged). A large run holds millions of records (72 bytes each), most of its memory
  /// after the ops; without them a message's record lives only while it is in flight.
  bool record_flows = true;
  /// true: simulate one representative per class of identical ranks (a2a_rank 0 of every a2a group) and
  /// account for the others (docs/simulator.md "Symmetry reduction"). Requires symmetry_reduction_blocker() to
  /// return "" (HCPSIM_ASSERT otherwise); only the representatives' programs are read, so the schedule may come
  /// from build_schedule_ranks(…, symmetry_representatives(…)). Results equal the full simulation's except
  /// event_count, network_recomputes and the order of SimResult::flows; check SimResult::symmetry_exact.
  bool symmetry_reduction = false;
  /// true: the schedule comes straight from a builder that ran Schedule::check_invariants on it (build_schedule,
  /// build_layer_schedule) and has not been changed since, so release builds of simulate() do not check it a
  /// second time (debug builds still do, and run check_hazards). false (default): simulate() checks it, as it
  /// must for a schedule from anywhere else (a test, a fault injector's edit, a caller's own builder).
  bool schedule_checked = false;
  /// Threads that build the schedules of simulate_attention and simulate_step (one rank program per work item,
  /// core/parallel_for.hpp), check a schedule's invariants (Schedule::check_invariants) and index each rank's
  /// program before the run; the event loop itself runs on one. Every result is the same for any count (>= 1).
  /// A schedule that breaks an invariant inside several ranks' programs aborts with whichever violation a thread
  /// reaches first (on one thread: the first in rank and op order).
  int threads = 1;
};

/// Why the symmetry reduction cannot be used for this placement, or "" when it can. It applies when the
/// cp_comm_type's row says its a2a groups are symmetric (CpVariant::symmetric_a2a_groups: a2a+p2p and a2a) with
/// A ≥ 2, the cluster's topology is generated (no explicit graph) on a rail-optimised fabric with one NIC per GPU,
/// A = gpus_per_node, and the rank at position a of its symmetry class (CpLayout::symmetry_classes, its a2a
/// group) runs on GPU a of the node that holds the whole class (so it uses rail a only).
/// @param gpu_of_cp_rank  global GPU index of each CP rank (size A·P).
std::string symmetry_reduction_blocker(CpCommType cp_comm_type, int64_t a2a_size, int64_t p2p_size,
                                       const ClusterSpec& cluster, const std::vector<int64_t>& gpu_of_cp_rank);

/// The representatives of the symmetry reduction: those of the layout's symmetry classes
/// (CpLayout::a2a_group_classes), the CP ranks with a2a_rank 0, i.e. 0, A, 2A, … (P entries).
std::vector<int64_t> symmetry_representatives(int64_t a2a_size, int64_t p2p_size);

/// Simulates `schedule` on `topology`.
/// @param schedule  a built schedule; check_invariants() (and check_hazards() in debug builds) is run first
///   (HCPSIM_ASSERT on violation), except with options.symmetry_reduction, where only the representatives'
///   programs are read (the builder checked them), and in release builds with options.schedule_checked.
/// @param cluster   GPU rates, efficiencies and the per-message software latency.
/// @param topology  the graph messages are routed on (Topology::from_cluster(cluster) usually).
/// @param gpu_of_cp_rank  global GPU index of each CP rank (size = schedule.ranks.size(), distinct, each
///   < topology.gpu_count()); from the Megatron rank order, e.g. cp_rank_gpus().
/// @param options  modelling choices (default: kernels share the GPU).
/// @return timings, per-rank stats, message and FLOP totals, the timeline, flows and link usage.
/// HCPSIM_ASSERT on a deadlock (the report lists each rank's blocked stream heads), on a message whose two
/// sides differ in size, on alloc of a live buffer or free of a dead one.
SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const Topology& topology,
                   const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options = {});

/// Simulates on the generated topology of `cluster` (with at least max(node_of_cp_rank) + 1 nodes), placing
/// the ranks of each node on its GPUs 0, 1, … in cp-rank order.
/// @param node_of_cp_rank  node index of each CP rank; at most gpus_per_node ranks per node (HCPSIM_ASSERT).
SimResult simulate(const Schedule& schedule, const ClusterSpec& cluster, const std::vector<int64_t>& node_of_cp_rank,
                   const SimOptions& options = {});

/// Node index of every CP rank of the (tp_rank, dp_rank, pp_rank) = (0, 0, 0) CP group: the `node` fields of
/// place_cp_group() (Megatron rank order, node = global_rank / gpus_per_node), as simulate() takes them.
/// @param order  a valid Megatron order, e.g. "tp-cp-ep-dp-pp"; @param gpus_per_node ≥ 1.
/// Source: megatron/core/parallel_state.py RankGenerator; docs/algorithm.md §2.2 "Node mapping".
std::vector<int64_t> cp_rank_nodes(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node);

/// Global GPU index (= global rank) of every CP rank of that group, as the topology-based simulate() takes them.
std::vector<int64_t> cp_rank_gpus(const std::string& order, const ParallelSizes& sizes, int64_t gpus_per_node);

}  // namespace hcpsim::sim
