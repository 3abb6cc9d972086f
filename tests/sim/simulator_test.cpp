#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/sim/simulator.hpp"
#include "hcpsim/sim/trace_writer.hpp"
#include "sim_test_util.hpp"

using namespace hcpsim;
using namespace hcpsim::sim;
using hcpsim::sim::test::empty_schedule;
using hcpsim::sim::test::ProgramWriter;
using hcpsim::sim::test::round_cluster;

namespace {

// A 2-rank schedule: rank 0 sends its input x (1e6 B) to rank 1. Rank 1's receive waits for a local copy
// (5 µs) when `receiver_late`. Rank 0 optionally runs an attention block (20 µs) on its compute stream.
Schedule one_message(bool receiver_late, bool sender_computes) {
  Schedule s = empty_schedule(1, 2);
  {
    ProgramWriter w(s.ranks[0]);
    const BufferId x = w.input("x", 500, 1, 1000);  // [1, 500, 1, 1000] bf16 = 1,000,000 B
    if (sender_computes) {
      const BufferId q = w.input("q", 16, 1, 64);
      const BufferId out = w.declare("out", 16, 1, 64);
      s.ranks[0].buffers.push_back(BufferDecl{"lse", 1, 16, 1, 1, Dtype::fp32});
      const auto lse = static_cast<BufferId>(s.ranks[0].buffers.size() - 1);
      w.alloc(out);
      w.alloc(lse);
      // 1e10 flop at 1e15 · 0.5 flop/s = 20 µs (its few KiB of HBM traffic take < 0.01 µs).
      w.add(AttnFwdBlockOp{q, q, q, {0, 16}, {0, 16}, BlockMask::causal, Section::diagonal, out, lse},
            Stream::compute, {}, "attn", Phase::forward, 1e10);
    }
    w.add(SendRecvOp{1, -1, {x}, {}, 7, 0}, Stream::comm, {}, "send x", Phase::forward, 0, 1'000'000);
  }
  {
    ProgramWriter w(s.ranks[1]);
    const BufferId xr = w.declare("x_recv", 500, 1, 1000);
    const OpIndex a = w.alloc(xr, Stream::comm);
    std::vector<OpIndex> deps{a};
    if (receiver_late) {
      const BufferId src = w.input("y", 500, 1, 1000);
      const BufferId dst = w.declare("y_copy", 500, 1, 1000);
      w.alloc(dst);
      // 3 µs launch + 2e6 B / 1e12 B/s = 5 µs.
      deps.push_back(w.copy(dst, src, 2'000'000, Stream::compute, {}, "copy y"));
    }
    w.add(SendRecvOp{-1, 0, {}, {xr}, 0, 7}, Stream::comm, deps, "recv x");
  }
  return s;
}

const TimelineEntry& entry(const SimResult& r, int64_t rank, const std::string& label) {
  for (const auto& e : r.timeline)
    if (e.cp_rank == rank && e.label == label) return e;
  FAIL("no timeline entry '" << label << "' on rank " << rank);
  return r.timeline.front();
}

// Bytes that leave each rank per phase, computed from the buffer declarations independently of the simulator:
// a SendRecvOp sends the sum of its send buffers; an all-to-all over A members sends (A−1)/A of its input.
std::array<int64_t, 2> expected_bytes(const Schedule& s, int64_t rank) {
  std::array<int64_t, 2> bytes{0, 0};
  const RankProgram& prog = s.ranks[static_cast<size_t>(rank)];
  for (const Op& op : prog.ops) {
    auto& b = bytes[static_cast<size_t>(op.phase)];
    if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
      for (BufferId id : sr->send) b += prog.buffers[static_cast<size_t>(id)].size_bytes();
    } else if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) {
      const auto A = static_cast<int64_t>(a2a->group.size());
      b += prog.buffers[static_cast<size_t>(a2a->input)].size_bytes() / A * (A - 1);
    }
  }
  return bytes;
}

AttentionShape small_shape(int64_t seq_length) { return hcpsim::sim::test::small_attention_shape(seq_length); }

}  // namespace

