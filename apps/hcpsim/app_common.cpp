#include "app_common.hpp"

#include <algorithm>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/config/scenario_yaml.hpp"
#include "hcpsim/config/thd_packing.hpp"
#include "hcpsim/core/schedule_builder.hpp"

namespace hcpsim::app {

void add_scenario_args(CLI::App* cmd, Common& c) {
  cmd->add_option("scenario", c.scenario_path, "scenario YAML file")->required();
  cmd->add_option("overrides", c.overrides,
                  "Megatron-Bridge style overrides applied before validation, e.g. model.seq_length=131072 "
                  "\"parallel.hierarchical_context_parallel_sizes=[8,2]\"");
}

Provenance scenario_provenance(const Scenario& s, const std::vector<std::string>& overrides) {
  return make_provenance(to_yaml(s), overrides, s.oracle.seed);
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) { b /= 1024.0; ++u; }
  return fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_time_ps(int64_t ps) {
  const double s = static_cast<double>(ps) * 1e-12;
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} us", s * 1e6);
}

void print_header(const Scenario& s) {
  const auto& m = s.model;
  fmt::print("scenario {} ({})\n", s.name, s.source_path);
  fmt::print("  model: num_attention_heads={} num_query_groups={} kv_channels={}{} seq_length={} "
             "micro_batch_size={} num_layers={} attn_mask_type={} qkv_format={} params_dtype={}\n",
             m.num_attention_heads, m.num_query_groups, m.kv_channels,
             m.kv_channels_v != m.kv_channels ? fmt::format(" kv_channels_v={}", m.kv_channels_v) : "",
             m.seq_length, m.micro_batch_size, m.num_layers, to_string(m.attn_mask_type), to_string(m.qkv_format),
             to_string(m.params_dtype));
  const PackedSequences p = scenario_packing(s);
  if (p.thd()) {
    // Long packings are cut: the lengths matter for the masks, the count and total for the reader.
    constexpr size_t kShown = 16;
    auto shown = [&](const std::vector<int64_t>& v) {
      const auto n = static_cast<std::ptrdiff_t>(std::min(v.size(), kShown));
      const std::vector<int64_t> head(v.begin(), v.begin() + n);
      return fmt::format("[{}{}]", fmt::join(head, ", "), v.size() > kShown ? ", ..." : "");
    };
    fmt::print("  packed sequences: {} (actual {}, padded to multiples of 2*cp {}) pad_between_seqs={}{}\n",
               p.num_sequences(), shown(p.seq_lengths), shown(p.seq_lengths_padded),
               p.pad_between_seqs ? "true" : "false", m.pad_between_seqs ? "" : " (auto)");
  }
}

void print_warnings(const ValidationReport& r) {
  for (const auto& w : r.warnings) fmt::print("warning: {}\n", w);
}

