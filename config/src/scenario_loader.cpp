#include "hcpsim/config/scenario_loader.hpp"

#include "hcpsim/core/fault_injection.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace hcpsim {

int edit_distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// Keys of each section (the did-you-mean at the top level looks a misplaced key up in them).
const std::vector<std::string> kModelKeys = {
    "num_attention_heads", "num_query_groups", "kv_channels", "kv_channels_v", "seq_length", "micro_batch_size",
    "num_layers", "hidden_size", "ffn_hidden_size", "attn_mask_type", "qkv_format", "window_size", "attention_bias",
    "params_dtype", "global_batch_size", "vocab_size", "gated_linear_unit", "untie_embeddings_and_output_weights"};
const std::vector<std::string> kParallelKeys = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "data_parallel_size",
    "cp_comm_type", "hierarchical_context_parallel_sizes", "order", "use_decentralized_pg", "te_version",
    "sequence_parallel", "virtual_pipeline_model_parallel_size", "use_distributed_optimizer", "overlap_grad_reduce",
    "overlap_param_gather"};
const std::vector<std::string> kClusterKeys = {"preset", "nodes", "gpus_per_node", "gpu", "nvlink", "network",
                                               "message_latency_us", "nics_per_node", "fabric", "topology"};
const std::vector<std::string> kTrainingKeys = {"recompute_granularity", "fp8", "framework_overhead_GB"};
const std::vector<std::string> kOracleKeys = {"seed", "dtype", "input_distribution", "heads", "inject"};

/// Reads one scenario tree into a Scenario, recording where each value came from.
class Reader {
 public:
  Reader(std::string file, std::map<std::string, std::string> overridden, Scenario& out)
      : file_(std::move(file)), overridden_(std::move(overridden)), sc_(out) {}

  SourceLoc loc(const YAML::Node& n, const std::string& path) const {
    // An overridden value (or a value below an overridden key) points at the override text.
    std::string k = path;
    while (!k.empty()) {
      auto it = overridden_.find(k);
      if (it != overridden_.end()) {
        SourceLoc l;
        l.override_text = it->second;
        return l;
      }
      auto dot = k.rfind('.');
      if (dot == std::string::npos) break;
      k.resize(dot);
    }
    SourceLoc l;
    l.file = file_;
    if (n.IsDefined() && n.Mark().line >= 0 && !n.Mark().is_null()) {
      l.line = n.Mark().line + 1;
      l.column = n.Mark().column + 1;
    }
    return l;
  }

  [[noreturn]] void fail(const YAML::Node& n, const std::string& path, const std::string& problem,
                         const std::string& fix) const {
    throw InputError(loc(n, path), path, problem, fix);
  }