TEST_CASE("sim: one intra-node send_recv takes latency + bytes/bandwidth, exactly in ps", "[sim]") {
  const Schedule s = one_message(false, false);
  const SimResult r = simulate(s, round_cluster(1, 8), {0, 0});
  // Both sides reach the op at t = 0. NVLink: 5 µs message latency + 1 µs link latency + 1e6 B / 1e11 B/s
  // (10 µs) = 16 µs = 16,000,000 ps.
  REQUIRE(entry(r, 0, "send x").start_ps == 0);
  REQUIRE(entry(r, 0, "send x").end_ps == 16'000'000);
  REQUIRE(entry(r, 1, "recv x").end_ps == 16'000'000);
  REQUIRE(r.forward_ps == 16'000'000);
  REQUIRE(r.total_ps == 16'000'000);
  REQUIRE(r.backward_ps == 0);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).count == 1);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).bytes == 1'000'000);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::inter_node).count == 0);
  REQUIRE(r.ranks[0].messages_sent[0][0].count == 1);
  REQUIRE(r.ranks[1].messages_sent[0][0].count == 0);
  // Nothing computes: all communication is exposed.
  REQUIRE(r.ranks[0].exposed_comm_ps == 16'000'000);
}

TEST_CASE("sim: one inter-node send_recv uses the network level", "[sim]") {
  const SimResult r = simulate(one_message(false, false), round_cluster(2, 1), {0, 1});
  // Network: 5 µs + 4 µs + 1e6 B / 2.5e10 B/s (40 µs) = 49 µs.
  REQUIRE(entry(r, 0, "send x").end_ps == 49'000'000);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::inter_node).count == 1);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::inter_node).bytes == 1'000'000);
  REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).count == 0);
}

TEST_CASE("sim: a message starts at the rendezvous of sender and receiver", "[sim]") {
  const SimResult r = simulate(one_message(true, false), round_cluster(1, 8), {0, 0});
  // The receiver's op waits for its 5 µs copy; the sender waits in the rendezvous from t = 0.
  // Transfer 5 µs → 5 + 16 = 21 µs.
  REQUIRE(entry(r, 1, "copy y").end_ps == 5'000'000);
  REQUIRE(entry(r, 1, "recv x").start_ps == 5'000'000);
  REQUIRE(entry(r, 0, "send x").start_ps == 0);
  REQUIRE(entry(r, 0, "send x").end_ps == 21'000'000);
  REQUIRE(entry(r, 1, "recv x").end_ps == 21'000'000);
  // Layer time 21 µs. Rank 1: comm busy [5, 21) µs, compute busy [0, 5) µs → exposed = 21 − 5 = 16 µs.
  // Rank 0 computes nothing → exposed = 21 µs.
  REQUIRE(r.ranks[1].comm_busy_ps == 16'000'000);
  REQUIRE(r.ranks[1].compute_busy_ps == 5'000'000);
  REQUIRE(r.ranks[1].exposed_comm_ps == 16'000'000);
  REQUIRE(r.ranks[0].exposed_comm_ps == 21'000'000);
}

TEST_CASE("sim: communication overlapping compute on another stream costs max, not sum", "[sim]") {
  SECTION("NVLink transfer hidden behind the kernel") {
    const SimResult r = simulate(one_message(false, true), round_cluster(1, 8), {0, 0});
    // Kernel 20 µs on the compute stream, message 16 µs on the comm stream, both from t = 0: max = 20 µs.
    REQUIRE(entry(r, 0, "attn").end_ps == 20'000'000);
    REQUIRE(entry(r, 0, "send x").end_ps == 16'000'000);
    REQUIRE(r.ranks[0].end_ps == 20'000'000);
    REQUIRE(r.ranks[0].compute_busy_ps == 20'000'000);
    REQUIRE(r.ranks[0].comm_busy_ps == 16'000'000);
    REQUIRE(r.ranks[0].exposed_comm_ps == 0);
    REQUIRE(r.total_ps == 20'000'000);
  }
  SECTION("network transfer longer than the kernel") {
    const SimResult r = simulate(one_message(false, true), round_cluster(2, 1), {0, 1});
    // Message 49 µs, kernel 20 µs: rank 0 ends at 49 µs; exposed = 49 − 20 = 29 µs.
    REQUIRE(r.ranks[0].end_ps == 49'000'000);
    REQUIRE(r.ranks[0].exposed_comm_ps == 29'000'000);
    REQUIRE(r.total_ps == 49'000'000);
  }
}

