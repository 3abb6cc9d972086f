// The CPU executor's rendezvous: group arrival of collectives and the send/recv mailbox.

#include "executor_rendezvous.hpp"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim::cpu_exec {

namespace {

/// What the members of a collective must agree on.
struct GroupView {
  const std::vector<int64_t>* group = nullptr;
  const std::vector<int64_t>* chunk_order = nullptr;
  int64_t tag = 0;
};

/// The GroupView of an AllToAllOp, AllGatherOp or ReduceScatterOp (HCPSIM_ASSERT for any other op).
GroupView group_of(const Op& op) {
  return std::visit(
      [](const auto& p) -> GroupView {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, AllToAllOp> || std::is_same_v<T, AllGatherOp> ||
                      std::is_same_v<T, ReduceScatterOp>) {
          return GroupView{&p.group, &p.chunk_order, p.tag};
        } else {
          HCPSIM_ASSERT(false, "wait_for_group: not a collective op");
          return GroupView{};
        }
      },
      op.payload);
}

}  // namespace

bool wait_for_group(ExecutorState& state, RankState& st, const std::string& where, bool& touched,
                    std::vector<RankState*>& members) {
  const Op& mine = st.current();
  const GroupView op = group_of(mine);
  const int64_t me = st.program->cp_rank;
  const auto n = static_cast<int64_t>(op.group->size());
  HCPSIM_ASSERT(n >= 1, where + ": empty group");
  HCPSIM_ASSERT(std::count(op.group->begin(), op.group->end(), me) == 1, where + ": rank not in its group");
  HCPSIM_ASSERT(static_cast<int64_t>(op.chunk_order->size()) == 2 * n, where + ": chunk_order must have 2n entries");
  if (!st.a2a_arrived) touched = true;
  st.a2a_arrived = true;
  members.clear();
  for (int64_t cp : *op.group) {
    HCPSIM_ASSERT(cp >= 0 && cp < static_cast<int64_t>(state.ranks.size()), where + ": group member out of range");
    RankState& m = state.ranks[static_cast<size_t>(cp)];
    if (m.finished() || !m.a2a_arrived) return false;
    const Op& theirs = m.current();
    if (theirs.kind() != mine.kind()) return false;
    const GroupView other = group_of(theirs);
    if (other.tag != op.tag) return false;
    const std::string pair = where + " vs " + op_text(m, m.pc);
    HCPSIM_ASSERT(*other.group == *op.group, pair + ": members disagree on the group");
    HCPSIM_ASSERT(*other.chunk_order == *op.chunk_order, pair + ": members disagree on chunk_order");
    members.push_back(&m);
  }
  return true;
}

void complete_on_other_members(ExecutorState& state, const RankState& st, const std::vector<RankState*>& members) {
  for (RankState* m : members) {
    if (m == &st) continue;
    ++m->pc;
    m->send_posted = false;
    m->a2a_arrived = false;
    ++state.stats.ops_executed;
  }
}

std::vector<double> Mailbox::blank_message() {
  std::vector<double> message;
  if (!spare_.empty()) {
    message = std::move(spare_.back());
    spare_.pop_back();
    message.clear();
  }
  return message;
}

void Mailbox::post(const Key& key, std::vector<double> message) { queues_[key].push_back(std::move(message)); }

const std::vector<double>* Mailbox::oldest(const Key& key) const {
  const auto it = queues_.find(key);
  if (it == queues_.end() || it->second.empty()) return nullptr;
  return &it->second.front();
}

void Mailbox::pop_oldest(const Key& key) {
  const auto it = queues_.find(key);
  HCPSIM_ASSERT(it != queues_.end() && !it->second.empty(), "Mailbox::pop_oldest: no message waiting");
  if (spare_.size() < kMaxSpareBuffers) spare_.push_back(std::move(it->second.front()));
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
}

void Mailbox::check_all_delivered() const {
  for (const auto& [key, queue] : queues_) {
    HCPSIM_ASSERT(queue.empty(), fmt::format("execute_schedule: undelivered message from cp_rank {} to cp_rank {} "
                                             "tag {}", std::get<0>(key), std::get<1>(key), std::get<2>(key)));
  }
}

}  // namespace hcpsim::cpu_exec