  /// Rejects keys of `map` not in `allowed` (with a did-you-mean) and records key locations.
  void check_map(const YAML::Node& map, const std::string& path, const std::vector<std::string>& allowed) {
    if (!map.IsMap()) fail(map, path, "expected a mapping of keys", "write '" + path + ":' followed by indented keys");
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.as<std::string>();
      const std::string full = join_path(path, key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string best;
        int best_d = std::numeric_limits<int>::max();
        for (const auto& a : allowed) {
          int d = edit_distance(key, a);
          if (d < best_d) { best_d = d; best = a; }
        }
        std::string fix;
        // A section key written at the top level (a Megatron user's `context_parallel_size=8`, or
        // `context-parallel-size`): name its section.
        std::string section_key;
        if (path.empty()) {
          std::string k = key;
          std::replace(k.begin(), k.end(), '-', '_');
          for (const auto& [section, keys] :
               {std::pair<const char*, const std::vector<std::string>*>{"model", &kModelKeys},
                {"parallel", &kParallelKeys}, {"cluster", &kClusterKeys}, {"training", &kTrainingKeys},
                {"oracle", &kOracleKeys}})
            if (section_key.empty() && std::find(keys->begin(), keys->end(), k) != keys->end())
              section_key = std::string(section) + "." + k;
        }
        if (!section_key.empty()) {
          fix = "did you mean '" + section_key + "'? (keys live in sections; as an override: " + section_key + "=...)";
        } else if (best_d <= std::max<int>(2, static_cast<int>(key.size()) / 3)) {
          fix = "did you mean '" + join_path(path, best) + "'?";
        } else {
          std::string list;
          for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
          fix = "remove it; keys allowed under '" + (path.empty() ? std::string("<top level>") : path) + "': " + list;
        }
        throw InputError(loc(it->first, full), full, "unknown key '" + key + "'", fix);
      }
      sc_.locations[full] = loc(it->first, full);
    }
  }

  int64_t get_int(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) fail(n, path, "expected an integer", "write a whole number, e.g. '" + path + ": 8'");
    const std::string text = n.Scalar();
    try {
      size_t pos = 0;
      long long v = std::stoll(text, &pos, 10);
      if (pos != text.size()) throw std::invalid_argument(text);
      return v;
    } catch (const std::exception&) {
      fail(n, path, "expected an integer, got '" + text + "'", "write a whole number, e.g. '" + path + ": 8'");
    }
  }

  double get_double(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) fail(n, path, "expected a number", "write a number, e.g. '" + path + ": 1.5'");
    const std::string text = n.Scalar();
    try {
      size_t pos = 0;
      double v = std::stod(text, &pos);
      if (pos != text.size() || !std::isfinite(v)) throw std::invalid_argument(text);
      return v;
    } catch (const std::exception&) {
      fail(n, path, "expected a number, got '" + text + "'", "write a number, e.g. '" + path + ": 1.5'");
    }
  }

  bool get_bool(const YAML::Node& n, const std::string& path) const {
    if (n.IsScalar()) {
      const std::string& t = n.Scalar();
      if (t == "true" || t == "True") return true;
      if (t == "false" || t == "False") return false;
    }
    fail(n, path, "expected true or false", "write '" + path + ": true' or '" + path + ": false'");
  }

  std::string get_string(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) fail(n, path, "expected a string", "write a single value, e.g. '" + path + ": text'");
    return n.Scalar();
  }

  std::vector<int64_t> get_int_list(const YAML::Node& n, const std::string& path) const {
    if (!n.IsSequence()) fail(n, path, "expected a list of integers", "write e.g. '" + path + ": [2, 2]'");
    std::vector<int64_t> out;
    for (size_t i = 0; i < n.size(); ++i) out.push_back(get_int(n[i], path));
    return out;
  }

  template <class E, class ParseFn>
  E get_enum(const YAML::Node& n, const std::string& path, ParseFn parse, const std::string& choices) const {
    const std::string s = get_string(n, path);
    auto v = parse(s);
    if (!v) fail(n, path, "unknown value '" + s + "'", "use one of: " + choices);
    return *v;
  }

  void read(const YAML::Node& root) {
    check_map(root, "", {"schema_version", "name", "model", "parallel", "cluster", "training", "oracle", "expect"});
    if (!root["schema_version"])
      fail(root, "schema_version", "missing", "add 'schema_version: 1' at the top of the file");
    const int64_t version = get_int(root["schema_version"], "schema_version");
    if (version != 1)
      fail(root["schema_version"], "schema_version", "version " + std::to_string(version) + " is not supported",
           "this hcpsim reads schema_version 1");
    sc_.schema_version = 1;
    if (root["name"]) sc_.name = get_string(root["name"], "name");
    if (!root["model"]) fail(root, "model", "missing section", "add a 'model:' section (see README, Scenario schema)");
    if (!root["parallel"])
      fail(root, "parallel", "missing section", "add a 'parallel:' section (see README, Scenario schema)");
    read_model(root["model"]);
    read_parallel(root["parallel"]);
    read_cluster(root["cluster"]);
    if (root["training"]) read_training(root["training"]);
    if (root["oracle"]) read_oracle(root["oracle"]);
    if (root["expect"]) read_expect(root["expect"]);
  }

 private:
  void read_model(const YAML::Node& m) {
    const std::string P = "model";
    check_map(m, P, kModelKeys);
    ModelConfig& mc = sc_.model;
    auto req = [&](const char* key) {
      if (!m[key]) fail(m, P, std::string("missing required key '") + key + "'", std::string("add 'model.") + key + ": <value>'");
      return get_int(m[key], P + "." + key);
    };
    mc.num_attention_heads = req("num_attention_heads");
    mc.seq_length = req("seq_length");
    mc.num_query_groups = m["num_query_groups"] ? get_int(m["num_query_groups"], P + ".num_query_groups")
                                                : mc.num_attention_heads;
    if (m["hidden_size"]) mc.hidden_size = get_int(m["hidden_size"], P + ".hidden_size");
    if (m["ffn_hidden_size"]) mc.ffn_hidden_size = get_int(m["ffn_hidden_size"], P + ".ffn_hidden_size");
    if (m["global_batch_size"] && !m["global_batch_size"].IsNull())
      mc.global_batch_size = get_int(m["global_batch_size"], P + ".global_batch_size");
    if (m["vocab_size"] && !m["vocab_size"].IsNull()) mc.vocab_size = get_int(m["vocab_size"], P + ".vocab_size");
    if (m["gated_linear_unit"]) mc.gated_linear_unit = get_bool(m["gated_linear_unit"], P + ".gated_linear_unit");
    if (m["untie_embeddings_and_output_weights"])
      mc.untie_embeddings_and_output_weights =
          get_bool(m["untie_embeddings_and_output_weights"], P + ".untie_embeddings_and_output_weights");
    if (m["kv_channels"]) {
      mc.kv_channels = get_int(m["kv_channels"], P + ".kv_channels");
    } else if (mc.hidden_size && mc.num_attention_heads > 0) {
      // Source: Megatron TransformerConfig: kv_channels defaults to hidden_size // num_attention_heads.
      mc.kv_channels = *mc.hidden_size / mc.num_attention_heads;
    } else {
      fail(m, P, "missing required key 'kv_channels'", "add 'model.kv_channels: <head dim>' (or hidden_size)");
    }
    mc.kv_channels_v = m["kv_channels_v"] ? get_int(m["kv_channels_v"], P + ".kv_channels_v") : mc.kv_channels;
    if (m["micro_batch_size"]) mc.micro_batch_size = get_int(m["micro_batch_size"], P + ".micro_batch_size");
    if (m["num_layers"]) mc.num_layers = get_int(m["num_layers"], P + ".num_layers");
    if (m["attn_mask_type"])
      mc.attn_mask_type = get_enum<AttnMaskType>(m["attn_mask_type"], P + ".attn_mask_type", parse_attn_mask_type,
                                                 "causal, no_mask");
    if (m["qkv_format"])
      mc.qkv_format = get_enum<QkvFormat>(m["qkv_format"], P + ".qkv_format", parse_qkv_format, "bshd, sbhd, thd");
    if (m["window_size"] && !m["window_size"].IsNull()) {
      mc.window_size = get_int_list(m["window_size"], P + ".window_size");
      if (mc.window_size->size() != 2)
        fail(m["window_size"], P + ".window_size", "expected two values [left, right]",
             "write e.g. 'window_size: [4096, 0]', or [-1, -1] for no window");
    }
    if (m["attention_bias"]) mc.attention_bias = get_bool(m["attention_bias"], P + ".attention_bias");
    if (m["params_dtype"])
      mc.params_dtype = get_enum<Dtype>(m["params_dtype"], P + ".params_dtype", parse_dtype, "bf16, fp16, fp32");
    if (mc.params_dtype == Dtype::fp64)
      fail(m["params_dtype"], P + ".params_dtype", "fp64 is not a training dtype", "use bf16, fp16 or fp32");
  }

  void read_parallel(const YAML::Node& m) {
    const std::string P = "parallel";
    check_map(m, P, kParallelKeys);
    ParallelConfig& pc = sc_.parallel;
    if (m["tensor_model_parallel_size"])
      pc.tensor_model_parallel_size = get_int(m["tensor_model_parallel_size"], P + ".tensor_model_parallel_size");
    if (m["pipeline_model_parallel_size"])
      pc.pipeline_model_parallel_size = get_int(m["pipeline_model_parallel_size"], P + ".pipeline_model_parallel_size");
    if (m["context_parallel_size"])
      pc.context_parallel_size = get_int(m["context_parallel_size"], P + ".context_parallel_size");
    if (m["data_parallel_size"] && !m["data_parallel_size"].IsNull())
      pc.data_parallel_size = get_int(m["data_parallel_size"], P + ".data_parallel_size");
    if (m["cp_comm_type"]) {
      const YAML::Node& t = m["cp_comm_type"];
      const std::string key = P + ".cp_comm_type";
      const std::string choices = "p2p, a2a, a2a+p2p, all_gather (one value, or a list with one per layer)";
      pc.cp_comm_type.clear();
      if (t.IsSequence()) {
        if (t.size() == 0) fail(t, key, "empty list", "give one value, or one per layer");
        for (size_t i = 0; i < t.size(); ++i)
          pc.cp_comm_type.push_back(get_enum<CpCommType>(t[i], key, parse_cp_comm_type, choices));
      } else {
        pc.cp_comm_type.push_back(get_enum<CpCommType>(t, key, parse_cp_comm_type, choices));
      }
    }
    if (m["hierarchical_context_parallel_sizes"] && !m["hierarchical_context_parallel_sizes"].IsNull())
      pc.hierarchical_context_parallel_sizes =
          get_int_list(m["hierarchical_context_parallel_sizes"], P + ".hierarchical_context_parallel_sizes");
    if (m["order"]) pc.order = get_string(m["order"], P + ".order");
    if (m["use_decentralized_pg"]) pc.use_decentralized_pg = get_bool(m["use_decentralized_pg"], P + ".use_decentralized_pg");
    if (m["te_version"]) pc.te_version = get_string(m["te_version"], P + ".te_version");
    if (m["sequence_parallel"]) pc.sequence_parallel = get_bool(m["sequence_parallel"], P + ".sequence_parallel");
    if (m["virtual_pipeline_model_parallel_size"] && !m["virtual_pipeline_model_parallel_size"].IsNull())
      pc.virtual_pipeline_model_parallel_size =
          get_int(m["virtual_pipeline_model_parallel_size"], P + ".virtual_pipeline_model_parallel_size");
    if (m["use_distributed_optimizer"])
      pc.use_distributed_optimizer = get_bool(m["use_distributed_optimizer"], P + ".use_distributed_optimizer");
    if (m["overlap_grad_reduce"]) pc.overlap_grad_reduce = get_bool(m["overlap_grad_reduce"], P + ".overlap_grad_reduce");
    if (m["overlap_param_gather"])
      pc.overlap_param_gather = get_bool(m["overlap_param_gather"], P + ".overlap_param_gather");
  }

  void read_cluster(const YAML::Node& m) {
    const std::string P = "cluster";
    if (!m) {  // default: one DGX H100 node
      sc_.cluster = *cluster_preset("dgx-h100", 1);
      return;
    }
    check_map(m, P, kClusterKeys);
    const int64_t nodes = m["nodes"] ? get_int(m["nodes"], P + ".nodes") : 1;
    if (nodes < 1) fail(m["nodes"], P + ".nodes", "must be at least 1", "set cluster.nodes to the node count");
    ClusterSpec& c = sc_.cluster;
    std::string names;
    for (const auto& n : cluster_preset_names()) names += (names.empty() ? "" : ", ") + n;
    if (m["preset"]) {
      const std::string name = get_string(m["preset"], P + ".preset");
      auto preset = cluster_preset(name, nodes);
      if (!preset) fail(m["preset"], P + ".preset", "unknown preset '" + name + "'", "use one of: " + names);
      c = *preset;
    } else {
      for (const char* key : {"gpus_per_node", "gpu", "nvlink", "network", "message_latency_us"})
        if (!m[key])
          fail(m, P, std::string("explicit cluster without '") + key + "'",
               std::string("add 'cluster.") + key + "', or use 'cluster.preset' (" + names + ")");
      c = ClusterSpec{};
      c.nodes = nodes;
    }
    if (m["gpus_per_node"]) c.gpus_per_node = get_int(m["gpus_per_node"], P + ".gpus_per_node");
    if (c.gpus_per_node < 1) fail(m["gpus_per_node"], P + ".gpus_per_node", "must be at least 1", "set the GPUs per node");
    if (m["gpu"]) read_gpu(m["gpu"], P + ".gpu", !m["preset"]);
    if (m["nvlink"]) c.nvlink = read_link(m["nvlink"], P + ".nvlink", !m["preset"]);
    if (m["network"]) c.network = read_link(m["network"], P + ".network", !m["preset"]);
    if (m["message_latency_us"])
      c.message_latency_s = positive(m["message_latency_us"], P + ".message_latency_us", true) / 1e6;
    if (m["nics_per_node"]) {
      c.nics_per_node = get_int(m["nics_per_node"], P + ".nics_per_node");
      if (c.nics_per_node < 1 || c.gpus_per_node % c.nics_per_node != 0)
        fail(m["nics_per_node"], P + ".nics_per_node",
             "must be ≥ 1 and divide gpus_per_node (" + std::to_string(c.gpus_per_node) + ")",
             "give a divisor of gpus_per_node, e.g. " + std::to_string(c.gpus_per_node) + " (one NIC per GPU)");
    }
    if (m["fabric"]) read_fabric(m["fabric"], P + ".fabric");
    if (m["topology"]) read_topology(m["topology"], P + ".topology");
  }

  void read_fabric(const YAML::Node& m, const std::string& P) {
    check_map(m, P, {"kind", "leaf_downlinks", "spines", "oversubscription"});
    FabricSpec& f = sc_.cluster.fabric;
    if (m["kind"]) {
      const std::string k = get_string(m["kind"], P + ".kind");
      if (k == "rail_optimized") f.kind = FabricSpec::Kind::rail_optimized;
      else if (k == "fat_tree") f.kind = FabricSpec::Kind::fat_tree;
      else fail(m["kind"], P + ".kind", "unknown fabric '" + k + "'", "use one of: rail_optimized, fat_tree");
    }
    for (const char* key : {"leaf_downlinks", "spines"}) {
      if (!m[key]) continue;
      const int64_t v = get_int(m[key], P + "." + key);
      if (v < 1) fail(m[key], P + "." + key, "must be at least 1", "give a positive count, e.g. 32");
      (std::string(key) == "spines" ? f.spines : f.leaf_downlinks) = v;
    }
    if (m["oversubscription"]) {
      f.oversubscription = get_double(m["oversubscription"], P + ".oversubscription");
      if (f.oversubscription < 1)
        fail(m["oversubscription"], P + ".oversubscription", "must be ≥ 1 (downlink : uplink bandwidth)",
             "use 1 for a non-blocking fabric, 2 for 2:1");
    }
  }

  /// cluster.topology: {vertices: [{name, kind, node}], links: [{a, b, bandwidth_GB_per_s, latency_us}]}.
  void read_topology(const YAML::Node& m, const std::string& P) {
    check_map(m, P, {"vertices", "links"});
    ExplicitTopology& t = sc_.cluster.topology;
    t = ExplicitTopology{};
    if (!m["vertices"] || !m["vertices"].IsSequence() || m["vertices"].size() == 0)
      fail(m, P + ".vertices", "expected a non-empty list of vertices",
           "write '" + P + ".vertices: [{name: g0, kind: gpu, node: 0}, ...]'");
    std::map<std::string, int64_t> index;
    const YAML::Node vs = m["vertices"];
    for (size_t i = 0; i < vs.size(); ++i) {
      const std::string vp = P + ".vertices[" + std::to_string(i) + "]";
      check_map(vs[i], vp, {"name", "kind", "node"});
      if (!vs[i]["name"] || !vs[i]["kind"]) fail(vs[i], vp, "a vertex needs 'name' and 'kind'", "add both keys");
      ExplicitTopology::Vertex v;
      v.name = get_string(vs[i]["name"], vp + ".name");
      v.kind = get_string(vs[i]["kind"], vp + ".kind");
      const std::vector<std::string> kinds{"gpu", "nvswitch", "nic", "leaf", "spine"};
      if (std::find(kinds.begin(), kinds.end(), v.kind) == kinds.end())
        fail(vs[i]["kind"], vp + ".kind", "unknown vertex kind '" + v.kind + "'",
             "use one of: gpu, nvswitch, nic, leaf, spine");
      if (vs[i]["node"]) v.node = get_int(vs[i]["node"], vp + ".node");
      if (v.kind == "gpu" && v.node < 0) fail(vs[i], vp + ".node", "a gpu vertex needs its node", "add 'node: <index>'");
      if (!index.emplace(v.name, static_cast<int64_t>(t.vertices.size())).second)
        fail(vs[i]["name"], vp + ".name", "duplicate vertex name '" + v.name + "'", "give every vertex its own name");
      t.vertices.push_back(v);
    }
    int64_t gpus = 0;
    for (const auto& v : t.vertices) gpus += v.kind == "gpu" ? 1 : 0;
    if (gpus != sc_.cluster.world_size())
      fail(m["vertices"], P + ".vertices",
           "lists " + std::to_string(gpus) + " gpu vertices but nodes · gpus_per_node = " +
               std::to_string(sc_.cluster.world_size()),
           "list one gpu vertex per GPU, or fix cluster.nodes / cluster.gpus_per_node");
    const YAML::Node ls = m["links"];
    if (!ls || !ls.IsSequence()) fail(m, P + ".links", "expected a list of links", "write '" + P + ".links: [{a: g0, b: sw0, bandwidth_GB_per_s: 450, latency_us: 0.5}, ...]'");
    for (size_t i = 0; i < ls.size(); ++i) {
      const std::string lp = P + ".links[" + std::to_string(i) + "]";
      check_map(ls[i], lp, {"a", "b", "bandwidth_GB_per_s", "latency_us"});
      ExplicitTopology::Link l;
      for (const char* end : {"a", "b"}) {
        if (!ls[i][end]) fail(ls[i], lp, std::string("a link needs '") + end + "'", "name both end vertices");
        const std::string name = get_string(ls[i][end], lp + "." + end);
        const auto it = index.find(name);
        if (it == index.end())
          fail(ls[i][end], lp + "." + end, "unknown vertex '" + name + "'", "use a name listed under " + P + ".vertices");
        (std::string(end) == "a" ? l.a : l.b) = it->second;
      }
      if (l.a == l.b) fail(ls[i], lp, "a link joins a vertex to itself", "name two different vertices");
      if (!ls[i]["bandwidth_GB_per_s"]) fail(ls[i], lp, "a link needs 'bandwidth_GB_per_s'", "add the per-direction rate");
      l.bandwidth_bytes_per_s = positive(ls[i]["bandwidth_GB_per_s"], lp + ".bandwidth_GB_per_s", false) * 1e9;
      if (ls[i]["latency_us"]) l.latency_s = positive(ls[i]["latency_us"], lp + ".latency_us", true) / 1e6;
      t.links.push_back(l);
    }
  }

  double positive(const YAML::Node& n, const std::string& path, bool allow_zero) const {
    const double v = get_double(n, path);
    if (v < 0 || (!allow_zero && v == 0)) fail(n, path, "must be positive", "give a value > 0");
    return v;
  }

  void read_gpu(const YAML::Node& m, const std::string& P, bool all_required) {
    const std::vector<std::string> keys{"name", "peak_bf16_TFLOP_per_s", "memory_GB", "hbm_bandwidth_GB_per_s",
                                        "attn_fwd_efficiency", "attn_bwd_efficiency"};
    std::vector<std::string> allowed = keys;
    allowed.insert(allowed.end(),
                   {"kernel_launch_overhead_us", "compute_slowdown_during_comm", "attn_fwd_table", "attn_bwd_table",
                    "peak_fp8_TFLOP_per_s", "gemm_efficiency", "calibration"});
    check_map(m, P, allowed);
    if (m["calibration"]) read_calibration(m["calibration"], P + ".calibration");
    if (all_required && !m["calibration"])
      for (const auto& k : keys)
        if (!m[k]) fail(m, P, "explicit gpu without '" + k + "'", "add '" + P + "." + k + "'");
    read_gpu_fields(m, P);
  }

  /// The GPU keys shared by cluster.gpu and a calibration file's `gpu:` section.
  void read_gpu_fields(const YAML::Node& m, const std::string& P) {
    GpuSpec& g = sc_.cluster.gpu;
    if (m["name"]) g.name = get_string(m["name"], P + ".name");
    if (m["peak_bf16_TFLOP_per_s"]) g.peak_bf16_flops_per_s = positive(m["peak_bf16_TFLOP_per_s"], P + ".peak_bf16_TFLOP_per_s", false) * 1e12;
    if (m["memory_GB"]) g.memory_bytes = positive(m["memory_GB"], P + ".memory_GB", false) * 1e9;
    if (m["hbm_bandwidth_GB_per_s"]) g.hbm_bandwidth_bytes_per_s = positive(m["hbm_bandwidth_GB_per_s"], P + ".hbm_bandwidth_GB_per_s", false) * 1e9;
    for (const char* key : {"attn_fwd_efficiency", "attn_bwd_efficiency"}) {
      if (!m[key]) continue;
      const double e = get_double(m[key], P + "." + key);
      if (e <= 0 || e > 1) fail(m[key], P + "." + key, "must be in (0, 1]", "give achieved/peak, e.g. 0.6");
      (std::string(key) == "attn_fwd_efficiency" ? g.attn_fwd_efficiency : g.attn_bwd_efficiency) = e;
      // A scalar efficiency replaces the preset's table for that direction.
      (std::string(key) == "attn_fwd_efficiency" ? g.attn_fwd_table : g.attn_bwd_table).clear();
    }
    for (const char* key : {"attn_fwd_table", "attn_bwd_table"})
      if (m[key]) (std::string(key) == "attn_fwd_table" ? g.attn_fwd_table : g.attn_bwd_table) =
                      read_efficiency_table(m[key], P + "." + key);
    if (m["kernel_launch_overhead_us"])
      g.kernel_launch_overhead_s = positive(m["kernel_launch_overhead_us"], P + ".kernel_launch_overhead_us", true) / 1e6;
    if (m["compute_slowdown_during_comm"]) {
      g.compute_slowdown_during_comm = get_double(m["compute_slowdown_during_comm"], P + ".compute_slowdown_during_comm");
      if (g.compute_slowdown_during_comm < 1)
        fail(m["compute_slowdown_during_comm"], P + ".compute_slowdown_during_comm", "must be ≥ 1",
             "give compute time with communication / without, e.g. 1.1 (1 = no slowdown)");
    }
    if (m["peak_fp8_TFLOP_per_s"])
      g.peak_fp8_flops_per_s = positive(m["peak_fp8_TFLOP_per_s"], P + ".peak_fp8_TFLOP_per_s", true) * 1e12;
    if (m["gemm_efficiency"]) {
      const double e = get_double(m["gemm_efficiency"], P + ".gemm_efficiency");
      if (e <= 0 || e > 1) fail(m["gemm_efficiency"], P + ".gemm_efficiency", "must be in (0, 1]", "give achieved/peak, e.g. 0.7");
      g.gemm_efficiency = e;
    }
  }

  /// cluster.gpu.calibration: a file written by `hcpsim calibrate` (path relative to the scenario file), whose
  /// `gpu:` section sets the GPU fields before the other keys of cluster.gpu (which win).
  void read_calibration(const YAML::Node& n, const std::string& P) {
    const std::string rel = get_string(n, P);
    std::filesystem::path path(rel);
    if (path.is_relative() && !file_.empty() && !std::filesystem::path(file_).parent_path().empty())
      path = std::filesystem::path(file_).parent_path() / path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      fail(n, P, "calibration file '" + path.string() + "' is not a regular file",
           "give a path relative to the scenario file, written by 'hcpsim calibrate MEASURED.csv -o FILE'");
    // A calibration file is a few hundred lines; refuse anything huge rather than read it into memory.
    constexpr std::uintmax_t kMaxCalibrationBytes = std::uintmax_t{64} << 20;
    if (std::filesystem::file_size(path, ec) > kMaxCalibrationBytes)
      fail(n, P, "calibration file '" + path.string() + "' is larger than 64 MiB", "give a file written by 'hcpsim calibrate'");
    YAML::Node root;
    try {
      root = YAML::LoadFile(path.string());
    } catch (const YAML::BadFile&) {
      fail(n, P, "cannot open calibration file '" + path.string() + "'",
           "give a path relative to the scenario file, written by 'hcpsim calibrate MEASURED.csv -o FILE'");
    } catch (const YAML::Exception& e) {
      fail(n, P, "calibration file '" + path.string() + "' is not valid YAML (" + e.msg + ")",
           "regenerate it with 'hcpsim calibrate'");
    }
    if (!root.IsMap() || !root["gpu"] || !root["gpu"].IsMap())
      fail(n, P, "calibration file '" + path.string() + "' has no 'gpu:' section",
           "regenerate it with 'hcpsim calibrate'");
    // Errors inside the calibration file name that file (keys keep their cluster.gpu.* paths).
    const std::string scenario_file = file_;
    file_ = path.string();
    const std::string cp = "cluster.gpu";
    const YAML::Node g = root["gpu"];
    check_map(g, cp, {"name", "peak_bf16_TFLOP_per_s", "memory_GB", "hbm_bandwidth_GB_per_s", "attn_fwd_efficiency",
                      "attn_bwd_efficiency", "kernel_launch_overhead_us", "compute_slowdown_during_comm",
                      "attn_fwd_table", "attn_bwd_table", "peak_fp8_TFLOP_per_s", "gemm_efficiency"});
    read_gpu_fields(g, cp);
    file_ = scenario_file;
    std::string what = path.string();
    if (root["source"] && root["source"].IsScalar()) what += " (fitted from " + root["source"].as<std::string>() + ")";
    sc_.cluster.gpu.calibration = "calibrated: " + what;
  }

  /// A list of {head_dim, q_rows, kv_rows, causal, efficiency}; per (causal, head_dim) the points must form a
  /// full q_rows × kv_rows grid (the simulator interpolates on it). An empty list clears the table.
  std::vector<EfficiencyPoint> read_efficiency_table(const YAML::Node& m, const std::string& P) {
    if (!m.IsSequence())
      fail(m, P, "expected a list of points",
           "write '" + P + ": [{head_dim: 128, q_rows: 4096, kv_rows: 4096, causal: false, efficiency: 0.7}, ...]'");
    std::vector<EfficiencyPoint> t;
    std::map<std::pair<bool, int64_t>, std::pair<std::set<int64_t>, std::set<int64_t>>> grids;
    std::map<std::pair<bool, int64_t>, size_t> counts;
    for (size_t i = 0; i < m.size(); ++i) {
      const std::string ip = P + "[" + std::to_string(i) + "]";
      check_map(m[i], ip, {"head_dim", "q_rows", "kv_rows", "causal", "efficiency"});
      for (const char* k : {"head_dim", "q_rows", "kv_rows", "efficiency"})
        if (!m[i][k]) fail(m[i], ip, std::string("a point needs '") + k + "'", std::string("add '") + k + "'");
      EfficiencyPoint e;
      e.head_dim = get_int(m[i]["head_dim"], ip + ".head_dim");
      e.q_rows = get_int(m[i]["q_rows"], ip + ".q_rows");
      e.kv_rows = get_int(m[i]["kv_rows"], ip + ".kv_rows");
      if (e.head_dim < 1 || e.q_rows < 1 || e.kv_rows < 1)
        fail(m[i], ip, "head_dim, q_rows and kv_rows must be ≥ 1", "give the block shape in rows and the head dim");
      if (m[i]["causal"]) e.causal = get_bool(m[i]["causal"], ip + ".causal");
      e.efficiency = get_double(m[i]["efficiency"], ip + ".efficiency");
      if (e.efficiency <= 0 || e.efficiency > 1)
        fail(m[i]["efficiency"], ip + ".efficiency", "must be in (0, 1]", "give achieved/peak, e.g. 0.6");
      auto& grid = grids[{e.causal, e.head_dim}];
      grid.first.insert(e.q_rows);
      grid.second.insert(e.kv_rows);
      ++counts[{e.causal, e.head_dim}];
      t.push_back(e);
    }
    for (const auto& [k, grid] : grids)
      if (grid.first.size() * grid.second.size() != counts[k])
        fail(m, P,
             "the points of head_dim " + std::to_string(k.second) + (k.first ? " (causal)" : "") +
                 " do not form a full q_rows x kv_rows grid (or repeat a point)",
             "give one point for every combination of the listed q_rows and kv_rows");
    return t;
  }

  LinkSpec read_link(const YAML::Node& m, const std::string& P, bool all_required) {
    check_map(m, P, {"bandwidth_GB_per_s", "latency_us"});
    LinkSpec l = P == "cluster.nvlink" ? sc_.cluster.nvlink : sc_.cluster.network;
    if (all_required)
      for (const char* k : {"bandwidth_GB_per_s", "latency_us"})
        if (!m[k]) fail(m, P, std::string("explicit link without '") + k + "'", "add '" + P + "." + k + "'");
    if (m["bandwidth_GB_per_s"]) l.bandwidth_bytes_per_s = positive(m["bandwidth_GB_per_s"], P + ".bandwidth_GB_per_s", false) * 1e9;
    if (m["latency_us"]) l.latency_s = positive(m["latency_us"], P + ".latency_us", true) / 1e6;
    return l;
  }

  void read_training(const YAML::Node& m) {
    const std::string P = "training";
    check_map(m, P, kTrainingKeys);
    TrainingConfig& t = sc_.training;
    if (m["recompute_granularity"]) {
      const std::string g = get_string(m["recompute_granularity"], P + ".recompute_granularity");
      if (g == "none") t.recompute_granularity = RecomputeGranularity::none;
      else if (g == "selective") t.recompute_granularity = RecomputeGranularity::selective;
      else if (g == "full") t.recompute_granularity = RecomputeGranularity::full;
      else
        fail(m["recompute_granularity"], P + ".recompute_granularity", "unknown value '" + g + "'",
             "use one of: none, selective, full");
    }
    if (m["fp8"]) t.fp8 = get_bool(m["fp8"], P + ".fp8");
    if (m["framework_overhead_GB"])
      t.framework_overhead_bytes = positive(m["framework_overhead_GB"], P + ".framework_overhead_GB", true) * 1e9;
  }

  void read_oracle(const YAML::Node& m) {
    const std::string P = "oracle";
    check_map(m, P, kOracleKeys);
    OracleSpec& o = sc_.oracle;
    if (m["seed"]) {
      const int64_t seed = get_int(m["seed"], P + ".seed");
      if (seed < 0) fail(m["seed"], P + ".seed", "must be >= 0", "use a non-negative integer seed");
      o.seed = static_cast<uint64_t>(seed);
    }
    if (m["dtype"]) o.dtype = get_enum<Dtype>(m["dtype"], P + ".dtype", parse_dtype, "fp64, fp32, bf16, fp16");
    if (m["input_distribution"]) {
      o.input_distribution = get_string(m["input_distribution"], P + ".input_distribution");
      if (o.input_distribution != "clamped_normal" && o.input_distribution != "normal" &&
          o.input_distribution != "uniform" && o.input_distribution != "adversarial")
        fail(m["input_distribution"], P + ".input_distribution", "unknown distribution '" + o.input_distribution + "'",
             "use one of: clamped_normal, normal, uniform, adversarial");
    }
    if (m["heads"]) {
      o.heads = get_string(m["heads"], P + ".heads");
      const bool digits = !o.heads.empty() && o.heads.size() < 10 &&
                          std::all_of(o.heads.begin(), o.heads.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (o.heads != "all" && (!digits || std::stoll(o.heads) < 1))
        fail(m["heads"], P + ".heads", "expected 'all' or a positive number of q-heads, got '" + o.heads + "'",
             "write 'heads: all' or e.g. 'heads: 4' (the first 4 q-heads of each a2a member)");
    }
    if (m["inject"]) {
      const std::string name = get_string(m["inject"], P + ".inject");
      if (!parse_fault_kind(name)) {
        std::string list;
        for (FaultKind k : all_fault_kinds()) list += (list.empty() ? "" : ", ") + to_string(k);
        fail(m["inject"], P + ".inject", "unknown fault injector '" + name + "'", "use one of: " + list);
      }
      o.inject = name;
    }
  }

  void read_expect(const YAML::Node& m) {
    const std::string P = "expect";
    check_map(m, P, {"validate", "verify", "simulate"});
    sc_.expect.present = true;
    if (m["validate"]) {
      const YAML::Node& v = m["validate"];
      check_map(v, P + ".validate", {"exit_code", "error"});
      if (v["exit_code"]) sc_.expect.validate_exit_code = static_cast<int>(get_int(v["exit_code"], P + ".validate.exit_code"));
      if (v["error"]) sc_.expect.validate_error = get_string(v["error"], P + ".validate.error");
    }
    if (m["verify"]) {
      const YAML::Node& v = m["verify"];
      check_map(v, P + ".verify", {"result", "max_rel_l2"});
      if (v["result"]) {
        const std::string r = get_string(v["result"], P + ".verify.result");
        if (r != "pass" && r != "fail") fail(v["result"], P + ".verify.result", "unknown result '" + r + "'", "use pass or fail");
        sc_.expect.verify_result = r;
      }
      if (v["max_rel_l2"]) {
        const std::string key = P + ".verify.max_rel_l2";
        check_map(v["max_rel_l2"], key, {"out", "lse", "dq", "dk", "dv"});
        for (auto it = v["max_rel_l2"].begin(); it != v["max_rel_l2"].end(); ++it) {
          const std::string name = it->first.as<std::string>();
          const double bound = get_double(it->second, key + "." + name);
          if (bound < 0) fail(it->second, key + "." + name, "must be >= 0", "give an upper bound on the relative L2 error");
          sc_.expect.verify_max_rel_l2[name] = bound;
        }
      }
    }
    if (m["simulate"]) {
      const YAML::Node& v = m["simulate"];
      const std::string key = P + ".simulate";
      if (!v.IsMap()) fail(v, key, "expected a mapping of golden values", "write e.g. 'simulate: {total_ps: 123}'");
      // Field names are checked by the replay, which knows what the simulator reports.
      for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string name = it->first.as<std::string>();
        sc_.locations[key + "." + name] = loc(it->first, key + "." + name);
        sc_.expect.simulate[name] = get_int(it->second, key + "." + name);
      }
    }
  }

 public:
  /// Reads just the expect block of `root` (for load_expect).
  void read_expect_only(const YAML::Node& root) {
    if (root.IsMap() && root["expect"]) read_expect(root["expect"]);
  }

 private:
  std::string file_;
  std::map<std::string, std::string> overridden_;
  Scenario& sc_;
};