TEST_CASE("sim: ops of one stream run in list order; kernels of two streams share the GPU", "[sim]") {
  Schedule s = empty_schedule(1, 1);
  ProgramWriter w(s.ranks[0]);
  const BufferId x = w.input("x", 500, 1, 1000);
  const BufferId y = w.declare("y", 500, 1, 1000);
  const BufferId z = w.declare("z", 500, 1, 1000);
  w.alloc(y);
  w.alloc(z, Stream::cp);
  // Each copy alone: 3 µs + 2e6 / 1e12 = 5 µs of GPU time.
  w.copy(y, x, 2'000'000, Stream::compute, {}, "c1");
  w.copy(y, x, 2'000'000, Stream::compute, {}, "c2");
  w.copy(z, x, 2'000'000, Stream::cp, {}, "p1");
  const OpIndex p2 = w.copy(z, x, 2'000'000, Stream::cp, {}, "p2");
  w.copy(y, z, 2'000'000, Stream::compute, {p2}, "c3 after p2");
  SECTION("shared GPU (default): two running kernels progress at half speed each") {
    const SimResult r = simulate(s, round_cluster(1, 8), {0});
    REQUIRE(r.share_gpu_between_kernels);
    // c1 ∥ p1 over [0, 10) µs, c2 ∥ p2 over [10, 20) µs, then c3 (after c2 by stream, after p2 by dep) alone.
    REQUIRE(entry(r, 0, "c1").start_ps == 0);
    REQUIRE(entry(r, 0, "p1").start_ps == 0);
    REQUIRE(entry(r, 0, "c1").end_ps == 10'000'000);
    REQUIRE(entry(r, 0, "c2").start_ps == 10'000'000);
    REQUIRE(entry(r, 0, "p2").end_ps == 20'000'000);
    REQUIRE(entry(r, 0, "c3 after p2").start_ps == 20'000'000);
    // Work is conserved: 5 kernels × 5 µs = 25 µs, the same as running them one after another.
    REQUIRE(r.total_ps == 25'000'000);
    REQUIRE(r.ranks[0].compute_busy_ps == 25'000'000);
    REQUIRE(r.ranks[0].compute_kernel_ps == 45'000'000);
  }
  SECTION("unshared GPU: every stream at full speed") {
    SimOptions opt;
    opt.share_gpu_between_kernels = false;
    const SimResult r = simulate(s, round_cluster(1, 8), {0}, opt);
    REQUIRE_FALSE(r.share_gpu_between_kernels);
    REQUIRE(entry(r, 0, "c1").start_ps == 0);
    REQUIRE(entry(r, 0, "c2").start_ps == 5'000'000);
    REQUIRE(entry(r, 0, "p1").start_ps == 0);
    REQUIRE(entry(r, 0, "p2").end_ps == 10'000'000);
    // c3 follows c2 on its stream (ends 10 µs) and p2 by dependency (ends 10 µs) → [10, 15) µs.
    REQUIRE(entry(r, 0, "c3 after p2").start_ps == 10'000'000);
    REQUIRE(r.total_ps == 15'000'000);
    // Two streams busy over [0, 10) and one over [10, 15): union 15 µs, kernel sum 25 µs.
    REQUIRE(r.ranks[0].compute_busy_ps == 15'000'000);
    REQUIRE(r.ranks[0].compute_kernel_ps == 25'000'000);
  }
}

