#pragma once
/// Flow-level network model: every transfer is a flow over a fixed route of directed links; the rates of all
/// active flows are max-min fair over the link capacities (progressive filling).
///
/// Model (and its limits):
/// * A flow's rate is constant between changes of the set of active flows. When a flow starts or drains, only
///   the connected component of flows that share links (transitively) with it is recomputed; all starts and
///   ends at one timestamp are batched into one recomputation (an event at priority `recompute_priority`,
///   after every other event of that time). A batch is split into its connected components, and each is filled
///   on its own: components share no link, so the rates are those of one filling over their union.
/// * Progressive filling: repeatedly take the link with the smallest fair share (remaining capacity / unfrozen
///   flows; ties → lowest link id), give that share to its unfrozen flows and freeze them. The links of a
///   component wait in a min-heap keyed by (fair share, link id), so picking the bottleneck costs O(log links)
///   instead of a scan; the arithmetic (which subtraction, in which order) is that of the plain scan. A component
///   of one flow alone on its links (each listed once) gets its route's smallest capacity without the heap: the
///   value the filling's one round gives.
/// * No packets, no congestion control, no head-of-line blocking, no switch buffers, no PCIe/NVLink protocol
///   overhead beyond the configured bandwidths; rates change instantly. Latency is added by the caller
///   (route latency + per-message software latency), not by this class.
/// * Rates and remaining bytes are doubles; a drain time is rounded once to integer ps (seconds_to_ps). Event
///   order is decided by those integers only; drains are (re)scheduled in flow id order, so a run is
///   deterministic.

#include <cstdint>
#include <functional>
#include <vector>

#include "hcpsim/sim/event_queue.hpp"

namespace hcpsim::sim {

/// Per-link totals over a run.
struct LinkUsage {
  int64_t bytes = 0;    ///< bytes of all flows routed over the link
  TimePs busy_ps = 0;   ///< time during which at least one flow was active on it
  int64_t flows = 0;    ///< flows routed over it
};

/// The flow network. Single-threaded; drives its own completion events on the caller's EventQueue.
class FlowNetwork {
 public:
  /// Callback run when a flow's last byte has left its last link.
  using Done = std::function<void()>;

  /// @param queue  the simulator's event queue (must outlive this object).
  /// @param capacities_bytes_per_s  one entry per directed link (> 0, HCPSIM_ASSERT).
  /// @param completion_priority  priority of drain events; @param recompute_priority  of the batched
  ///   recomputation (should be the largest priority in use, so that it runs after everything else at a time).
  FlowNetwork(EventQueue& queue, std::vector<double> capacities_bytes_per_s, int completion_priority,
              int recompute_priority);

  /// Starts a flow of `bytes` over `route` (link ids) now; `on_drained` runs when its last byte left the last
  /// link (at the drain event). A flow with no links or 0 bytes drains at once (an event at now()).
  /// @return the flow id (0, 1, … in start order).
  int64_t start_flow(const std::vector<int64_t>& route, int64_t bytes, Done on_drained);

  /// Current rate of an active flow (bytes/s; 0 before its first recomputation, and 0 once it drained).
  /// O(flows in flight); for tests.
  [[nodiscard]] double rate(int64_t flow) const;
  /// Usage of every link so far (busy time of links still active counts up to the last change).
  [[nodiscard]] const std::vector<LinkUsage>& usage() const { return usage_; }
  /// Number of rate recomputations run (one per batch of starts and ends at one time; a flow that ends alone on
  /// its links changes no rate and asks for none). For benchmarks.
  [[nodiscard]] int64_t recompute_count() const { return recomputes_; }

 private:
  /// A slot holding one flow from its start to its drain, then reused by a later flow (so memory follows the
  /// flows in flight, not all flows ever started, and a route's storage is reused).
  struct Flow {
    int64_t id = -1;              ///< flow id of the occupant; −1 while the slot is free
    double remaining_bytes = 0;
    double rate = 0;              ///< bytes/s
    TimePs updated_ps = 0;        ///< time up to which remaining_bytes is exact
    EventId drain_event = -1;
    std::vector<int64_t> links;   ///< the route
    Done on_drained;
    bool active = false;
    /// recompute() scratch: 0 outside a batch, 1 in the batch and unfrozen, 2 frozen at its old rate, 3 frozen
    /// at a new rate.
    char batch_state = 0;
  };
  /// An active flow on a link: its id (the order) and its slot.
  struct LinkFlow {
    int64_t id;
    int64_t slot;
  };
  /// A link waiting in the progressive-filling heap: its fair share when pushed, and its id.
  struct ShareEntry {
    double share;
    int64_t link;
  };
  void mark_dirty(const std::vector<int64_t>& links);
  void recompute();
  void fill_component(size_t links_begin, size_t links_end, size_t flows_begin, size_t flows_end);
  void drained(int64_t slot);
  void link_active_change(int64_t link, int delta);

  EventQueue& queue_;
  std::vector<double> capacity_;
  int completion_priority_;
  int recompute_priority_;
  int64_t flows_started_ = 0;
  std::vector<Flow> flows_;                        ///< slots
  std::vector<int64_t> free_slots_;
  std::vector<std::vector<LinkFlow>> link_flows_;  ///< active flows per link, ascending id
  std::vector<LinkUsage> usage_;
  std::vector<TimePs> busy_since_;                 ///< per link: start of the current busy interval
  std::vector<char> link_dirty_;
  std::vector<int64_t> dirty_links_;
  bool recompute_pending_ = false;
  int64_t recomputes_ = 0;
  // Scratch for recompute(), kept to avoid reallocation. Per link: 0 outside the batch, 1 in it, 2 in it and
  // touched by the current filling round; remaining capacity, unfrozen flows and current fair share.
  std::vector<char> link_seen_;
  std::vector<double> link_cap_;
  std::vector<int64_t> link_unfrozen_;
  std::vector<double> link_share_;
  std::vector<int64_t> batch_links_;   ///< links of the batch, component after component
  std::vector<LinkFlow> batch_flows_;  ///< flows of the batch, component after component
  std::vector<int64_t> changed_links_;
  std::vector<int64_t> still_shared_;  ///< drained(): the links of the drained flow that other flows still use
  std::vector<ShareEntry> heap_;
};

}  // namespace hcpsim::sim