/// Applies one "a.b.c=value" override to `root`; returns the dotted key.
std::string apply_override(YAML::Node& root, const std::string& text) {
  SourceLoc where;
  where.override_text = text;
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(where, "", "an override must look like key.path=value",
                     "write e.g. model.seq_length=131072 or \"parallel.hierarchical_context_parallel_sizes=[8,2]\"");
  const std::string key = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (part.empty())
      throw InputError(where, key, "empty component in key path", "write dotted keys such as parallel.context_parallel_size");
    parts.push_back(part);
  }
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    throw InputError(where, key, "value is not valid YAML (" + e.msg + ")", "quote the whole override, e.g. \"key=[2,2]\"");
  }
  if (!value.IsDefined() || (value.IsNull() && value_text.empty()))
    throw InputError(where, key, "empty value", "give a value after '=' (use null to unset a key)");
  // Walk with fresh handles: yaml-cpp Node assignment rebinds, so index from the root each time.
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = chain.back()[parts[i]];
    if (!child.IsDefined() || child.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = chain.back()[parts[i]];
    }
    if (!child.IsMap()) {
      std::string prefix;
      for (size_t j = 0; j <= i; ++j) prefix += (j ? "." : "") + parts[j];
      throw InputError(where, key, "'" + prefix + "' is not a section", "override a key inside a section");
    }
    chain.push_back(child);
  }
  chain.back()[parts.back()] = value;
  return key;
}