TEST_CASE("sim: a kernel that joins a running one slows it down for the overlap only", "[sim]") {
  Schedule s = empty_schedule(1, 1);
  ProgramWriter w(s.ranks[0]);
  const BufferId x = w.input("x", 500, 1, 1000);
  const BufferId y = w.declare("y", 500, 1, 1000);
  const BufferId z = w.declare("z", 500, 1, 1000);
  w.alloc(y);
  w.alloc(z, Stream::cp);
  // Long: 3 µs + 9e6 / 1e12 = 12 µs. Short: 3 µs + 1e6 / 1e12 = 4 µs, started after a 5 µs kernel on cp.
  w.copy(y, x, 9'000'000, Stream::compute, {}, "long");
  w.copy(z, x, 2'000'000, Stream::cp, {}, "first");
  w.copy(z, x, 1'000'000, Stream::cp, {}, "short");
  const SimResult r = simulate(s, round_cluster(1, 8), {0});
  // [0, 10) µs: long ∥ first at half speed; first (5 µs of work) ends at 10 µs, long has 12 − 5 = 7 µs left.
  // [10, 18) µs: long ∥ short at half speed; short (4 µs) ends at 18 µs, long has 7 − 4 = 3 µs left.
  // [18, 21) µs: long alone.
  REQUIRE(entry(r, 0, "first").end_ps == 10'000'000);
  REQUIRE(entry(r, 0, "short").start_ps == 10'000'000);
  REQUIRE(entry(r, 0, "short").end_ps == 18'000'000);
  REQUIRE(entry(r, 0, "long").end_ps == 21'000'000);
  REQUIRE(r.total_ps == 21'000'000);  // = 12 + 5 + 4 µs: work-conserving
}

TEST_CASE("sim: all-to-all starts when every member arrived and ends together, intra vs inter node", "[sim]") {
  // 4 ranks, one a2a group; each member's input is 4e6 B, so it sends 1e6 B to each of the 3 others.
  auto make = [](bool late_member) {
    Schedule s = empty_schedule(4, 1);
    for (int64_t g = 0; g < 4; ++g) {
      ProgramWriter w(s.ranks[static_cast<size_t>(g)]);
      const BufferId in = w.input("x", 4, 4, 125'000);   // [1, 4, 4, 125000] bf16 = 4,000,000 B
      const BufferId out = w.declare("x.a2a", 16, 1, 125'000);
      std::vector<OpIndex> deps{w.alloc(out, Stream::comm)};
      if (late_member && g == 2) {
        const BufferId y = w.declare("y", 4, 4, 125'000);
        w.alloc(y);
        deps.push_back(w.copy(y, in, 2'000'000, Stream::compute, {}, "copy"));  // 5 µs
      }
      w.add(AllToAllOp{AllToAllOp::Direction::scatter_heads, {0, 1, 2, 3}, {0, 2, 4, 6, 7, 5, 3, 1}, in, out, 1},
            Stream::comm, deps, "a2a", Phase::forward, 0, 4'000'000);
    }
    return s;
  };
  SECTION("one node") {
    const SimResult r = simulate(make(false), round_cluster(1, 8), {0, 0, 0, 0});
    // 5 µs + 1 µs + 3e6 B / 1e11 B/s (30 µs) = 36 µs on every member.
    for (int64_t g = 0; g < 4; ++g) REQUIRE(entry(r, g, "a2a").end_ps == 36'000'000);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).count == 12);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).bytes == 12'000'000);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::inter_node).count == 0);
  }
  SECTION("two nodes of two GPUs") {
    // One NIC per node, so that no message has a choice of equal-cost paths (with a NIC per GPU, a cross-rail
    // message may go GPU → NVSwitch → peer GPU → its NIC, an ECMP choice).
    ClusterSpec cluster = round_cluster(2, 2);
    cluster.nics_per_node = 1;
    const SimResult r = simulate(make(false), cluster, {0, 0, 1, 1});
    // The 4 messages node 0 → node 1 share node 0's NIC uplink (and node 1's downlink) at 2.5e10 / 4 B/s each:
    // 5 µs + 4 µs route latency + 1e6 B / 6.25e9 B/s (160 µs) = 169 µs; the intra-node ones take 10 µs.
    for (int64_t g = 0; g < 4; ++g) REQUIRE(entry(r, g, "a2a").end_ps == 169'000'000);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).count == 4);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::intra_node).bytes == 4'000'000);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::inter_node).count == 8);
    REQUIRE(r.message_totals(Phase::forward, LinkLevel::inter_node).bytes == 8'000'000);
  }
  SECTION("a late member delays everyone") {
    const SimResult r = simulate(make(true), round_cluster(1, 8), {0, 0, 0, 0});
    // Member 2 arrives at 5 µs; all end at 5 + 36 = 41 µs. Member 0 reached the op at 0.
    REQUIRE(entry(r, 0, "a2a").start_ps == 0);
    REQUIRE(entry(r, 2, "a2a").start_ps == 5'000'000);
    for (int64_t g = 0; g < 4; ++g) REQUIRE(entry(r, g, "a2a").end_ps == 41'000'000);
  }
}

