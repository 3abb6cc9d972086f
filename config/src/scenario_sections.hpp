#pragma once
/// The readers of the scenario file's sections (schema_version 1), one per section, each filling its part of the
/// Scenario in place (what the section leaves out keeps its default). They check types and forms and the rules
/// local to one value; the rules between values are validation's (validation.hpp). Private to config.
/// Every reader raises InputError through its YamlReader (file:line:col or override, key path, fix).

#include <string>

#include "hcpsim/config/scenario.hpp"
#include "yaml_reader.hpp"

namespace hcpsim {

/// `model:` (load_model.cpp). @throws InputError
void read_model(YamlReader& r, const YAML::Node& m, ModelConfig& mc);

/// `parallel:` (load_parallel.cpp). @throws InputError
void read_parallel(YamlReader& r, const YAML::Node& m, ParallelConfig& pc);

/// `cluster:` (load_cluster.cpp); an absent section (`m` undefined) means one DGX H100 node. A preset's GPU gets
/// the efficiency tables of the kernel `backend` resolves to with `te_version` (resolve_attention_kernel) before
/// cluster.gpu's own keys, which win. @throws InputError
void read_cluster(YamlReader& r, const YAML::Node& m, AttentionBackend backend,
                  const std::optional<std::string>& te_version, ClusterSpec& c);

/// `cluster.gpu` at `path` (load_gpu.cpp), over the preset's GPU in `g`; `all_required` (no preset) asks for every
/// GPU key unless a calibration file gives them. @throws InputError
void read_gpu(YamlReader& r, const YAML::Node& m, const std::string& path, bool all_required, GpuSpec& g);

/// `training:` (load_model.cpp). @throws InputError
void read_training(YamlReader& r, const YAML::Node& m, TrainingConfig& t);

/// `oracle:`, including the fault injector `oracle.inject` (load_oracle.cpp). @throws InputError
void read_oracle(YamlReader& r, const YAML::Node& m, OracleSpec& o);

/// `expect:` (load_expect.cpp); marks `e` present. @throws InputError
void read_expect(YamlReader& r, const YAML::Node& m, ExpectSpec& e);

}  // namespace hcpsim
