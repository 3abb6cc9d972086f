#pragma once
// Private to sim/: the discrete-event engine behind simulate() (simulator.hpp). It owns the event loop and the
// stream heads of every rank — an op starts when its stream predecessor and its deps have finished — and hands
// each started op to the part that runs it: memory accounting (alloc, free), the GPUs (compute kernels) or the
// rendezvous (communication). At the end it reports a deadlock or collects the results.

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_sharing.hpp"
#include "memory_accounting.hpp"
#include "message_transport.hpp"
#include "rendezvous.hpp"
#include "sim_context.hpp"

namespace hcpsim::sim::detail {

/// One simulation run. Arguments as simulate()'s, already validated by it.
class Engine final : public OpFinisher {
 public:
  Engine(const Schedule& schedule, const ClusterSpec& cluster, const Topology& topology,
         const std::vector<int64_t>& gpu_of_cp_rank, const SimOptions& options);

  /// Runs every executed rank's program to the end. HCPSIM_ASSERT on a deadlock (with a report of the blocked
  /// stream heads). Call once.
  SimResult run();

  /// Op i of `rank` finishes now: advances its stream and starts the ops of the rank that became ready.
  void finish_op(int64_t rank, OpIndex i) override;

 private:
  /// The messages `op` of an executed rank sends (images included in a reduced run): what reserve_for_run sizes
  /// the flow records for.
  [[nodiscard]] int64_t messages_of(const Op& op) const;
  /// Sizes the flow records exactly from `messages_per_rank` (messages_of summed over each executed rank's ops),
  /// so that a large run does not regrow (and copy) them while it runs. Capacity only.
  void reserve_for_run(const std::vector<int64_t>& messages_per_rank);
  /// Sets every op's remaining_deps of `rank` to its number of deps and indexes who depends on whom
  /// (RankProgress::dependents). HCPSIM_ASSERT on a dep that does not point to an earlier op.
  void index_dependents(int64_t rank);
  /// Starts the head op of every stream of `rank` whose stream predecessor and deps have finished, in stream
  /// order (compute, cp, comm).
  void try_start_ready(int64_t rank);
  void start_op(int64_t rank, OpIndex i);

  // ---- end of run ----
  void check_all_finished() const;
  [[nodiscard]] std::string describe_op(int64_t rank, OpIndex i) const;
  [[nodiscard]] std::string blocked_reason(int64_t rank, OpIndex i) const;

  SimContext ctx_;
  MemoryAccounting memory_;
  GpuSharing gpu_;
  MessageTransport transport_;
  Rendezvous rendezvous_;
};

}  // namespace hcpsim::sim::detail