TEST_CASE("sim: peak memory follows inputs, allocs and frees", "[sim]") {
  Schedule s = empty_schedule(1, 1);
  ProgramWriter w(s.ranks[0]);
  w.input("x", 500, 1, 1000);  // 1,000,000 B, live from t = 0
  const BufferId a = w.declare("a", 100, 1, 1000);  // 200,000 B
  const BufferId b = w.declare("b", 300, 1, 1000);  // 600,000 B
  const BufferId c = w.declare("c", 500, 1, 1000);  // 1,000,000 B
  w.alloc(a);  // 1.2 MB
  w.alloc(b);  // 1.8 MB
  w.copy(b, a, 1000, Stream::compute, {}, "touch b");  // a (100 rows) into the first rows of b
  w.free(a);   // 1.6 MB
  w.alloc(c);  // 2.6 MB  ← peak
  w.free(b);   // 2.0 MB
  w.free(c);   // 1.0 MB
  const SimResult r = simulate(s, round_cluster(1, 8), {0});
  REQUIRE(r.ranks[0].input_bytes == 1'000'000);
  REQUIRE(r.ranks[0].peak_memory_bytes == 2'600'000);
  REQUIRE(r.ranks[0].final_memory_bytes == 1'000'000);
}

TEST_CASE("sim: a schedule that waits in a cycle is reported as a deadlock", "[sim]") {
  // Rank 0 sends (tag 1) then receives (tag 2); rank 1 sends (tag 2) then receives (tag 1), both on their comm
  // stream. With rendezvous semantics neither first op can start its transfer: deadlock.
  Schedule s = empty_schedule(1, 2);
  for (int64_t g = 0; g < 2; ++g) {
    ProgramWriter w(s.ranks[static_cast<size_t>(g)]);
    const BufferId x = w.input("x", 4, 1, 8);
    const BufferId y = w.input("y", 4, 1, 8);
    const int64_t peer = 1 - g;
    const int64_t my_tag = g == 0 ? 1 : 2;
    const int64_t peer_tag = g == 0 ? 2 : 1;
    w.add(SendRecvOp{peer, -1, {x}, {}, my_tag, 0}, Stream::comm, {}, "send");
    w.add(SendRecvOp{-1, peer, {}, {y}, 0, peer_tag}, Stream::comm, {}, "recv");
  }
  hcpsim::test::check_schedule(s);  // structurally valid and hazard-free: the deadlock is a timing property

  // HCPSIM_ASSERT aborts, so run the simulation in a child process and read its stderr.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Child: die of the abort quietly (Catch2's own SIGABRT handler would report a failure from here).
    std::signal(SIGABRT, SIG_DFL);
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    simulate(s, round_cluster(1, 8), {0, 0});
    _exit(0);  // not reached when the deadlock is detected
  }
  close(fds[1]);
  std::string err;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("child stderr: " << err);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGABRT);
  REQUIRE(err.find("deadlock") != std::string::npos);
  REQUIRE(err.find("cp rank 0") != std::string::npos);
  REQUIRE(err.find("rendezvous") != std::string::npos);
}

TEST_CASE("sim: cp_rank_nodes places CP ranks in Megatron order", "[sim]") {
  ParallelSizes sizes;
  sizes.tp = 2;
  sizes.cp = 8;
  // tp-cp-ep-dp-pp: global rank = tp + 2·cp → 0, 2, …, 14 → 8 GPUs per node: nodes 0,0,0,0,1,1,1,1.
  REQUIRE(cp_rank_nodes("tp-cp-ep-dp-pp", sizes, 8) == std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, 1});
  // cp-tp-...: global rank = cp → 0..7 → one node.
  REQUIRE(cp_rank_nodes("cp-tp-ep-dp-pp", sizes, 8) == std::vector<int64_t>(8, 0));
}

