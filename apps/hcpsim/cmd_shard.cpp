// `hcpsim shard` and `hcpsim gather`: a dump's inputs cut into one CP rank's pieces as the schedule lays them out,
// and per-rank outputs put back into global tensors, so a user's framework can run one rank and be compared.

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "app_common.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/io/output_file.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/isolated_read.hpp"
#include "hcpsim/oracles/rank_file.hpp"

namespace hcpsim::app {
namespace {

struct ShardArgs {
  std::string dump, output;
  int64_t cp_rank = -1;
  bool outputs = false;  ///< also write the dump's /hcp results of the rank as /outputs
};

struct GatherArgs {
  std::string dump, output;
  std::vector<std::string> ranks;
};

/// A /meta value the schedule needs; InputError naming it when the dump lacks it.
double meta_number(const DumpContents& d, const std::string& path, const char* key) {
  const auto it = d.meta_number.find(key);
  if (it == d.meta_number.end())
    throw InputError(SourceLoc{path, 0, 0, {}}, "", fmt::format("no /meta attribute {}", key),
                     "shard and gather need a dump written by 'hcpsim verify --dump' (its /meta names the schedule)");
  return it->second;
}

/// The packed sequences of a THD dump (/meta/cu_seqlens, cu_seqlens_padded; pad_between_seqs unless /meta says 0).
/// @throws InputError for offsets that are not a packing of the dump's tensors padded to multiples of 2·cp.
PackedSequences dump_packing(const DumpContents& d, const std::string& path, int64_t two_cp) {
  const std::vector<int64_t>& cu = d.thd.cu_seqlens;
  const std::vector<int64_t>& cu_padded = d.thd.cu_seqlens_padded;
  PackedSequences p;
  const auto pad_it = d.meta_number.find("pad_between_seqs");
  p.pad_between_seqs = pad_it == d.meta_number.end() || pad_it->second != 0;
  bool ok = cu.size() == cu_padded.size() && cu.size() >= 2 && cu[0] == 0 && cu_padded[0] == 0 &&
            cu_padded.back() == d.inputs.q.rows() && two_cp > 0;
  for (size_t s = 1; ok && s < cu.size(); ++s) {
    const int64_t len = cu[s] - cu[s - 1], padded = cu_padded[s] - cu_padded[s - 1];
    ok = len >= 1 && padded >= len && padded % two_cp == 0;
    p.seq_lengths.push_back(len);
    p.seq_lengths_padded.push_back(padded);
  }
  if (!ok)
    throw InputError(SourceLoc{path, 0, 0, {}}, "",
                     "/meta/cu_seqlens and cu_seqlens_padded are not a packing of the dump's tensors",
                     "use the offsets 'hcpsim verify --dump' wrote (padded lengths multiples of 2*cp, summing to T)");
  return p;
}

/// The schedule the dump was made with: its /meta cp_comm_type, a2a_size, p2p_size, causal, softmax_scale and
/// inject, and the shapes of its tensors (oracle.heads already applied), as cmd_verify built it.
Schedule dump_schedule(const DumpContents& d, const std::string& path) {
  const auto type_it = d.meta_text.find("cp_comm_type");
  const auto type = type_it == d.meta_text.end() ? std::nullopt : parse_cp_comm_type(type_it->second);
  if (!type)
    throw InputError(SourceLoc{path, 0, 0, {}}, "", "no valid /meta attribute cp_comm_type",
                     "shard and gather need a dump written by 'hcpsim verify --dump'");
  AttentionShape shape;
  shape.batch = d.inputs.q.batch();
  shape.seq_length = d.inputs.q.rows();
  shape.heads_q = d.inputs.q.heads();
  shape.heads_kv = d.inputs.k.heads();
  shape.head_dim_qk = d.inputs.q.width();
  shape.head_dim_v = d.inputs.v.width();
  shape.causal = meta_number(d, path, "causal") != 0;
  shape.softmax_scale = meta_number(d, path, "softmax_scale");
  shape.dtype = d.dtype;
  const auto A = static_cast<int64_t>(meta_number(d, path, "a2a_size"));
  const auto P = static_cast<int64_t>(meta_number(d, path, "p2p_size"));
  if (!d.thd.empty()) shape.packing = dump_packing(d, path, 2 * A * P);
  Schedule s = build_schedule(*type, CpLayout(A, P, shape.seq_length), shape);
  const auto inject = d.meta_text.find("inject");
  if (inject != d.meta_text.end() && !inject->second.empty()) {
    if (const auto fault = parse_fault_kind(inject->second)) s = inject_fault(s, *fault);
  }
  return s;
}

/// The dataset name of a binding's tensor in rank files and dumps ("dout" is /inputs/do, softmax_lse is lse).
std::string dataset_name(const std::string& tensor) {
  return tensor == "dout" ? "do" : tensor == "softmax_lse" ? "lse" : tensor;
}

/// `global`'s rows bind.tokens and heads [head_begin, head_begin + heads) as a [b, rows, heads, width] tensor.
RankTensor slice(const HostTensor& global, const IoBinding& bind, int64_t heads) {
  RankTensor t;
  t.name = dataset_name(bind.tensor);
  t.tokens = bind.tokens;
  t.head_begin = bind.head_begin;
  const auto rows = static_cast<int64_t>(bind.tokens.size());
  t.values = HostTensor(global.batch(), rows, heads, global.width());
  for (int64_t b = 0; b < global.batch(); ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t w = 0; w < global.width(); ++w)
          t.values(b, r, h, w) = global(b, bind.tokens[static_cast<size_t>(r)], bind.head_begin + h, w);
  return t;
}

const HostTensor& global_tensor(const DumpContents& d, const std::string& tensor) {
  const std::map<std::string, const HostTensor*> all = {
      {"q", &d.inputs.q},  {"k", &d.inputs.k},   {"v", &d.inputs.v},           {"dout", &d.inputs.dout},
      {"out", &d.hcp.out}, {"dq", &d.hcp.dq},    {"softmax_lse", &d.hcp.softmax_lse},
      {"dk", &d.hcp.dk},   {"dv", &d.hcp.dv}};
  return *all.at(tensor);
}

/// "0-31,224-255,300": a token list as ascending runs, a run of one token as the token alone (not "300-300").
std::string token_ranges(const std::vector<int64_t>& t) {
  std::string out;
  for (size_t i = 0; i < t.size();) {
    size_t j = i;
    while (j + 1 < t.size() && t[j + 1] == t[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += i == j ? fmt::format("{}", t[i]) : fmt::format("{}-{}", t[i], t[j]);
    i = j + 1;
  }
  return out;
}

/// The /meta of a rank file: the rank, the schedule, and the dump's provenance.
void fill_rank_meta(RankFile& f, const DumpContents& d, const Schedule& s, int64_t cp_rank) {
  for (const char* k : {"cp_comm_type", "dtype", "hcpsim_version", "compiler", "x86_level", "cuda", "backend",
                        "inject", "attn_mask_type", "qkv_format", "input_distribution", "scenario_yaml",
                        "scenario_digest", "overrides"})
    if (const auto it = d.meta_text.find(k); it != d.meta_text.end()) f.meta_text[k] = it->second;
  for (const char* k : {"a2a_size", "p2p_size", "causal", "softmax_scale", "seed"})
    if (const auto it = d.meta_number.find(k); it != d.meta_number.end()) f.meta_number[k] = it->second;
  f.seed = d.seed;  // exact (meta_number's copy is a double)
  f.meta_number["cp_rank"] = static_cast<double>(cp_rank);
  f.meta_number["cp_size"] = static_cast<double>(s.ranks.size());
}

int cmd_shard(const ShardArgs& a) {
  const DumpContents d = read_dump_isolated(a.dump);
  check_requested_outputs({{a.output, "-o", "rank file", true}});
  const Schedule s = dump_schedule(d, a.dump);
  const auto cp = static_cast<int64_t>(s.ranks.size());
  if (a.cp_rank < 0 || a.cp_rank >= cp)
    throw InputError(SourceLoc{}, "--cp-rank", fmt::format("cp_rank {} is outside the dump's CP group", a.cp_rank),
                     fmt::format("use 0 ... {} (the dump's {} [A={}, P={}] has {} CP ranks)", cp - 1,
                                 to_string(s.cp_comm_type), s.a2a_size, s.p2p_size, cp));
  const RankProgram& prog = s.ranks[static_cast<size_t>(a.cp_rank)];
  RankFile f;
  f.float64 = d.dtype == Dtype::fp64;
  fill_rank_meta(f, d, s, a.cp_rank);
  auto add = [&](const std::vector<IoBinding>& binds, std::vector<RankTensor>& to) {
    for (const IoBinding& b : binds) {
      RankTensor t = slice(global_tensor(d, b.tensor), b, prog.buffers[static_cast<size_t>(b.buffer)].heads);
      if (std::any_of(to.begin(), to.end(), [&](const RankTensor& x) { return x.name == t.name; }))
        throw InputError(SourceLoc{}, "--cp-rank", "the rank binds " + b.tensor + " in more than one piece",
                         "shard supports schedules with one binding per tensor and rank");
      to.push_back(std::move(t));
    }
  };
  add(prog.inputs, f.inputs);
  if (a.outputs) add(prog.outputs, f.outputs);
  write_rank_file(a.output, f);
  fmt::print("shard {} cp_rank {} of {} ({} [A={}, P={}]) -> {}\n", a.dump, a.cp_rank, cp, to_string(s.cp_comm_type),
             s.a2a_size, s.p2p_size, a.output);
  for (const auto* group : {&f.inputs, &f.outputs})
    for (const RankTensor& t : *group)
      fmt::print("  {:<8} {:<8} {:<18} heads {}-{}  tokens {}\n", group == &f.inputs ? "/inputs" : "/outputs", t.name,
                 t.name == "lse" ? join({t.values.batch(), t.values.heads(), t.values.rows()})  // as stored: [b, h, s]
                                 : join({t.values.batch(), t.values.rows(), t.values.heads(), t.values.width()}),
                 t.head_begin, t.head_begin + t.values.heads() - 1, token_ranges(t.tokens));
  return kExitOk;
}

/// The rank file at `path` was cut from the dump at `dump_path`: its seed and scenario digest (written by shard
/// from the dump's /meta) equal the dump's where both are recorded. Rank files of another dump put another
/// problem's results into this one, which compare then reports as a mismatch of the schedule.
/// @throws InputError at `path`
void check_same_source(const RankFile& f, const DumpContents& d, const std::string& path, const std::string& dump_path) {
  const auto digest = f.meta_text.find("scenario_digest");
  const auto dump_digest = d.meta_text.find("scenario_digest");
  std::string differs;
  if (digest != f.meta_text.end() && dump_digest != d.meta_text.end() && digest->second != dump_digest->second)
    differs = fmt::format("scenario_digest {} against the dump's {}", digest->second, dump_digest->second);
  if (differs.empty() && f.seed && d.seed && *f.seed != *d.seed) {
    differs = fmt::format("seed {} against the dump's {}", *f.seed, *d.seed);
  } else if (differs.empty() && !(f.seed && d.seed)) {  // files of earlier versions: the seeds as doubles
    const auto seed = f.meta_number.find("seed");
    const auto dump_seed = d.meta_number.find("seed");
    if (seed != f.meta_number.end() && dump_seed != d.meta_number.end() && seed->second != dump_seed->second)
      differs = fmt::format("seed {} against the dump's {}", seed->second, dump_seed->second);
  }
  if (!differs.empty())
    throw InputError(SourceLoc{path, 0, 0, {}}, "", "this rank file was cut from another dump (" + differs + ")",
                     "gather the rank files of 'hcpsim shard " + dump_path + "', or give the dump they came from");
}

int cmd_gather(const GatherArgs& a) {
  const DumpContents d = read_dump_isolated(a.dump);
  const Schedule s = dump_schedule(d, a.dump);
  DumpContents g;
  g.dtype = d.dtype;
  g.meta_text = d.meta_text;
  g.meta_text["backend"] = "gather";
  g.meta_number = d.meta_number;
  g.seed = d.seed;
  g.inputs = d.inputs;
  g.reference = d.reference;
  // NaN until a rank writes it: a binding that covered no element would show as a non-finite FAIL in compare.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [to, from] : {std::pair{&g.hcp.out, &d.hcp.out}, std::pair{&g.hcp.softmax_lse, &d.hcp.softmax_lse},
                                 std::pair{&g.hcp.dq, &d.hcp.dq}, std::pair{&g.hcp.dk, &d.hcp.dk},
                                 std::pair{&g.hcp.dv, &d.hcp.dv}})
    *to = HostTensor(from->batch(), from->rows(), from->heads(), from->width(), nan);
  std::map<std::string, HostTensor*> targets = {{"out", &g.hcp.out}, {"lse", &g.hcp.softmax_lse}, {"dq", &g.hcp.dq},
                                                {"dk", &g.hcp.dk},   {"dv", &g.hcp.dv}};
  std::map<int64_t, std::string> seen;  // cp_rank -> the file that gave it
  int64_t with_lse = 0;
  for (const std::string& path : a.ranks) {
    const RankFile f = read_rank_file_isolated(path);
    const auto cp_rank = static_cast<int64_t>(f.meta_number.at("cp_rank"));
    if (cp_rank < 0 || cp_rank >= static_cast<int64_t>(s.ranks.size()))
      throw InputError(SourceLoc{path, 0, 0, {}}, "",
                       fmt::format("/meta cp_rank {} is outside the dump's {} CP ranks", cp_rank, s.ranks.size()),
                       "pass the rank files of 'hcpsim shard --cp-rank g' for this dump");
    if (const auto [it, fresh] = seen.emplace(cp_rank, path); !fresh)
      throw InputError(SourceLoc{path, 0, 0, {}}, "",
                       fmt::format("/meta cp_rank {} was given already, by '{}'", cp_rank, it->second),
                       "pass each rank file of 'hcpsim shard --cp-rank g' once");
    check_same_source(f, d, path, a.dump);
    const RankProgram& prog = s.ranks[static_cast<size_t>(cp_rank)];
    for (const IoBinding& b : prog.outputs) {
      const std::string name = dataset_name(b.tensor);
      const auto it = std::find_if(f.outputs.begin(), f.outputs.end(), [&](const RankTensor& t) { return t.name == name; });
      if (it == f.outputs.end()) {
        if (name == "lse") continue;  // optional: TE's attention layer does not return it
        throw InputError(SourceLoc{path, 0, 0, {}}, "", "missing dataset /outputs/" + name,
                         fmt::format("write your framework's {} of cp_rank {} there, in the layout of /inputs "
                                     "(rows /tokens/q, heads from head_begin)", name, cp_rank));
      }
      if (name == "lse") ++with_lse;
      const BufferDecl& buf = prog.buffers[static_cast<size_t>(b.buffer)];
      const std::vector<int64_t> want = {buf.batch, static_cast<int64_t>(b.tokens.size()), buf.heads, buf.width};
      const HostTensor& v = it->values;
      if (std::vector<int64_t>{v.batch(), v.rows(), v.heads(), v.width()} != want) {
        // Shapes as the file stores them: softmax_lse [b, h, s] (TE's layout), the others [b, s, h, d].
        auto shown = [&](int64_t bb, int64_t rows, int64_t heads, int64_t width) {
          return name == "lse" ? join({bb, heads, rows}) : join({bb, rows, heads, width});
        };
        throw InputError(SourceLoc{path, 0, 0, {}}, "",
                         fmt::format("/outputs/{} is {} but cp_rank {} holds {}", name,
                                     shown(v.batch(), v.rows(), v.heads(), v.width()), cp_rank,
                                     shown(want[0], want[1], want[2], want[3])),
                         name == "lse" ? "store softmax_lse as [b, h_local, s_local]: the rank's heads and tokens "
                                         "after the a2a (the shapes 'hcpsim shard --outputs' prints)"
                                       : "store it as [b, s_local, h_local, d] like /inputs");
      }
      HostTensor& t = *targets.at(name);
      for (int64_t bb = 0; bb < v.batch(); ++bb)
        for (int64_t r = 0; r < v.rows(); ++r)
          for (int64_t h = 0; h < v.heads(); ++h)
            for (int64_t w = 0; w < v.width(); ++w)
              t(bb, b.tokens[static_cast<size_t>(r)], b.head_begin + h, w) = v(bb, r, h, w);
    }
  }
  if (seen.size() != s.ranks.size())
    throw InputError(SourceLoc{}, "RANKFILES", fmt::format("{} of the dump's {} CP ranks given", seen.size(),
                                                           s.ranks.size()),
                     "pass one rank file per CP rank");
  const bool lse = with_lse == static_cast<int64_t>(s.ranks.size());
  if (with_lse != 0 && !lse)
    throw InputError(SourceLoc{}, "RANKFILES", "only some rank files hold /outputs/lse",
                     "write softmax_lse for every rank, or for none (then compare --tensors out,dq,dk,dv)");
  check_requested_outputs({{a.output, "-o", "dump", true}});
  write_dump(a.output, g, lse ? std::vector<std::string>{} : std::vector<std::string>{"/hcp/lse"}, "-o");
  fmt::print("gather {} rank files of {} ({} [A={}, P={}]) -> {} (/hcp: out, {}dq, dk, dv)\n", a.ranks.size(), a.dump,
             to_string(s.cp_comm_type), s.a2a_size, s.p2p_size, a.output, lse ? "lse, " : "");
  if (!lse) fmt::print("  no softmax_lse given: compare with --tensors out,dq,dk,dv\n");
  return kExitOk;
}

}  // namespace

CLI::App* add_shard_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("shard", "write one CP rank's inputs of a dump in the schedule's layout (HDF5), "
                                          "for your framework");
  auto a = std::make_shared<ShardArgs>();
  cmd->add_option("dump", a->dump, "a dump of 'hcpsim verify --dump'")->required();
  cmd->add_option("--cp-rank", a->cp_rank, "the CP rank g (0 ... cp - 1)")->required();
  cmd->add_option("-o,--output", a->output, "the rank file to write")->required();
  cmd->add_flag("--outputs", a->outputs, "also write the dump's /hcp results of this rank as /outputs (what gather "
                                         "reads; e.g. to check your loader)");
  cmd->callback([&exit_code, a] { exit_code = cmd_shard(*a); });
  return cmd;
}

CLI::App* add_gather_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("gather", "put per-rank /outputs back into global tensors: a dump for 'hcpsim "
                                           "compare'");
  auto a = std::make_shared<GatherArgs>();
  cmd->add_option("dump", a->dump, "the dump the rank files were sharded from")->required();
  cmd->add_option("rankfiles", a->ranks, "one rank file per CP rank, with /outputs out, dq, dk, dv (lse optional)")
      ->required();
  cmd->add_option("-o,--output", a->output, "the dump to write")->required();
  cmd->callback([&exit_code, a] { exit_code = cmd_gather(*a); });
  return cmd;
}

}  // namespace hcpsim::app
