// `hcpsim collective OP`: the collective model (sim/collective_model.hpp) over a range of sizes, printed as
// nccl-tests prints its rows (size, count, type, redop, time, algbw, busbw), with the algorithm and protocol the
// model chose.

#include <fmt/core.h>

#include <cctype>
#include <memory>

#include "app_common.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/sim/collective_model.hpp"

namespace hcpsim::app {
namespace {

/// Options of `hcpsim collective`.
struct CollectiveArgs {
  std::string op, cluster, min_bytes = "8", max_bytes = "1G", csv;
  int64_t nodes = 1;
  int64_t gpus_per_node = -1;  ///< −1 (not given) = every GPU of the preset's node
  int64_t step_factor = 2;
};

/// Largest size a row may have: 1 PiB, far above any collective buffer (and far below int64 overflow).
constexpr int64_t kMaxCollectiveBytes = int64_t{1} << 50;
/// Most nodes: the scenarios' plausible range for cluster.nodes (config/validation).
constexpr int64_t kMaxCollectiveNodes = 100000;

/// Bytes from "8", "64K", "16M", "1G" (2^10, 2^20, 2^30, as nccl-tests' -b/-e), at most kMaxCollectiveBytes.
/// @throws InputError naming `option` for another text or a larger size.
int64_t parse_size(const std::string& text, const std::string& option) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])) != 0) ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty()) shift = 0;
  else if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  if (digits == 0 || digits > 12 || shift < 0)
    throw InputError(SourceLoc{}, option, fmt::format("'{}' is not a size", text),
                     "give bytes with an optional K, M or G suffix (2^10, 2^20, 2^30), e.g. 8, 1M, 16G");
  const int64_t value = std::stoll(text.substr(0, digits));  // at most 12 digits: no overflow
  if (value > (kMaxCollectiveBytes >> shift))
    throw InputError(SourceLoc{}, option, fmt::format("'{}' is more than 1 PiB (2^50 bytes)", text),
                     "give at most 1048576G (1 PiB), e.g. 16G");
  return value << shift;
}

/// One row's size as nccl-tests runs it (its *GetCollByteCount functions, float elements): `bytes` the printed size
/// (the larger of the send and receive buffers), `count` the printed count (the count argument of the NCCL call).
/// all_reduce and sendrecv move size/4 elements; all_gather, reduce_scatter and alltoall give each rank
/// (size/4)/ranks elements rounded down to a multiple of 4 (16 bytes), so their size is that times 4·ranks.
struct RowSize {
  int64_t bytes = 0;
  int64_t count = 0;
};
RowSize nccl_tests_size(sim::CollectiveOp op, int64_t size, int64_t ranks) {
  const int64_t elements = size / 4;
  if (op == sim::CollectiveOp::all_reduce || op == sim::CollectiveOp::sendrecv) return {elements * 4, elements};
  const int64_t base = (elements / ranks) & ~int64_t{3};
  return {base * ranks * 4, base};
}

sim::CollectiveOp parse_op(const std::string& name) {
  for (auto op : {sim::CollectiveOp::all_reduce, sim::CollectiveOp::all_gather, sim::CollectiveOp::reduce_scatter,
                  sim::CollectiveOp::alltoall, sim::CollectiveOp::sendrecv})
    if (sim::to_string(op) == name) return op;
  throw InputError(SourceLoc{}, "OP", fmt::format("unknown collective '{}'", name),
                   "use all_reduce, all_gather, reduce_scatter, alltoall or sendrecv");
}

