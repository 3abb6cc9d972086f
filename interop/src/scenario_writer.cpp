// MegatronConfig → scenario YAML text. The layout is written by hand so that key order, the aligned
// `# argument, line N` comments and the notes stay exactly as documented; string scalars go through yaml-cpp's
// emitter (io/yaml_text.hpp), so a value that needs quoting is quoted.
#include "hcpsim/interop/scenario_writer.hpp"

#include <algorithm>

#include "hcpsim/io/yaml_text.hpp"
#include "input_names.hpp"

namespace hcpsim {
namespace {

/// Builds the scenario text line by line; an entry's comment names the Megatron argument (and line) behind it.
class YamlWriter {
 public:
  explicit YamlWriter(const MegatronConfig& c) : c_(c) {}

  void comment(const std::string& text) { out_ += "# " + text + "\n"; }
  void section(const std::string& name) {
    out_ += name + ":\n";
    section_ = name;
  }
  /// `  key: value   # from file:line`, the comment naming the Megatron argument behind the value.
  void entry(const std::string& key, const std::string& value, const std::string& why = "") {
    std::string line = (section_.empty() ? "" : "  ") + key + ": " + value;
    std::string note = why;
    if (note.empty()) {
      const std::string full = section_.empty() ? key : section_ + "." + key;
      for (const auto& n : MegatronConfig::megatron_names_of(full)) {
        auto it = c_.lines.find(n);
        const auto source = c_.source_keys.find(n);  // a Bridge config's own key, as written, or its override
        if (source != c_.source_keys.end() && source->second.rfind("override '", 0) == 0) {
          note = source->second;
          break;
        }
        if (it != c_.lines.end() && it->second > 0) {
          note = (source == c_.source_keys.end() || source->second.empty() ? n : source->second) + ", line " +
                 std::to_string(it->second);
          break;
        }
      }
    }
    if (!note.empty()) {
      if (line.size() < kCommentColumn) line.append(kCommentColumn - line.size(), ' ');
      line += "  # " + note;
    }
    out_ += line + "\n";
  }
  void raw(const std::string& line) { out_ += line + "\n"; }
  void top() { section_.clear(); }
  [[nodiscard]] const std::string& text() const { return out_; }

