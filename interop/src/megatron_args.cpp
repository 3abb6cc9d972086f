// Megatron-LM arguments → MegatronConfig, as megatron/training/arguments.py reads them: the last occurrence of a
// flag wins, derived values follow validate_args, and every flag hcpsim does not model is listed as ignored.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "hcpsim/config/megatron_defaults.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/core/types.hpp"
#include "hcpsim/interop/megatron_import.hpp"
#include "input_names.hpp"
#include "shell_lexer.hpp"

namespace hcpsim {
namespace {

using interop::display;
using shell::is_name_char;

std::string strip(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

/// A Python repr list "[8, 2]" / "['p2p', 'a2a']" → its items; a plain value → itself.
std::vector<std::string> python_list(const std::string& text) {
  const std::string t = strip(text);
  if (t.size() < 2 || t.front() != '[' || t.back() != ']') return {t};
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(t.substr(1, t.size() - 2));
  while (std::getline(in, item, ',')) {
    std::string v = strip(item);
    if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    if (!v.empty()) out.push_back(v);
  }
  return out;
}

/// Reads one argument list into a MegatronConfig; `log_block` switches to the log's Python spellings (None, True,
/// lists) and leaves unread arguments out of `ignored`.
class ArgInterpreter {
 public:
  ArgInterpreter(const std::vector<MegatronArg>& args, const std::string& display_name, bool log_block)
      : file_(display_name), log_(log_block) {
    for (const auto& a : args) {
      std::string name = a.name;
      if (name == "nproc_per_node" || name == "nnodes") {
        if (!a.from_launcher && !log_) {
          unread_.push_back(a);
          continue;
        }
      }
      if (name == "fp8") name = "fp8_format";  // Megatron stores --fp8-format in args.fp8
      if (!log_ || !is_none(a)) last_[name] = a;  // argparse: the last occurrence wins
      else last_.erase(name);
      order_.push_back(a);
    }
    cfg_.source_path = display_name;
  }

  MegatronConfig run() {
    read_model();
    read_parallel();
    read_training();
    read_launch();
    read_unmodelled();
    if (!log_) {
      refuse_misspelled_flags();  // argparse refuses unknown flags before validate_args asserts anything
      refuse_asserted_combinations();
      for (const auto& a : order_) {
        std::string name = a.name == "fp8" ? std::string("fp8_format") : a.name;
        if (used_.count(name) && last_.count(name) && last_.at(name).line == a.line && last_.at(name).flag == a.flag)
          continue;
        std::string text = a.flag;
        for (const auto& v : a.values) text += " " + v;
        if (used_.count(name)) text += "  (overridden by a later " + a.flag + ")";
        cfg_.ignored.push_back(text);
      }
      for (const auto& a : unread_) {
        std::string text = a.flag;
        for (const auto& v : a.values) text += " " + v;
        cfg_.ignored.push_back(text + "  (a launcher option after the training script)");
      }
    }
    return std::move(cfg_);
  }

 private:
  /// Model-changing settings hcpsim does not simulate (interop::unmodelled_setting), marked read so they are
  /// listed once, as unmodelled rather than ignored.
  void read_unmodelled() {
    for (const auto& [name, a] : last_) {
      if (used_.count(name) || !interop::unmodelled_setting(name, joined(a), log_)) continue;
      (void)get(name);
    }
    for (const auto& a : order_) {
      const auto it = last_.find(a.name);
      if (it == last_.end() || it->second.line != a.line || it->second.flag != a.flag) continue;
      if (!interop::unmodelled_setting(a.name, joined(a), log_)) continue;
      std::string text = a.flag;
      for (const auto& v : a.values) text += " " + v;
      cfg_.unmodelled.push_back(text);
    }
  }

  /// A flag that misspells one hcpsim reads and the script does not set (interop::misspelled_name:
  /// --context-paralel-size for --context-parallel-size): it was listed as ignored and the setting silently took
  /// its default (CP 1).
  /// @throws InputError at the flag, naming the flag it resembles.
  void refuse_misspelled_flags() const {
    for (const auto& a : order_) {
      if (used_.count(a.name) || a.name.find(':') != std::string::npos) continue;  // an MPI launcher's own option
      // used_ is a std::set: the first match in name order, deterministic.
      const std::string known =
          interop::misspelled_name(a.name, used_, [&](const std::string& k) { return last_.count(k) > 0; });
      if (known.empty()) continue;
      std::string flag = "--" + known;
      std::replace(flag.begin(), flag.end(), '_', '-');
      throw InputError(where(a), a.flag,
                       "unknown flag; did you mean " + flag + "? (Megatron refuses it: unrecognized arguments)",
                       "spell it " + flag);
    }
  }

  /// Flag combinations Megatron accepts from argparse and then asserts against.
  /// @throws InputError at the later flag of the combination.
  void refuse_asserted_combinations() {
    // Megatron-LM arguments.py validate_args: under args.fp16, assert not args.bf16.
    if (cfg_.params_dtype == "bf16" && last_.count("fp16") && get_switch("fp16"))
      throw InputError(where(*get("fp16")), get("fp16")->flag,
                       "given with --bf16: Megatron's validate_args asserts that at most one of them is set",
                       "give one of --bf16 and --fp16");
    // Megatron's local DotProductAttention (transformer_impl local) asserts "Context parallelism is only supported
    // by TEDotProductAttention!" (megatron/core/transformer/dot_product_attention.py).
    const auto impl = peek_word("transformer_impl");
    if (impl && *impl == "local" && cfg_.context_parallel_size > 1)
      throw InputError(where(*get("transformer_impl")), get("transformer_impl")->flag,
                       "local attention (Megatron's DotProductAttention) has no context parallelism: it asserts "
                       "\"Context parallelism is only supported by TEDotProductAttention!\"",
                       "use --transformer-impl transformer_engine (the default), or --context-parallel-size 1");
  }

  bool is_none(const MegatronArg& a) const { return a.values.size() == 1 && a.values[0] == "None"; }

  const MegatronArg* get(const std::string& name) {
    used_.insert(name);
    auto it = last_.find(name);
    if (it == last_.end()) return nullptr;
    cfg_.lines[name] = it->second.line;
    cfg_.columns[name] = it->second.column;
    return &it->second;
  }

  SourceLoc where(const MegatronArg& a) const {
    SourceLoc l;
    l.file = display(file_);
    l.line = a.line;
    l.column = a.line > 0 ? std::max(a.column, 1) : 0;
    return l;
  }

  std::string joined(const MegatronArg& a) const {
    std::string s;
    for (const auto& v : a.values) s += (s.empty() ? "" : " ") + v;
    return s;
  }

  [[noreturn]] void bad_value(const MegatronArg& a, const std::string& expected) const {
    const std::string v = joined(a);
    const auto dollar = v.find_first_of("$`");
    if (dollar != std::string::npos) {
      std::string var;
      size_t k = dollar + 1;
      if (k < v.size() && v[k] == '{') ++k;
      while (k < v.size() && is_name_char(v[k])) var += v[k++];
      throw InputError(where(a), a.flag,
                       "cannot resolve '" + v + "'" + (var.empty() ? "" : " (" + var + " is not set in the script)"),
                       var.empty() ? "write the value itself instead of the shell expression"
                                   : "set " + var + "=<value> in the script before the command, or write the value");
    }
    throw InputError(where(a), a.flag, "expected " + expected + ", got '" + v + "'",
                     "write " + expected + ", e.g. '" + a.flag +
                         (expected.find("integers") != std::string::npos ? " 2 2'" : " 8'"));
  }

  std::optional<int64_t> get_int(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return std::nullopt;
    if (a->values.size() != 1) bad_value(*a, "one integer");
    const std::string& s = a->values[0];
    try {
      size_t pos = 0;
      const long long v = std::stoll(s, &pos, 10);
      if (pos != s.size()) bad_value(*a, "an integer");
      return v;
    } catch (const std::invalid_argument&) {
      bad_value(*a, "an integer");
    } catch (const std::out_of_range&) {
      bad_value(*a, "an integer");
    }
  }

  /// A parallel size: a whole number of at least 1. @throws InputError at the flag otherwise.
  std::optional<int64_t> get_size(const std::string& name) {
    const auto v = get_int(name);
    if (v && *v < 1)
      throw InputError(where(*get(name)), get(name)->flag, "must be at least 1, got " + std::to_string(*v),
                       "give a positive size, e.g. '" + get(name)->flag + " 2'");
    return v;
  }

  std::optional<std::vector<int64_t>> get_int_list(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return std::nullopt;
    std::vector<std::string> items;
    for (const auto& v : a->values)
      for (auto& x : log_ ? python_list(v) : std::vector<std::string>{v}) items.push_back(x);
    if (items.empty()) bad_value(*a, "a list of integers");
    std::vector<int64_t> out;
    for (const auto& s : items) {
      try {
        size_t pos = 0;
        const long long v = std::stoll(s, &pos, 10);
        if (pos != s.size()) bad_value(*a, "integers");
        out.push_back(v);
      } catch (const std::invalid_argument&) {
        bad_value(*a, "integers");
      } catch (const std::out_of_range&) {
        bad_value(*a, "integers");
      }
    }
    return out;
  }

  bool get_switch(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return false;
    if (a->values.empty()) return true;
    if (a->values.size() == 1 && (a->values[0] == "True" || a->values[0] == "true")) return true;
    if (a->values.size() == 1 && (a->values[0] == "False" || a->values[0] == "false")) return false;
    throw InputError(where(*a), a->flag, "a switch takes no value, got '" + joined(*a) + "'",
                     "write '" + a->flag + "' alone, or move '" + joined(*a) + "' after the flag it belongs to");
  }

  /// The value of an argument that is only mentioned in a note: it stays in the ignored list.
  std::optional<std::string> peek_word(const std::string& name) const {
    auto it = last_.find(name);
    if (it == last_.end() || it->second.values.size() != 1) return std::nullopt;
    return it->second.values[0];
  }

  std::optional<std::string> get_word(const std::string& name) {
    const MegatronArg* a = get(name);
    if (!a) return std::nullopt;
    if (a->values.size() != 1) bad_value(*a, "one value");
    return a->values[0];
  }

  void read_model() {
    cfg_.num_attention_heads = get_int("num_attention_heads");
    cfg_.hidden_size = get_int("hidden_size");
    const bool gqa = get_switch("group_query_attention");
    const auto groups = get_int("num_query_groups");
    if (gqa && groups) {
      cfg_.num_query_groups = groups;
    } else {
      // Source: arguments.py core_transformer_config_from_args: num_query_groups only with --group-query-attention.
      cfg_.num_query_groups = cfg_.num_attention_heads;
      if (groups && !log_ && *groups != cfg_.num_attention_heads.value_or(-1))
        cfg_.notes.push_back("--num-query-groups " + std::to_string(*groups) +
                             " has no effect without --group-query-attention (Megatron uses MHA); imported as MHA");
      if (cfg_.lines.count("num_attention_heads")) {
        cfg_.lines["num_query_groups"] = cfg_.lines["num_attention_heads"];
        cfg_.columns["num_query_groups"] = cfg_.columns["num_attention_heads"];
      }
    }
    cfg_.kv_channels = get_int("kv_channels");
    if (!cfg_.kv_channels && cfg_.hidden_size && cfg_.num_attention_heads && *cfg_.num_attention_heads > 0) {
      cfg_.kv_channels = default_kv_channels(*cfg_.hidden_size, *cfg_.num_attention_heads);
      cfg_.notes.push_back("kv_channels not set: hidden_size / num_attention_heads = " +
                           std::to_string(*cfg_.kv_channels) + " (Megatron's rule)");
    }
    cfg_.seq_length = get_int("seq_length");
    read_encoder_seq_length();
    if (auto v = get_int("micro_batch_size")) cfg_.micro_batch_size = *v;
    cfg_.global_batch_size = get_int("global_batch_size");
    cfg_.num_layers = get_int("num_layers");
    cfg_.gated_linear_unit = get_switch("swiglu");
    cfg_.ffn_hidden_size = get_int("ffn_hidden_size");
    if (!cfg_.ffn_hidden_size && cfg_.hidden_size) {
      cfg_.ffn_hidden_size = default_ffn_hidden_size(*cfg_.hidden_size, cfg_.gated_linear_unit,
                                                     MegatronConfigSource::megatron_lm_arguments);
      cfg_.notes.push_back("ffn_hidden_size not set: " + std::to_string(*cfg_.ffn_hidden_size) +
                           (cfg_.gated_linear_unit ? " (Megatron's SwiGLU rule int(8*hidden/3/64)*64)"
                                                   : " (Megatron's rule 4*hidden_size)"));
    }
    cfg_.vocab_size = get_int("vocab_size");
    if (!cfg_.vocab_size) {
      std::string tok;
      if (auto t = peek_word("tokenizer_type")) tok = *t;
      if (auto m = peek_word("tokenizer_model")) tok += (tok.empty() ? "" : " ") + *m;
      cfg_.notes.push_back("vocab_size not set: Megatron takes it from the tokenizer" +
                           (tok.empty() ? std::string() : " (" + tok + ")") +
                           "; model.vocab_size is left out, set it for the whole-step model (e.g. 128256 for Llama 3)");
    }
    cfg_.untie_embeddings_and_output_weights = get_switch("untie_embeddings_and_output_weights");
    const bool bf16 = get_switch("bf16");
    const bool fp16 = get_switch("fp16");
    cfg_.params_dtype = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
    read_attention_backend();
  }

  /// --encoder-seq-length stands for --seq-length. Source: Megatron-LM arguments.py validate_args (seq_length given:
  /// assert encoder_seq_length is None; else seq_length = encoder_seq_length). A log prints both, validated.
  void read_encoder_seq_length() {
    const MegatronArg* e = get("encoder_seq_length");
    if (!e || log_) return;
    if (cfg_.seq_length)
      throw InputError(where(*e), e->flag,
                       "given with --seq-length: Megatron's arguments.py asserts encoder_seq_length is None then",
                       "give only --seq-length");
    cfg_.seq_length = get_int("encoder_seq_length");
  }

  /// --attention-backend (Megatron's AttnBackend: flash, fused, unfused, local, auto; a log prints
  /// "AttnBackend.flash"). hcpsim times TE's FlashAttention and cuDNN fused attention; unfused and local
  /// attention have no context parallelism (TE's UnfusedDotProductAttention and Megatron's local
  /// DotProductAttention), so a launch line naming them is refused; a log's value is only read when modelled.
  void read_attention_backend() {
    auto b = get_word("attention_backend");
    if (!b) return;
    std::string v = *b;
    if (v.rfind("AttnBackend.", 0) == 0) v = v.substr(12);
    if (v == "auto" || v == "flash" || v == "fused") {
      cfg_.attention_backend = v;
      return;
    }
    if (log_) return;
    const MegatronArg& a = *get("attention_backend");
    throw InputError(where(a), a.flag,
                     "attention backend '" + v + "' is not modelled: hcpsim times TE's FlashAttention and cuDNN fused "
                     "attention (auto, flash, fused); unfused and local attention do not support context parallelism",
                     "use " + a.flag + " auto, flash or fused");
  }

  /// The DP reduction's gradient dtype. Source: Megatron-LM arguments.py validate_args (under --bf16:
  /// --grad-reduce-in-bf16 sets accumulate_allreduce_grads_in_fp32 = False, else it becomes True) and
  /// training.py (DDP grad_reduce_in_fp32 = accumulate_allreduce_grads_in_fp32, False unless set outside bf16).
  void read_grad_reduce_dtype() {
    if (log_) {  // the dump prints the validated value
      if (get("accumulate_allreduce_grads_in_fp32"))
        cfg_.grad_reduce_in_fp32 = get_switch("accumulate_allreduce_grads_in_fp32");
      return;
    }
    if (get_switch("grad_reduce_in_bf16")) {
      cfg_.grad_reduce_in_fp32 = false;
    } else if (get_switch("accumulate_allreduce_grads_in_fp32")) {
      cfg_.grad_reduce_in_fp32 = true;
    } else if (cfg_.params_dtype == "fp16") {
      cfg_.grad_reduce_in_fp32 = false;
      cfg_.notes.push_back("--fp16 without --accumulate-allreduce-grads-in-fp32: Megatron reduces gradients in fp16");
    }
  }

  void read_parallel() {
    if (auto v = get_size("tensor_model_parallel_size")) cfg_.tensor_model_parallel_size = *v;
    if (auto v = get_size("pipeline_model_parallel_size")) cfg_.pipeline_model_parallel_size = *v;
    if (auto v = get_size("context_parallel_size")) cfg_.context_parallel_size = *v;

    cfg_.virtual_pipeline_model_parallel_size = get_int("virtual_pipeline_model_parallel_size");
    cfg_.account_for_embedding_in_pipeline_split = get_switch("account_for_embedding_in_pipeline_split");
    cfg_.account_for_loss_in_pipeline_split = get_switch("account_for_loss_in_pipeline_split");
    const auto per_stage = get_int("num_layers_per_virtual_pipeline_stage");
    if (!cfg_.virtual_pipeline_model_parallel_size && per_stage) {
      const MegatronArg& a = *get("num_layers_per_virtual_pipeline_stage");
      // The embedding and the loss count as layers of the split when the account_for_* switches are set.
      const int64_t layers = cfg_.num_layers.value_or(0) + (cfg_.account_for_embedding_in_pipeline_split ? 1 : 0) +
                             (cfg_.account_for_loss_in_pipeline_split ? 1 : 0);
      if (!cfg_.num_layers || *per_stage <= 0 || layers % cfg_.pipeline_model_parallel_size != 0 ||
          (layers / cfg_.pipeline_model_parallel_size) % *per_stage != 0)
        throw InputError(where(a), a.flag,
                         "cannot derive the virtual pipeline size: num_layers / pipeline_model_parallel_size must be a "
                         "multiple of " + std::to_string(*per_stage),
                         "give --num-layers and a --num-layers-per-virtual-pipeline-stage that divides the layers of "
                         "one stage, or --virtual-pipeline-model-parallel-size");
      // Source: arguments.py validate_args: (num_layers / PP) / num_layers_per_virtual_pipeline_stage.
      cfg_.virtual_pipeline_model_parallel_size = layers / cfg_.pipeline_model_parallel_size / *per_stage;
      cfg_.lines["virtual_pipeline_model_parallel_size"] = a.line;
      cfg_.columns["virtual_pipeline_model_parallel_size"] = a.column;
    }
    if (const MegatronArg* a = get("cp_comm_type")) {
      std::vector<std::string> items;
      for (const auto& v : a->values)
        for (auto& x : log_ ? python_list(v) : std::vector<std::string>{v}) items.push_back(x);
      if (items.empty()) bad_value(*a, "p2p, a2a, a2a+p2p or allgather");
      for (auto& x : items) {
        if (x == "allgather") x = "all_gather";  // Megatron's spelling of TE's all_gather
        if (!parse_cp_comm_type(x))  // the spellings of core/types.hpp
          throw InputError(where(*a), a->flag, "unknown cp_comm_type '" + x + "'",
                           "use p2p, a2a, a2a+p2p or allgather (Megatron's spelling of TE's all_gather, which a scenario "
                           "file spells all_gather; one value, or one per layer)");
      }
      cfg_.cp_comm_type = items;
    }
    cfg_.hierarchical_context_parallel_sizes = get_int_list("hierarchical_context_parallel_sizes");
    cfg_.sequence_parallel = get_switch("sequence_parallel");
    read_grad_reduce_dtype();
    cfg_.use_distributed_optimizer = get_switch("use_distributed_optimizer");
    cfg_.overlap_grad_reduce = get_switch("overlap_grad_reduce");
    cfg_.overlap_param_gather = get_switch("overlap_param_gather");
    cfg_.tp_comm_overlap = get_switch("tp_comm_overlap");
    cfg_.decoder_first_pipeline_num_layers = get_int("decoder_first_pipeline_num_layers");
    cfg_.decoder_last_pipeline_num_layers = get_int("decoder_last_pipeline_num_layers");
  }

  void read_training() {
    if (auto g = get_word("recompute_granularity")) {
      const MegatronArg& a = *get("recompute_granularity");
      if (*g != "full" && *g != "selective")
        throw InputError(where(a), a.flag, "unknown recompute granularity '" + *g + "'", "use full or selective");
      cfg_.recompute_granularity = *g;
    } else if (get_switch("recompute_activations")) {
      // Source: arguments.py validate_args: --recompute-activations sets recompute_granularity = 'selective'.
      cfg_.recompute_granularity = "selective";
      cfg_.lines["recompute_granularity"] = cfg_.lines["recompute_activations"];
      cfg_.columns["recompute_granularity"] = cfg_.columns["recompute_activations"];
    }
    // Source: Megatron-LM arguments.py --recompute-method {uniform, block}, --recompute-num-layers.
    if (auto m = get_word("recompute_method")) {
      const MegatronArg& a = *get("recompute_method");
      if (*m != "uniform" && *m != "block")
        throw InputError(where(a), a.flag, "unknown recompute method '" + *m + "'", "use uniform or block");
      cfg_.recompute_method = *m;
    }
    cfg_.recompute_num_layers = get_int("recompute_num_layers");
    if (auto f = get_word("fp8_format")) cfg_.fp8 = true;
    // Source: Megatron-LM arguments.py --fp8-recipe {tensorwise, delayed, mxfp8, blockwise, custom},
    // --fp8-param-gather.
    if (auto r = get_word("fp8_recipe")) {
      const MegatronArg& a = *get("fp8_recipe");
      if (*r != "delayed" && *r != "tensorwise")
        throw InputError(where(a), a.flag, "the FP8 recipe '" + *r + "' is not modelled",
                         "use --fp8-recipe delayed or tensorwise, or drop the flag");
      cfg_.fp8_recipe = *r;
    }
    cfg_.fp8_param_gather = get_switch("fp8_param_gather");
  }

  void read_launch() {
    auto nnodes = get("nnodes");
    auto nproc = get("nproc_per_node");
    auto as_count = [&](const MegatronArg* a) -> std::optional<int64_t> {
      if (!a) return std::nullopt;
      if (a->values.size() == 1) {
        const std::string& s = a->values[0];
        if (interop::all_digits(s)) {
          if (s.size() > interop::kMaxCountDigits)
            throw InputError(where(*a), a->flag, "'" + s + "' is not a plausible " + a->flag.substr(2) + " count",
                             "give the real count, e.g. '" + a->flag + " 8'");
          return std::stoll(s);
        }
        if (s.find(':') != std::string::npos && s.find('$') == std::string::npos)
          throw InputError(where(*a), a->flag, "elastic node range '" + s + "' is not modelled",
                           "give a fixed node count, e.g. '" + a->flag + " " + s.substr(s.find(':') + 1) + "'");
        // "--nnodes $SLURM_NNODES": the node count the job runs on comes from the importer's --nodes.
        if (a == nnodes && s.find_first_of("$`") != std::string::npos) {
          cfg_.nnodes_unresolved = a->flag + " " + s;
          return std::nullopt;
        }
        // "--nproc_per_node $SLURM_GPUS_ON_NODE": from the importer's --gpus-per-node.
        if (a == nproc && !log_ && s.find_first_of("$`") != std::string::npos) {
          cfg_.nproc_per_node_unresolved = a->flag + " " + s;
          return std::nullopt;
        }
        if (s == "gpu" || s == "auto") {
          cfg_.notes.push_back(a->flag + " " + s + ": GPUs per node taken from the cluster preset");
          if (a == nproc) cfg_.nproc_per_node_is_gpus = true;
          return std::nullopt;
        }
      }
      bad_value(*a, "a count");
    };
    cfg_.nnodes = as_count(nnodes);
    cfg_.nproc_per_node = as_count(nproc);
    if (!cfg_.nnodes && !cfg_.nproc_per_node && !log_) read_mpi_launch();
    // torchrun's --nnodes defaults to 1 (torch.distributed.run: "--nnodes ... default 1"): a launcher line that
    // gives --nproc_per_node without --nnodes runs on one node.
    if (!log_ && !cfg_.nnodes && cfg_.nnodes_unresolved.empty() && cfg_.nproc_per_node) {
      cfg_.nnodes = 1;
      cfg_.notes.push_back("no --nnodes: one node, torchrun's default");
    }
    if (cfg_.nnodes && cfg_.nproc_per_node) cfg_.world_size = *cfg_.nnodes * *cfg_.nproc_per_node;
    if (log_) cfg_.world_size = get_int("world_size");
  }

  /// An MPI launcher starting one process per GPU (split_megatron_command_line names its options "mpirun:np",
  /// "srun:ntasks", ...): world = mpirun -np / -n or srun -n / --ntasks; processes per node = mpirun -N /
  /// --npernode / -ppn or srun --ntasks-per-node; nodes = srun -N / --nodes. Two of the three give the third.
  /// @throws InputError at the launcher's flag when its counts do not divide.
  void read_mpi_launch() {
    auto count = [&](std::initializer_list<const char*> names) -> std::pair<std::optional<int64_t>, const MegatronArg*> {
      for (const char* n : names) {
        const MegatronArg* a = get(n);
        if (!a || a->values.size() != 1) continue;
        const std::string& v = a->values[0];
        if (!interop::all_digits(v) || v.size() > interop::kMaxCountDigits) continue;  // "$SLURM_NTASKS": left to the environment
        return {std::stoll(v), a};
      }
      return {std::nullopt, nullptr};
    };
    const auto [world, world_arg] = count({"mpirun:np", "mpirun:n", "srun:n", "srun:ntasks"});
    const auto [per_node, per_node_arg] = count({"mpirun:N", "mpirun:npernode", "mpirun:ppn", "srun:ntasks_per_node"});
    const auto [nodes, nodes_arg] = count({"srun:N", "srun:nodes"});
    if (world && *world > 0 && per_node && *per_node > 0) {
      if (*world % *per_node != 0)
        throw InputError(where(*world_arg), world_arg->flag,
                         std::to_string(*world) + " processes do not fill nodes of " + std::to_string(*per_node),
                         "give a multiple of " + per_node_arg->flag + " " + std::to_string(*per_node));
      cfg_.nnodes = *world / *per_node;
      cfg_.nproc_per_node = *per_node;
    } else if (world && *world > 0 && nodes && *nodes > 0) {
      if (*world % *nodes != 0)
        throw InputError(where(*world_arg), world_arg->flag,
                         std::to_string(*world) + " processes do not split evenly over " + std::to_string(*nodes) +
                             " nodes",
                         "give a multiple of " + nodes_arg->flag + " " + std::to_string(*nodes));
      cfg_.nnodes = *nodes;
      cfg_.nproc_per_node = *world / *nodes;
    } else if (nodes && *nodes > 0 && per_node && *per_node > 0) {
      cfg_.nnodes = *nodes;
      cfg_.nproc_per_node = *per_node;
    } else if (world && *world > 0) {  // the nodes follow from the cluster preset's GPUs per node
      cfg_.world_size = *world;
      cfg_.notes.push_back(world_arg->flag + " " + std::to_string(*world) +
                           ": the world size, from the MPI launcher; nodes = world / the preset's GPUs per node");
      return;
    } else {
      return;
    }
    // Where the counts came from (the written scenario's comments and messages point there).
    cfg_.lines["nnodes"] = (nodes_arg != nullptr ? nodes_arg : world_arg)->line;
    cfg_.lines["nproc_per_node"] = (per_node_arg != nullptr ? per_node_arg : world_arg)->line;
    cfg_.notes.push_back(std::to_string(*cfg_.nnodes) + " nodes x " + std::to_string(*cfg_.nproc_per_node) +
                         " processes per node, from the MPI launcher's counts");
  }

  std::string file_;
  bool log_;
  std::map<std::string, MegatronArg> last_;
  std::vector<MegatronArg> order_;
  std::vector<MegatronArg> unread_;
  std::set<std::string> used_;
  MegatronConfig cfg_;
};

}  // namespace

MegatronConfig interpret_megatron_args(const std::vector<MegatronArg>& args, const std::string& display_name,
                                       bool log_block) {
  ArgInterpreter in(args, display_name, log_block);
  MegatronConfig c = in.run();
  c.name = interop::scenario_name_of(display_name, "megatron_args");
  return c;
}

}  // namespace hcpsim
