// Inputs found by the libFuzzer targets of tests/fuzz/ (docs/robustness.md, "Fuzzing") that crashed, hung or
// exhausted memory in the launch-script, Bridge-config and training-log readers. Each is now read, or refused with
// an InputError naming the file, line and key.
#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/interop/megatron_import.hpp"
#include "hcpsim/interop/megatron_log.hpp"

using namespace hcpsim;

namespace {

const std::string kCommand =
    "python pretrain_gpt.py --num-attention-heads 8 --hidden-size 1024 --seq-length 1024 --num-layers 2";
const std::string kBridgeModel =
    "model:\n  num_layers: 4\n  hidden_size: 1024\n  num_attention_heads: 8\n  seq_length: 8192\n";
const std::string kWorldLine = "using world size: 8, data-parallel size: 2, tensor-model-parallel size: 4\n";

/// The InputError text of `f`, or "" when it returns.
template <typename F>
std::string error_of(F f) {
  try {
    (void)f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("fuzz regressions: a separator inside an array assignment ends the array", "[import][shell][fuzz]") {
  // `;` inside `NAME=( ... )` ended every element without consuming anything: empty words until out of memory.
  const auto args = split_megatron_command_line("ARR=( --seq-length ; 2048 )\n" + kCommand + " ${ARR[@]}\n",
                                                "launch.sh");
  bool seq_from_array = false;
  for (const auto& a : args) seq_from_array = seq_from_array || (a.flag == "--seq-length" && a.values.empty());
  REQUIRE(seq_from_array);  // the array holds the one element before the `;`
  for (const char* sep : {"|", "&", "&&", ";;"})
    (void)split_megatron_command_line(std::string("ARR=( a ") + sep + " b )\n" + kCommand + "\n", "launch.sh");
}

TEST_CASE("fuzz regressions: an option spelt '--=value' has no name and is not modelled", "[import][shell][fuzz]") {
  // `--=5` made the option's name substr(npos): std::out_of_range, exit 4 (internal error).
  const auto args = split_megatron_command_line(kCommand + " --=5\n", "launch.sh");
  REQUIRE(args.back().flag == "--");
  REQUIRE(args.back().name.empty());
  const MegatronConfig c = interpret_megatron_args(args, "launch.sh");
  bool listed = false;
  for (const auto& i : c.ignored) listed = listed || contains(i, "--");
  REQUIRE(listed);
}

TEST_CASE("fuzz regressions: a Bridge config with a sequence or map as a key is an InputError",
          "[import][bridge][fuzz]") {
  // yaml-cpp's string conversion threw YAML::TypedBadConversion out of the reader (exit 4).
  const std::string e = error_of([&] { return parse_bridge_config(kBridgeModel + "? [a, b]\n: 1\n", "b.yaml"); });
  INFO(e);
  REQUIRE(contains(e, "b.yaml:6:3: a key must be a plain name, not a sequence"));
  const std::string in_section =
      error_of([&] { return parse_bridge_config(kBridgeModel + "  ? {a: 1}\n  : 2\n", "b.yaml"); });
  INFO(in_section);
  REQUIRE(contains(in_section, "b.yaml:6:5: model: a key must be a plain name, not a map"));
}

TEST_CASE("fuzz regressions: self-referring and exponential aliases in a Bridge config are InputErrors",
          "[import][bridge][fuzz]") {
  // An alias to its own map recursed in the ignored-keys listing until the stack overflowed (SIGSEGV).
  const std::string self = error_of([&] { return parse_bridge_config(kBridgeModel + "opt: &a {x: *a}\n", "b.yaml"); });
  INFO(self);
  REQUIRE(contains(self, "b.yaml:6:6: opt.x.x.x"));
  REQUIRE(contains(self, "nested more than 64 levels deep (an alias that refers to its own map?)"));
  // Maps of aliases to maps: 10^6 leaves from a few hundred bytes.
  std::string laughs = kBridgeModel + "l0: &l0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, j: 1}\n";
  for (int level = 1; level <= 6; ++level) {
    const std::string name = std::string("l") + std::to_string(level);
    const std::string prev = std::string("*l") + std::to_string(level - 1);
    laughs.append(name).append(": &").append(name).append(" {");
    for (char k = 'a'; k <= 'j'; ++k) laughs.append(k == 'a' ? "" : ", ").append(1, k).append(": ").append(prev);
    laughs += "}\n";
  }
  const std::string many = error_of([&] { return parse_bridge_config(laughs, "b.yaml"); });
  INFO(many);
  REQUIRE(contains(many, "more than 100000 keys that hcpsim does not model (aliases repeating a map?)"));
}

TEST_CASE("fuzz regressions: numbers beyond int64 in a training log are InputErrors naming the line",
          "[log][fuzz]") {
  // std::stoll threw std::out_of_range out of the parser (exit 4, "internal error: stoll").
  const std::string world = error_of(
      [] { return parse_megatron_log("using world size: 99999999999999999999, data-parallel size: 1\n", "t.log"); });
  INFO(world);
  REQUIRE(contains(world, "t.log:1: using world size: '99999999999999999999' is not a 64-bit integer"));
  const std::string iteration = error_of([] {
    return parse_megatron_log(
        kWorldLine + " iteration 99999999999999999999/ 5 | throughput per GPU (TFLOP/s/GPU): 5 |\n", "t.log");
  });
  INFO(iteration);
  REQUIRE(contains(iteration, "t.log:2: iteration: '99999999999999999999' is not a 64-bit integer"));
}

TEST_CASE("fuzz regressions: non-finite throughput is left out and an absurd batch size too", "[log][fuzz]") {
  // NaN reports were sorted (undefined behaviour) and could leave the below-model check without an evidence line;
  // a global batch size of 1e300 was converted to int64 (undefined behaviour). A non-finite value is no
  // measurement: the line's throughput is not reported (a NaN training run is check-log's NaN finding instead).
  for (const char* v : {"nan", "inf", "-inf"}) {
    INFO(v);
    const MegatronLog log = parse_megatron_log(
        kWorldLine + " iteration 1/ 5 | throughput per GPU (TFLOP/s/GPU): " + v + " |\n", "t.log");
    REQUIRE(log.throughput.empty());
  }
  const MegatronLog log = parse_megatron_log(
      kWorldLine + " iteration 1/ 5 | throughput per GPU (TFLOP/s/GPU): 5 | global batch size: 1e300 |\n", "t.log");
  REQUIRE(log.throughput.size() == 1);
  REQUIRE_FALSE(log.throughput[0].global_batch_size.has_value());
}

TEST_CASE("fuzz regressions: an argument line of 200,000 characters is read", "[log][fuzz]") {
  // std::regex recursed once per character of the line: a stack overflow (SIGSEGV) in check-log.
  const std::string args_begin = "------------------------ arguments ------------------------\n";
  const std::string args_end = "-------------------- end of arguments ---------------------\n";
  const MegatronLog dots = parse_megatron_log(
      kWorldLine + args_begin + "  num_layers " + std::string(200000, '.') + " 4\n" + args_end, "t.log");
  REQUIRE(dots.arguments.size() == 1);
  REQUIRE(dots.arguments[0].name == "num_layers");
  REQUIRE(dots.arguments[0].values == std::vector<std::string>{"4"});
  const MegatronLog value = parse_megatron_log(
      kWorldLine + args_begin + "  data_path ...... " + std::string(2000000, 'x') + "\n" + args_end, "t.log");
  REQUIRE(value.arguments.size() == 1);
  REQUIRE(value.arguments[0].values[0].size() == 2000000);
  REQUIRE(value.arguments[0].column == 3);
}