Scenario load_from_node(YAML::Node root, const std::string& display_name, const std::vector<std::string>& overrides) {
  Scenario sc;
  sc.source_path = display_name;
  if (!root.IsDefined() || root.IsNull()) {
    SourceLoc l;
    l.file = display_name;
    throw InputError(l, "", "the scenario file is empty", "start from scenarios/llama32_1b_cp4_a2a_p2p.yaml");
  }
  if (!root.IsMap()) {
    SourceLoc l;
    l.file = display_name;
    throw InputError(l, "", "the scenario must be a YAML mapping of sections", "see README, Scenario schema");
  }
  std::map<std::string, std::string> overridden;
  for (const auto& text : overrides) overridden[apply_override(root, text)] = text;
  Reader reader(display_name, overridden, sc);
  try {
    reader.read(root);
  } catch (const YAML::Exception& e) {
    SourceLoc l;
    l.file = display_name;
    l.line = e.mark.line + 1;
    l.column = e.mark.column + 1;
    throw InputError(l, "", "malformed YAML value (" + e.msg + ")", "check the syntax at that position");
  }
  if (sc.name.empty()) sc.name = std::filesystem::path(display_name).stem().string();
  return sc;
}

}  // namespace

Scenario load_scenario_text(const std::string& text, const std::string& display_name,
                            const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    SourceLoc l;
    l.file = display_name;
    l.line = e.mark.line + 1;
    l.column = e.mark.column + 1;
    throw InputError(l, "", "not valid YAML (" + e.msg + ")", "fix the syntax at that position");
  }
  return load_from_node(root, display_name, overrides);
}

ExpectSpec load_expect(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SourceLoc l;
  l.file = path;
  if (!in) throw InputError(l, "", "cannot open the scenario file", "check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  Scenario sc;
  sc.source_path = path;
  try {
    YAML::Node root = YAML::Load(ss.str());
    Reader reader(path, {}, sc);
    reader.read_expect_only(root);
  } catch (const YAML::Exception& e) {
    l.line = e.mark.line + 1;
    l.column = e.mark.column + 1;
    throw InputError(l, "expect", "not valid YAML (" + e.msg + ")", "fix the syntax at that position");
  }
  return sc.expect;
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    SourceLoc l;
    l.file = path;
    throw InputError(l, "", "cannot open the scenario file", "check the path (bundled scenarios are in scenarios/)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return load_scenario_text(ss.str(), path, overrides);
}

}  // namespace hcpsim