TEST_CASE("sim: a2a+p2p [2,2] schedule: exact message bytes, counts and FLOPs", "[sim]") {
  const int64_t S = 64;
  const AttentionShape sh = small_shape(S);
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, S), sh);
  // 2 nodes × 2 GPUs, TP = 1: a2a groups {0,1}, {2,3} inside a node; rings 0↔2 and 1↔3 across nodes.
  ParallelSizes sizes;
  sizes.cp = 4;
  const auto nodes = cp_rank_nodes("tp-cp-ep-dp-pp", sizes, 2);
  REQUIRE(nodes == std::vector<int64_t>{0, 0, 1, 1});
  const auto cluster = cluster_preset("dgx-h100", 2);
  REQUIRE(cluster.has_value());
  const SimResult r = simulate(s, *cluster, nodes);

  // FLOPs: identical to the schedule's totals (same summation order), and nonzero.
  REQUIRE(r.phase_flops(Phase::forward) > 0);
  REQUIRE(r.phase_flops(Phase::forward) == s.total_flops(Phase::forward));
  REQUIRE(r.phase_flops(Phase::backward) == s.total_flops(Phase::backward));
  // Causal S = 64, per head: 64·65/2 = 2080 pairs; H = 4 heads; forward 2·(16+16) = 64 flop per pair.
  REQUIRE(r.phase_flops(Phase::forward) == 2080.0 * 4 * 64);
  // Backward 2·(3·16 + 2·16) = 160 flop per pair.
  REQUIRE(r.phase_flops(Phase::backward) == 2080.0 * 4 * 160);

  // Bytes: per rank and phase, what the schedule's buffers say leaves the rank.
  std::array<int64_t, 2> total{0, 0};
  for (int64_t g = 0; g < 4; ++g) {
    const auto want = expected_bytes(s, g);
    for (size_t p = 0; p < 2; ++p) {
      const auto& sent = r.ranks[static_cast<size_t>(g)].messages_sent[p];
      REQUIRE(sent[0].bytes + sent[1].bytes == want[p]);
      total[p] += want[p];
    }
  }
  for (size_t p = 0; p < 2; ++p) REQUIRE(r.messages[p][0].bytes + r.messages[p][1].bytes == total[p]);
  // In this placement only the ring crosses nodes, so inter-node bytes are exactly the schedule's declared
  // SendRecvOp::bytes (Op::bytes = bytes sent).
  for (int64_t g = 0; g < 4; ++g) {
    std::array<int64_t, 2> declared{0, 0};
    for (const Op& op : s.ranks[static_cast<size_t>(g)].ops)
      if (op.kind() == OpKind::send_recv) declared[static_cast<size_t>(op.phase)] += op.bytes;
    for (size_t p = 0; p < 2; ++p) {
      REQUIRE(declared[p] > 0);
      REQUIRE(r.ranks[static_cast<size_t>(g)].messages_sent[p][static_cast<size_t>(LinkLevel::inter_node)].bytes ==
              declared[p]);
    }
  }

  // docs/algorithm.md §7 with b = 1, S = 64, A = P = 2, H = 4, Hkv = 2, dk = dv = 16, bf16 (e = 2):
  // KV message = b·(S/P)·(Hkv/A)·(dk+dv)·e = 32·1·32·2 = 2048 B; forward: P−1 = 1 per rank, across nodes.
  // a2a per rank (s_f = S/cp = 16 tokens, half leaves the rank): q 16·4·16·2/2 = 1024, k 512, v 512,
  // out 1024 → 4 messages, 3072 B, inside the node.
  const int64_t kv = 2048;
  for (int64_t g = 0; g < 4; ++g) {
    const auto& st = r.ranks[static_cast<size_t>(g)].messages_sent;
    const auto fwd = static_cast<size_t>(Phase::forward);
    const auto bwd = static_cast<size_t>(Phase::backward);
    const auto intra = static_cast<size_t>(LinkLevel::intra_node);
    const auto inter = static_cast<size_t>(LinkLevel::inter_node);
    REQUIRE(st[fwd][inter].count == 1);  // P − 1 KV messages
    REQUIRE(st[fwd][inter].bytes == kv);
    REQUIRE(st[fwd][intra].count == 4);
    REQUIRE(st[fwd][intra].bytes == 3072);
    // Backward ring, P = 2: one KV message then one dKV message (same size); a2a dout, dq, dk, dv:
    // 1024 + 1024 + 512 + 512 = 3072 B.
    REQUIRE(st[bwd][inter].count == 2);
    REQUIRE(st[bwd][inter].bytes == 2 * kv);
    REQUIRE(st[bwd][intra].count == 4);
    REQUIRE(st[bwd][intra].bytes == 3072);
  }

  // Sanity of the timings: positive, backward after forward starts, makespan covers both.
  REQUIRE(r.forward_ps > 0);
  REQUIRE(r.backward_ps > 0);
  REQUIRE(r.backward_start_ps > 0);
  REQUIRE(r.total_ps >= r.forward_ps);
  REQUIRE(r.total_ps == r.backward_start_ps + r.backward_ps);
  for (const auto& st : r.ranks) {
    REQUIRE(st.peak_memory_bytes >= st.input_bytes);
    REQUIRE(st.compute_busy_ps > 0);
  }
  REQUIRE(r.timeline.size() ==
          s.ranks[0].ops.size() + s.ranks[1].ops.size() + s.ranks[2].ops.size() + s.ranks[3].ops.size());
}