 private:
  static constexpr size_t kCommentColumn = 48;  // aligns the source comments for reading
  const MegatronConfig& c_;
  std::string out_;
  std::string section_;
};

std::string int_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string yaml_bool(bool b) { return b ? "true" : "false"; }
/// The values a scenario cannot do without, checked before anything is written.
struct RequiredSizes {
  int64_t heads = 0;
  int64_t seq = 0;
  int64_t kv = 0;
};

/// @throws InputError naming the file and the missing flag.
RequiredSizes required_sizes(const MegatronConfig& c) {
  SourceLoc file;
  file.file = interop::display(c.source_path);
  auto need = [&](const std::optional<int64_t>& v, const std::string& flag, const std::string& key) {
    if (!v)
      throw InputError(file, key, "not set (" + flag + " is missing)",
                       "add " + flag + " to the command line or config");
    return *v;
  };
  RequiredSizes r;
  r.heads = need(c.num_attention_heads, "--num-attention-heads / model.num_attention_heads",
                 "model.num_attention_heads");
  r.seq = need(c.seq_length, "--seq-length / model.seq_length", "model.seq_length");
  r.kv = need(c.kv_channels, "--kv-channels or --hidden-size", "model.kv_channels");
  return r;
}

void write_model(YamlWriter& w, const MegatronConfig& c, const RequiredSizes& r) {
  const int64_t heads = r.heads;
  w.section("model");
  w.entry("num_attention_heads", std::to_string(heads));
  w.entry("num_query_groups", std::to_string(c.num_query_groups.value_or(heads)),
          c.num_query_groups.value_or(heads) == heads ? "MHA (no grouped-query attention)" : "");
  w.entry("kv_channels", std::to_string(r.kv), c.lines.count("kv_channels") ? "" : "hidden_size / num_attention_heads");
  w.entry("seq_length", std::to_string(r.seq));
  w.entry("micro_batch_size", std::to_string(c.micro_batch_size),
          c.lines.count("micro_batch_size") ? "" : "Megatron default");
  if (c.global_batch_size) w.entry("global_batch_size", std::to_string(*c.global_batch_size));
  if (c.num_layers) w.entry("num_layers", std::to_string(*c.num_layers));
  if (c.hidden_size) w.entry("hidden_size", std::to_string(*c.hidden_size));
  if (c.ffn_hidden_size)
    w.entry("ffn_hidden_size", std::to_string(*c.ffn_hidden_size),
            c.lines.count("ffn_hidden_size") ? "" : (c.gated_linear_unit ? "SwiGLU default" : "4 * hidden_size"));
  if (c.vocab_size) {
    w.entry("vocab_size", std::to_string(*c.vocab_size));
  } else {
    w.raw("  # vocab_size: not set; Megatron takes it from the tokenizer");
  }
  w.entry("gated_linear_unit", yaml_bool(c.gated_linear_unit));
  w.entry("untie_embeddings_and_output_weights", yaml_bool(c.untie_embeddings_and_output_weights));
  w.entry("params_dtype", yaml_scalar(c.params_dtype));
  if (c.attention_backend) w.entry("attention_backend", yaml_scalar(*c.attention_backend));
}

/// `dp`: the data-parallel size, unknown (written as 1, noted) without a world size.
void write_parallel(YamlWriter& w, const MegatronConfig& c, const std::optional<int64_t>& dp) {
  w.section("parallel");
  w.entry("tensor_model_parallel_size", std::to_string(c.tensor_model_parallel_size));
  w.entry("pipeline_model_parallel_size", std::to_string(c.pipeline_model_parallel_size));
  if (c.virtual_pipeline_model_parallel_size)
    w.entry("virtual_pipeline_model_parallel_size", std::to_string(*c.virtual_pipeline_model_parallel_size));
  w.entry("context_parallel_size", std::to_string(c.context_parallel_size));
  if (dp) {
    w.entry("data_parallel_size", std::to_string(*dp), "world / (TP*CP*PP)");
  } else {
    w.entry("data_parallel_size", "1", "world size unknown: assumed 1");
  }
  if (c.cp_comm_type.size() == 1) {
    w.entry("cp_comm_type", yaml_scalar(c.cp_comm_type[0]), c.lines.count("cp_comm_type") ? "" : "Megatron default");
  } else {
    std::string list = "[";
    for (size_t i = 0; i < c.cp_comm_type.size(); ++i) list += (i ? ", " : "") + yaml_scalar(c.cp_comm_type[i]);
    w.entry("cp_comm_type", list + "]");
  }
  if (c.hierarchical_context_parallel_sizes)
    w.entry("hierarchical_context_parallel_sizes", int_list(*c.hierarchical_context_parallel_sizes));
  w.entry("sequence_parallel", yaml_bool(c.sequence_parallel));
  w.entry("use_distributed_optimizer", yaml_bool(c.use_distributed_optimizer));
  w.entry("overlap_grad_reduce", yaml_bool(c.overlap_grad_reduce));
  w.entry("overlap_param_gather", yaml_bool(c.overlap_param_gather));
  if (c.grad_reduce_in_fp32) w.entry("grad_reduce_in_fp32", yaml_bool(*c.grad_reduce_in_fp32));
  if (c.tp_comm_overlap) w.entry("tp_comm_overlap", "true");
  if (c.account_for_embedding_in_pipeline_split) w.entry("account_for_embedding_in_pipeline_split", "true");
  if (c.account_for_loss_in_pipeline_split) w.entry("account_for_loss_in_pipeline_split", "true");
  if (c.decoder_first_pipeline_num_layers)
    w.entry("decoder_first_pipeline_num_layers", std::to_string(*c.decoder_first_pipeline_num_layers));
  if (c.decoder_last_pipeline_num_layers)
    w.entry("decoder_last_pipeline_num_layers", std::to_string(*c.decoder_last_pipeline_num_layers));
  w.entry("use_decentralized_pg", yaml_bool(c.use_decentralized_pg));
  w.top();
}

void write_training(YamlWriter& w, const MegatronConfig& c) {
  w.section("training");
  w.entry("recompute_granularity", yaml_scalar(c.recompute_granularity));
  if (c.recompute_method) w.entry("recompute_method", yaml_scalar(*c.recompute_method));
  if (c.recompute_num_layers) w.entry("recompute_num_layers", std::to_string(*c.recompute_num_layers));
  w.entry("fp8", yaml_bool(c.fp8));
  if (c.fp8_recipe) w.entry("fp8_recipe", yaml_scalar(*c.fp8_recipe));
  if (c.fp8_param_gather) w.entry("fp8_param_gather", "true");
  w.top();
}

/// nodes = torchrun --nnodes, else ceil(world / gpus_per_node), else the nodes TP*CP*PP needs.
void write_cluster(YamlWriter& w, const MegatronConfig& c, const ScenarioWriteOptions& opt) {
  const int64_t model_gpus = c.tensor_model_parallel_size * c.context_parallel_size * c.pipeline_model_parallel_size;
  const int64_t gpn = opt.gpus_per_node > 0 ? opt.gpus_per_node : 8;
  int64_t nodes = 1;
  std::optional<int64_t> gpus_per_node;
  std::string nodes_why;
  if (c.nnodes) {
    nodes = *c.nnodes;
    if (opt.nodes_option > 0 && *c.nnodes == opt.nodes_option)
      nodes_why = "hcpsim import --nodes " + std::to_string(opt.nodes_option);
    else if (!c.lines.count("nnodes"))
      nodes_why = "no --nnodes: torchrun's default, one node";
  } else if (c.world_size) {
    nodes = (*c.world_size + gpn - 1) / gpn;
    nodes_why = "world size " + std::to_string(*c.world_size) + " / " + std::to_string(gpn) + " GPUs per node";
  } else {
    const int64_t node_gpus = c.nproc_per_node.value_or(gpn);  // hcpsim import --gpus-per-node, or the preset's
    nodes = std::max<int64_t>(1, (model_gpus + node_gpus - 1) / node_gpus);
    nodes_why = "no launcher sizes: the nodes TP*CP*PP needs";
  }
  if (c.nproc_per_node && *c.nproc_per_node != gpn) gpus_per_node = c.nproc_per_node;
  w.section("cluster");
  w.entry("preset", yaml_scalar(opt.cluster_preset), "--cluster");
  w.entry("nodes", std::to_string(nodes), nodes_why);
  if (gpus_per_node) w.entry("gpus_per_node", std::to_string(*gpus_per_node));
  // Fewer processes than the node has GPUs: the job's GPUs keep the NICs the preset gives them.
  if (gpus_per_node && *gpus_per_node < gpn && opt.nics_per_node > 0 && opt.gpus_per_node > 0 &&
      *gpus_per_node * opt.nics_per_node % opt.gpus_per_node == 0) {
    const int64_t nics = *gpus_per_node * opt.nics_per_node / opt.gpus_per_node;  // >= 1: a non-zero multiple
    w.entry("nics_per_node", std::to_string(nics),
            std::to_string(*gpus_per_node) + " of the preset's " + std::to_string(gpn) + " GPUs, with their " +
                std::to_string(nics) + " of its " + std::to_string(opt.nics_per_node) + " NICs");
  }
}

}  // namespace

std::string scenario_yaml_of(const MegatronConfig& c, const ScenarioWriteOptions& opt) {
  const RequiredSizes sizes = required_sizes(c);
  const auto dp = c.data_parallel_size();
  YamlWriter w(c);
  w.comment("Imported by `" + (opt.generator.empty() ? std::string("hcpsim import") : opt.generator) + "` from " +
            interop::display(c.source_path) + ". Comments name the " +
            (c.source_keys.empty() ? "Megatron argument" : "config key") + " and line behind each value.");
  if (!c.unmodelled.empty()) {
    // Written only with --allow-unmodelled: the scenario simulates the dense, standard-attention part only.
    w.comment("NOT MODELLED (imported with --allow-unmodelled): hcpsim simulates this as a dense model with");
    w.comment("standard attention, without these settings:");
    for (const auto& u : c.unmodelled) w.comment("  " + u);
  }
  w.raw("schema_version: 1");
  w.raw("name: " + yaml_scalar(c.name));
  write_model(w, c, sizes);
  write_parallel(w, c, dp);
  write_training(w, c);
  write_cluster(w, c, opt);
  return w.text();
}

}  // namespace hcpsim