std::string join(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

namespace {

/// THD: TE's per-sequence split instead of the zigzag table: every packed sequence is cut into 2·cp chunks and
/// cp_rank g holds chunks g and 2cp−1−g of each (thd_partitioned_indices, TE's token order), as packed ranges.
void print_thd_split(const PackedSequences& packing, const CpLayout& layout) {
  const int64_t cp = layout.cp_size();
  constexpr size_t kShownRanges = 8;
  fmt::print("  thd split: every packed sequence in 2*cp = {} chunks; cp_rank g holds chunks g and {} - g of each "
             "(TE thd_get_partitioned_indices), {} tokens per rank\n",
             2 * cp, 2 * cp - 1, layout.seq_length() / cp);
  for (int64_t g = 0; g < cp; ++g) {
    const std::vector<int64_t> tokens = thd_partitioned_indices(packing.cu_seqlens_padded(), cp, g);
    std::vector<std::string> ranges;
    for (size_t i = 0; i < tokens.size();) {
      size_t j = i + 1;
      while (j < tokens.size() && tokens[j] == tokens[j - 1] + 1) ++j;
      ranges.push_back(fmt::format("[{},{})", tokens[i], tokens[j - 1] + 1));
      i = j;
    }
    int64_t valid = 0;
    for (const ThdHalfValid& h : thd_valid_on_cp_rank(packing, cp, g)) valid += h.first + h.second;
    const size_t n = std::min(ranges.size(), kShownRanges);
    fmt::print("  cp_rank {}: {} valid of {} tokens: {}{}\n", g, valid, static_cast<int64_t>(tokens.size()),
               fmt::join(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(n), " "),
               ranges.size() > n ? " ..." : "");
  }
}

}  // namespace

CpGroups cp_groups_of(const Scenario& s, CpCommType type, int64_t dp) {
  const auto layout = cp_layout_for(s, type);
  const auto place = place_cp_group(s.parallel.order, parallel_sizes(s, dp), s.cluster.gpus_per_node);
  auto group = [&](const std::vector<int64_t>& cps) {
    RankGroup g;
    for (int64_t r : cps) {
      g.global_ranks.push_back(place[static_cast<size_t>(r)].global_rank);
      g.nodes.push_back(place[static_cast<size_t>(r)].node);
      g.one_node = g.one_node && g.nodes.back() == g.nodes.front();
    }
    return g;
  };
  std::vector<int64_t> all;
  for (int64_t g = 0; g < layout.cp_size(); ++g) all.push_back(g);
  CpGroups out;
  out.context_parallel = group(all);
  out.num_cp_groups = s.parallel.tensor_model_parallel_size * dp * s.parallel.pipeline_model_parallel_size;
  if (cp_variant(type).takes_hierarchical_sizes) {
    for (int64_t p = 0; p < layout.p2p_size(); ++p) out.a2a.push_back(group(layout.a2a_group(p)));
    for (int64_t a = 0; a < layout.a2a_size(); ++a) out.p2p.push_back(group(layout.p2p_group(a)));
  }
  return out;
}

/// Prints the process groups of the first CP group as a Megatron log names them, with node placement.
void print_layout(const Scenario& s, CpCommType type, int64_t dp) {
  const auto layout = cp_layout_for(s, type);
  const auto place = place_cp_group(s.parallel.order, parallel_sizes(s, dp), s.cluster.gpus_per_node);
  const CpGroups groups = cp_groups_of(s, type, dp);
  fmt::print("\ncp_comm_type {}: A={} (a2a) x P={} (p2p) = context_parallel_size {}\n", to_string(type),
             layout.a2a_size(), layout.p2p_size(), layout.cp_size());
  fmt::print("  CONTEXT_PARALLEL_GROUP: global ranks {} (first of {} CP groups; nodes {})\n",
             join(groups.context_parallel.global_ranks), groups.num_cp_groups, join(groups.context_parallel.nodes));
  if (cp_variant(type).takes_hierarchical_sizes) {
    fmt::print("  HIERARCHICAL_CONTEXT_PARALLEL_GROUPS:\n");
    for (size_t p = 0; p < groups.a2a.size(); ++p) {
      const RankGroup& g = groups.a2a[p];
      fmt::print("    level 0 (a2a) group {}: global ranks {} on nodes {} -> {}\n", p, join(g.global_ranks),
                 join(g.nodes), g.one_node ? "intra-node" : "SPANS NODES");
    }
    for (size_t a = 0; a < groups.p2p.size(); ++a) {
      const RankGroup& g = groups.p2p[a];
      fmt::print("    level 1 (p2p) group {}: global ranks {} on nodes {} -> ring {}\n", a, join(g.global_ranks),
                 join(g.nodes), g.one_node ? "intra-node" : "crosses nodes");
    }
  }
  if (const PackedSequences packing = scenario_packing(s); packing.thd()) return print_thd_split(packing, layout);
  // Without an a2a level (p2p, all_gather: A = 1) the tokens a rank holds are its two chunks throughout.
  const bool a2a = layout.a2a_size() > 1;
  fmt::print("  zigzag split: {} chunks of {} tokens; {} each rank holds {} tokens of {} query heads\n",
             2 * layout.cp_size(), layout.chunk_size(), a2a ? "after the a2a" : "without an a2a,",
             layout.seq_length() / layout.p2p_size(),
             s.model.num_attention_heads / s.parallel.tensor_model_parallel_size / layout.a2a_size());
  fmt::print("  {:>7} {:>11} {:>8} {:>8} {:>8} {:>10}  {:<28} {}\n", "cp_rank", "global_rank", "node:gpu",
             "a2a_rank", "p2p_rank", "chunks", a2a ? "tokens before a2a" : "tokens",
             a2a ? "tokens after a2a" : "tokens in attention");
  for (int64_t g = 0; g < layout.cp_size(); ++g) {
    const auto& pl = place[static_cast<size_t>(g)];
    const auto ch = layout.zigzag_chunks(g);
    const int64_t c0 = layout.chunk_size();
    const int64_t p = layout.p2p_rank(g), C = layout.super_chunk_size();
    fmt::print("  {:>7} {:>11} {:>8} {:>8} {:>8} {:>10}  {:<28} {}\n", g, pl.global_rank,
               fmt::format("{}:{}", pl.node, pl.local_gpu), layout.a2a_rank(g), p,
               fmt::format("{},{}", ch[0], ch[1]),
               fmt::format("[{},{}) [{},{})", ch[0] * c0, (ch[0] + 1) * c0, ch[1] * c0, (ch[1] + 1) * c0),
               fmt::format("[{},{}) [{},{})", p * C, (p + 1) * C, (2 * layout.p2p_size() - 1 - p) * C,
                           (2 * layout.p2p_size() - p) * C));
  }
}

const char* mask_name(BlockMask m) {
  switch (m) {
    case BlockMask::none: return "none";
    case BlockMask::causal: return "causal";
    case BlockMask::causal_bottom_right: return "causal_bottom_right";
  }
  return "?";
}

static std::string describe(const Schedule& s, const RankProgram& r, const Op& op) {
  auto name = [&](BufferId id) { return id < 0 ? std::string("-") : r.buffers[static_cast<size_t>(id)].name; };
  auto rows = [](RowRange rr) { return fmt::format("[{},{})", rr.begin, rr.end()); };
  (void)s;
  return std::visit(
      [&](const auto& p) -> std::string {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, AllocOp>) {
          const auto& b = r.buffers[static_cast<size_t>(p.buffer)];
          return fmt::format("alloc {} [{},{},{},{}] {} ({})", b.name, b.batch, b.rows, b.heads, b.width,
                             to_string(b.dtype), human_bytes(static_cast<double>(b.size_bytes())));
        } else if constexpr (std::is_same_v<T, FreeOp>) {
          return "free " + name(p.buffer);
        } else if constexpr (std::is_same_v<T, AllToAllOp>) {
          return fmt::format("all_to_all {} {} -> {} group {} chunk_order {}",
                             p.direction == AllToAllOp::Direction::scatter_heads ? "scatter_heads" : "gather_heads",
                             name(p.input), name(p.output), join(p.group), join(p.chunk_order));
        } else if constexpr (std::is_same_v<T, SendRecvOp>) {
          std::vector<std::string> sn, rn;
          for (BufferId id : p.send) sn.push_back(name(id));
          for (BufferId id : p.recv) rn.push_back(name(id));
          return fmt::format("send_recv send [{}] -> cp{} | recv [{}] <- cp{}{}", fmt::join(sn, ","), p.send_peer,
                             fmt::join(rn, ","), p.recv_peer, p.copy_engine ? " (copy engine)" : "");
        } else if constexpr (std::is_same_v<T, AttnFwdBlockOp>) {
          return fmt::format("attn_fwd_block {} q{} x kv{} of {}/{} mask={} -> {}, {}", to_string(p.section),
                             rows(p.q_rows), rows(p.kv_rows), name(p.k), name(p.v),
                             mask_name(p.mask), name(p.out), name(p.lse));
        } else if constexpr (std::is_same_v<T, AttnBwdBlockOp>) {
          return fmt::format("attn_bwd_block {} q{} x kv{} of {}/{} mask={} -> {}, {}, {}", to_string(p.section),
                             rows(p.q_rows), rows(p.kv_rows), name(p.k), name(p.v),
                             mask_name(p.mask), name(p.dq), name(p.dk), name(p.dv));
        } else if constexpr (std::is_same_v<T, LseMergeOp>) {
          return fmt::format("lse_merge {}{} <- {}", name(p.dst), rows(p.dst_rows), name(p.src));
        } else if constexpr (std::is_same_v<T, OutCorrectionOp>) {
          return fmt::format("out_correction {}{} {} {}*exp({}-{})", name(p.dst), rows(p.dst_rows),
                             p.accumulate ? "+=" : "=", name(p.src), name(p.src_lse), name(p.lse));
        } else if constexpr (std::is_same_v<T, AllGatherOp>) {
          return fmt::format("all_gather {} -> {} group {} chunk_order {}", name(p.input), name(p.output),
                             join(p.group), join(p.chunk_order));
        } else if constexpr (std::is_same_v<T, ReduceScatterOp>) {
          return fmt::format("reduce_scatter {} -> {} group {} chunk_order {}", name(p.input), name(p.output),
                             join(p.group), join(p.chunk_order));
        } else if constexpr (std::is_same_v<T, GemmOp>) {
          return fmt::format("gemm m={} n={} k={}{}{}", p.m, p.n, p.k, p.fp8 ? " fp8" : "",
                             p.fp8 && p.split_accumulator ? " split_accumulator" : "");
        } else if constexpr (std::is_same_v<T, ElementwiseOp>) {
          return fmt::format("elementwise {} elements", p.elements);
        } else {
          static_assert(std::is_same_v<T, CopyOp>, "every op kind needs a description");
          return fmt::format("{} {}{} {} {}{}", p.accumulate ? "add" : "copy", name(p.dst), rows(p.dst_rows),
                             p.accumulate ? "+=" : "=", name(p.src), rows(p.src_rows));
        }
      },
      op.payload);
}