TEST_CASE("sim: p2p ring of P = 4: P − 1 forward KV messages per rank on NVLink", "[sim]") {
  const int64_t S = 128;
  const AttentionShape sh = small_shape(S);
  const Schedule s = build_schedule(CpCommType::p2p, CpLayout(1, 4, S), sh);
  const auto cluster = cluster_preset("dgx-h100", 1);
  REQUIRE(cluster.has_value());
  const SimResult r = simulate(s, *cluster, {0, 0, 0, 0});
  REQUIRE(r.phase_flops(Phase::forward) == s.total_flops(Phase::forward));
  REQUIRE(r.phase_flops(Phase::backward) == s.total_flops(Phase::backward));
  // KV = b·(S/P)·Hkv·(dk+dv)·e = 32·2·32·2 = 4096 B.
  const int64_t kv = 4096;
  for (const auto& st : r.ranks) {
    const auto& fwd = st.messages_sent[static_cast<size_t>(Phase::forward)];
    const auto& bwd = st.messages_sent[static_cast<size_t>(Phase::backward)];
    REQUIRE(fwd[0].count == 3);
    REQUIRE(fwd[0].bytes == 3 * kv);
    REQUIRE(fwd[1].count == 0);
    // Backward (docs/algorithm.md §5.1): P = 4 messages: 1×KV, (P−2) = 2×(KV + dKV), 1×dKV = 6·KV bytes.
    REQUIRE(bwd[0].count == 4);
    REQUIRE(bwd[0].bytes == kv + 2 * (2 * kv) + kv);
  }
}

TEST_CASE("sim: two runs of the same schedule give identical timelines and traces", "[sim]") {
  const int64_t S = 64;
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, S), small_shape(S));
  const auto cluster = cluster_preset("dgx-h100", 2);
  REQUIRE(cluster.has_value());
  const std::vector<int64_t> nodes{0, 0, 1, 1};
  const SimResult a = simulate(s, *cluster, nodes);
  const SimResult b = simulate(s, *cluster, nodes);
  REQUIRE(a.timeline.size() == b.timeline.size());
  REQUIRE(!a.timeline.empty());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    const auto& x = a.timeline[i];
    const auto& y = b.timeline[i];
    REQUIRE(x.cp_rank == y.cp_rank);
    REQUIRE(x.op_index == y.op_index);
    REQUIRE(x.stream == y.stream);
    REQUIRE(x.start_ps == y.start_ps);
    REQUIRE(x.end_ps == y.end_ps);
    REQUIRE(x.label == y.label);
  }
  REQUIRE(a.event_count == b.event_count);
  REQUIRE(chrome_trace_json(a) == chrome_trace_json(b));
  REQUIRE(summary_json(a) == summary_json(b));
}
