// The program walker of the numeric executors (program_walker.hpp): round-robin enqueue order, rendezvous
// matching of communication ops into batches, and the deadlock report.

#include "hcpsim/core/program_walker.hpp"

#include <string>
#include <type_traits>
#include <variant>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

namespace {

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

/// What the current op of a waiting rank waits for, for the deadlock report.
std::string waits_for(const Op& op) {
  if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
    std::string text;
    if (sr->send_peer >= 0)
      text += "its receive on cp_rank " + std::to_string(sr->send_peer) + " tag " + std::to_string(sr->send_tag);
    if (sr->recv_peer >= 0)
      text += (text.empty() ? "" : " and ") + std::string("its send on cp_rank ") + std::to_string(sr->recv_peer) +
              " tag " + std::to_string(sr->recv_tag);
    return text;
  }
  return std::visit(
      [&](const auto& p) -> std::string {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, AllToAllOp> || std::is_same_v<T, AllGatherOp> ||
                      std::is_same_v<T, ReduceScatterOp>) {
          return "every member of " + to_string(op.kind()) + " tag " + std::to_string(p.tag) + " of group [" +
                 join(p.group) + "]";
        } else {
          return "";
        }
      },
      op.payload);
}

/// True when every member of collective `op` waits at an op of the same kind, group, chunk order and tag.
template <typename OpT>
bool collective_matches(const Schedule& s, const std::vector<OpIndex>& pc, const std::vector<bool>& waiting,
                        const OpT& op) {
  for (int64_t m : op.group) {
    if (m < 0 || m >= static_cast<int64_t>(s.ranks.size()) || !waiting[static_cast<size_t>(m)]) return false;
    const Op& other = s.ranks[static_cast<size_t>(m)].ops[static_cast<size_t>(pc[static_cast<size_t>(m)])];
    const auto* o = std::get_if<OpT>(&other.payload);
    if (o == nullptr || o->tag != op.tag || o->group != op.group || o->chunk_order != op.chunk_order) return false;
  }
  return true;
}

}  // namespace

ProgramWalker::ProgramWalker(const Schedule& schedule) : schedule_(schedule), pc_(schedule.ranks.size(), 0) {}

bool ProgramWalker::finished(int64_t rank) const {
  return static_cast<size_t>(pc_[static_cast<size_t>(rank)]) >= schedule_.ranks[static_cast<size_t>(rank)].ops.size();
}

const Op& ProgramWalker::current(int64_t rank) const {
  return schedule_.ranks[static_cast<size_t>(rank)].ops[static_cast<size_t>(pc_[static_cast<size_t>(rank)])];
}

bool ProgramWalker::matched(const std::vector<bool>& waiting, int64_t rank) const {
  const Op& op = current(rank);
  const auto ranks = static_cast<int64_t>(schedule_.ranks.size());
  // The peer waits at a send_recv whose other side names `rank` with `tag` (receiving: its recv side).
  auto peer_matches = [&](int64_t peer, bool peer_receives, int64_t tag) {
    if (peer >= ranks || !waiting[static_cast<size_t>(peer)]) return false;
    const auto* p = std::get_if<SendRecvOp>(&current(peer).payload);
    if (p == nullptr) return false;
    return peer_receives ? p->recv_peer == rank && p->recv_tag == tag : p->send_peer == rank && p->send_tag == tag;
  };
  if (const auto* sr = std::get_if<SendRecvOp>(&op.payload)) {
    if (sr->send_peer >= 0 && !peer_matches(sr->send_peer, true, sr->send_tag)) return false;
    if (sr->recv_peer >= 0 && !peer_matches(sr->recv_peer, false, sr->recv_tag)) return false;
    return true;
  }
  if (const auto* a2a = std::get_if<AllToAllOp>(&op.payload)) return collective_matches(schedule_, pc_, waiting, *a2a);
  if (const auto* ag = std::get_if<AllGatherOp>(&op.payload)) return collective_matches(schedule_, pc_, waiting, *ag);
  if (const auto* rs = std::get_if<ReduceScatterOp>(&op.payload))
    return collective_matches(schedule_, pc_, waiting, *rs);
  return false;
}

std::string ProgramWalker::deadlock_text() const {
  std::string text = "deadlock under rendezvous semantics (NCCL grouped send/recv and collectives): every rank "
                     "waits at a communication op and none can be matched:";
  for (size_t r = 0; r < schedule_.ranks.size(); ++r) {
    if (finished(static_cast<int64_t>(r))) continue;
    const OpRef ref{static_cast<int64_t>(r), pc_[r]};
    text += "\n  " + op_ref_text(schedule_, ref) + " waits for " + waits_for(current(ref.rank));
  }
  return text;
}

std::vector<int64_t> ProgramWalker::next_rendezvous() const {
  const auto ranks = static_cast<int64_t>(schedule_.ranks.size());
  std::vector<bool> waiting(static_cast<size_t>(ranks), false);
  bool any = false;
  for (int64_t r = 0; r < ranks; ++r) {
    waiting[static_cast<size_t>(r)] = !finished(r);
    any = any || !finished(r);
  }
  if (!any) return {};
  // Largest mutually matched subset: drop unmatched ranks until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (int64_t r = 0; r < ranks; ++r) {
      if (waiting[static_cast<size_t>(r)] && !matched(waiting, r)) {
        waiting[static_cast<size_t>(r)] = false;
        changed = true;
      }
    }
  }
  std::vector<int64_t> members;
  for (int64_t r = 0; r < ranks; ++r)
    if (waiting[static_cast<size_t>(r)]) members.push_back(r);
  if (members.empty())
    throw InputError(SourceLoc{}, "schedule", deadlock_text(),
                     "a send must meet its receive: issue every message's send and receive at matching points of "
                     "both programs (as build_schedule does), and every collective on all members of its group");
  return members;
}

bool ProgramWalker::next(WalkStep& step) {
  const auto ranks = static_cast<int64_t>(schedule_.ranks.size());
  for (; scan_ < ranks; ++scan_) {
    if (!finished(scan_) && !is_communication(current(scan_).kind())) {
      step.is_batch = false;
      step.op = OpRef{scan_, pc_[static_cast<size_t>(scan_)]++};
      step.members.clear();
      return true;
    }
  }
  const std::vector<int64_t> members = next_rendezvous();
  if (members.empty()) return false;
  step.is_batch = true;
  step.op = OpRef{};
  step.members.clear();
  for (int64_t r : members) step.members.push_back(OpRef{r, pc_[static_cast<size_t>(r)]++});
  scan_ = 0;
  ++batches_;
  return true;
}

std::vector<WalkStep> walk_program(const Schedule& schedule) {
  ProgramWalker walker(schedule);
  std::vector<WalkStep> steps;
  for (WalkStep step; walker.next(step);) steps.push_back(step);
  return steps;
}

}  // namespace hcpsim