void print_schedule(const Schedule& s) {
  for (const auto& r : s.ranks) {
    fmt::print("\n  cp_rank {} ({} ops)\n", r.cp_rank, r.ops.size());
    for (size_t i = 0; i < r.ops.size(); ++i) {
      const Op& op = r.ops[i];
      std::string deps = op.deps.empty() ? "" : fmt::format(" after {}", fmt::join(op.deps, ","));
      std::string extra;
      if (op.flops > 0) extra += fmt::format(" {:.4g} FLOP", op.flops);
      if (is_communication(op.kind())) {
        extra.push_back(' ');  // (not `" " + text`: GCC 12's -Wrestrict misfires on it at -O3)
        extra.append(human_bytes(static_cast<double>(op.bytes)));
      }
      fmt::print("    {:>3} {:<8} {:<9} {}{}{}\n", i, to_string(op.phase), to_string(op.stream),  // cp_stream: 9
                 describe(s, r, op), extra, deps);
    }
  }
}

std::string type_suffix(const std::vector<CpCommType>& types, CpCommType t) {
  return types.size() > 1 ? "." + to_string(t) : "";
}

std::vector<CpCommType> buildable_types(const Scenario& s) {
  std::vector<CpCommType> types;
  for (CpCommType t : s.parallel.distinct_cp_comm_types()) types.push_back(t);
  return types;
}

void use_one_malloc_arena() {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, 1);
#endif
}

}  // namespace hcpsim::app