int cmd_collective(const CollectiveArgs& a) {
  const sim::CollectiveOp op = parse_op(a.op);
  if (a.nodes < 1 || a.nodes > kMaxCollectiveNodes)
    throw InputError(SourceLoc{}, "--nodes", fmt::format("{} is outside 1..{}", a.nodes, kMaxCollectiveNodes),
                     "give the node count, e.g. 2");
  const auto preset = cluster_preset(a.cluster, a.nodes);
  if (!preset) {
    std::string names;
    for (const auto& n : cluster_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError(SourceLoc{}, "--cluster", fmt::format("unknown preset '{}'", a.cluster), "use one of: " + names);
  }
  const ClusterSpec& cl = *preset;
  const int64_t gpn = a.gpus_per_node < 0 ? cl.gpus_per_node : a.gpus_per_node;
  if (gpn < 1 || gpn > cl.gpus_per_node)
    throw InputError(SourceLoc{}, "--gpus-per-node", fmt::format("{} is not between 1 and {}", gpn, cl.gpus_per_node),
                     fmt::format("give at most the {} GPUs of a {} node", cl.gpus_per_node, a.cluster));
  const int64_t lo = parse_size(a.min_bytes, "--min-bytes"), hi = parse_size(a.max_bytes, "--max-bytes");
  if (lo < 1)
    throw InputError(SourceLoc{}, "--min-bytes", fmt::format("{} B: a collective moves at least 1 byte", lo),
                     "give a size of at least 1, e.g. --min-bytes 8");
  if (hi < 1)
    throw InputError(SourceLoc{}, "--max-bytes", fmt::format("{} B: a collective moves at least 1 byte", hi),
                     "give a size of at least 1, e.g. --max-bytes 1G");
  if (lo > hi) {
    const bool max_given = a.max_bytes != CollectiveArgs{}.max_bytes;  // the user's option is the one to change
    throw InputError(SourceLoc{}, max_given ? "--max-bytes" : "--min-bytes",
                     fmt::format("--min-bytes {} B{} is above --max-bytes {} B{}", lo,
                                 a.min_bytes == CollectiveArgs{}.min_bytes ? " (the default)" : "", hi,
                                 max_given ? "" : " (the default)"),
                     max_given ? fmt::format("give --max-bytes {} or more, or a smaller --min-bytes", lo)
                               : fmt::format("give --min-bytes {} or less, or a larger --max-bytes", hi));
  }
  if (a.step_factor < 2)
    throw InputError(SourceLoc{}, "--step-factor", fmt::format("{} is below 2", a.step_factor),
                     "give an integer factor >= 2 between sizes, e.g. 2");
  check_requested_outputs({{a.csv, "--csv", "collective CSV"}});  // before any row is printed
  std::vector<int64_t> gpus;  // the first gpn GPUs of every node
  for (int64_t n = 0; n < a.nodes; ++n)
    for (int64_t g = 0; g < gpn; ++g) gpus.push_back(n * cl.gpus_per_node + g);
  const auto ranks = static_cast<int64_t>(gpus.size());
  // NCCL runs a one-rank collective as a local copy (or nothing, in place): no communication to model.
  if (ranks < 2)
    throw InputError(SourceLoc{}, a.gpus_per_node > 0 ? "--gpus-per-node" : "--nodes",  // the count given
                     "a group of 1 rank communicates nothing (NCCL only copies the buffer on the GPU)",
                     "give at least 2 ranks: --gpus-per-node 2 or more, or --nodes 2 or more");
  // nccl-tests prints an empty row for a size below one element per rank; a range of only such rows predicts nothing.
  if (nccl_tests_size(op, hi, ranks).count == 0) {
    const bool whole_buffer = op == sim::CollectiveOp::all_reduce || op == sim::CollectiveOp::sendrecv;
    // The least size with a count (nccl_tests_size): one float, or 4 floats per rank for the per-rank counts.
    const int64_t least = whole_buffer ? 4 : 16 * ranks;
    throw InputError(SourceLoc{}, "--max-bytes",
                     fmt::format("{} B holds no float element {} (nccl-tests' sizes: {}), so every row would be "
                                 "empty",
                                 hi, whole_buffer ? "(4 B)" : fmt::format("per rank for {} ranks", ranks),
                                 whole_buffer
                                     ? "size / 4 elements"
                                     : "(size / 4) / ranks elements per rank, rounded down to a multiple of 4"),
                     fmt::format("give --max-bytes {} or more", least));
  }
  const bool reduces = op == sim::CollectiveOp::all_reduce || op == sim::CollectiveOp::reduce_scatter;
  fmt::print("# hcpsim collective {}: {} ranks on {} {} node(s), {} GPUs each; NCCL's algorithms and cost model "
             "(docs/simulator.md \"Collectives\")\n",
             sim::to_string(op), ranks, a.nodes, a.cluster, gpn);
  if (op == sim::CollectiveOp::all_reduce && a.nodes > 1)
    fmt::print("# NCCL's Tree algorithm is not modelled: across nodes NCCL may pick it for small sizes, where its "
               "time can be several times below the ring's shown here\n");
  fmt::print("#{:>11} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8}  {:<10} {}\n", "size", "count", "type", "redop", "time",
             "algbw", "busbw", "algorithm", "protocol");
  fmt::print("#{:>11} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8}\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)");
  std::string csv = "size_bytes,count,type,redop,time_us,algbw_GBps,busbw_GBps,algorithm,protocol\n";
  const double factor = sim::bus_factor(op, ranks);
  double busbw_sum = 0;
  int64_t rows = 0;
  for (int64_t size = lo; size <= hi; size *= a.step_factor) {
    const RowSize rs = nccl_tests_size(op, size, ranks);
    const sim::CollectiveEstimate e = sim::collective_estimate(op, static_cast<double>(rs.bytes), gpus, cl);
    const double us = e.seconds * 1e6;
    const double algbw = e.seconds > 0 ? static_cast<double>(rs.bytes) / e.seconds / 1e9 : 0;
    const std::string row[] = {std::to_string(rs.bytes), std::to_string(rs.count), "float", reduces ? "sum" : "none",
                               fmt::format("{:.2f}", us), fmt::format("{:.2f}", algbw),
                               fmt::format("{:.2f}", algbw * factor), sim::to_string(e.algorithm),
                               sim::to_string(e.protocol)};
    fmt::print(" {:>11} {:>12} {:>6} {:>6} {:>10} {:>8} {:>8}  {:<10} {}\n", row[0], row[1], row[2], row[3], row[4],
               row[5], row[6], row[7], row[8]);
    csv += fmt::format("{},{},{},{},{},{},{},{},{}\n", row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                       row[8]);
    busbw_sum += algbw * factor;
    ++rows;
    if (size > hi / a.step_factor) break;  // the next step would pass --max-bytes (or overflow)
  }
  // nccl-tests' closing line: the mean bus bandwidth over the sizes.
  fmt::print("# Avg bus bandwidth    : {:.2f}\n", rows > 0 ? busbw_sum / static_cast<double>(rows) : 0.0);
  if (!a.csv.empty()) {
    write_output_file(a.csv, csv, "collective CSV", "--csv");
    fmt::print("\nwrote {}\n", a.csv);
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_collective_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("collective", "predict an NCCL collective over a cluster preset, as nccl-tests rows");
  auto args = std::make_shared<CollectiveArgs>();
  cmd->add_option("OP", args->op, "all_reduce, all_gather, reduce_scatter, alltoall or sendrecv")->required();
  cmd->add_option("--cluster", args->cluster, "cluster preset (dgx-a100, dgx-b200, dgx-h100, dgx-h200)")->required();
  cmd->add_option("--nodes", args->nodes, "nodes (default 1)");
  cmd->add_option("--gpus-per-node", args->gpus_per_node, "GPUs per node in the group (default: all of the node)");
  cmd->add_option("--min-bytes", args->min_bytes, "smallest size, K/M/G = 2^10/2^20/2^30 (default 8)");
  cmd->add_option("--max-bytes", args->max_bytes, "largest size (default 1G)");
  cmd->add_option("--step-factor", args->step_factor, "integer factor between sizes, >= 2 (default 2)");
  cmd->add_option("--csv", args->csv, "also write the rows as CSV to this file");
  cmd->callback([&exit_code, args] { exit_code = cmd_collective(*args); });
  return cmd;
}

}  // namespace hcpsim::app
