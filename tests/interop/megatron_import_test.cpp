// Megatron command lines, launch scripts and Bridge configs → scenario YAML (core/megatron_import.hpp).
#include <fstream>
#include <sstream>

#include "catch_compat.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/interop/megatron_import.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/config/validation.hpp"

using namespace hcpsim;

namespace {

const std::string kFixtures = std::string(HCPSIM_SOURCE_DIR) + "/tests/fixtures/megatron/";

std::string read_fixture(const std::string& name) {
  std::ifstream in(kFixtures + name, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

MegatronConfig import_text(const std::string& script, const std::string& name = "launch.sh") {
  return interpret_megatron_args(split_megatron_command_line(script, name), name);
}

const MegatronArg& arg(const std::vector<MegatronArg>& args, const std::string& name) {
  for (const auto& a : args)
    if (a.name == name) return a;
  FAIL("no argument " << name);
  return args.front();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("import: shell variables, defaults, arithmetic, arrays and continuations resolve", "[import]") {
  const std::string script =
      "#!/bin/bash\n"                                    // 1
      "GPUS_PER_NODE=8\n"                                // 2
      "export NNODES=${NNODES:-2}\n"                     // 3
      "CP=4; A=2\n"                                      // 4
      "P=$((CP / A))\n"                                  // 5
      "ARGS=(\n"                                         // 6
      "  --num-layers 16   # a comment\n"                // 7
      "  --seq-length \"8192\"\n"                        // 8
      ")\n"                                              // 9
      "CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun --nproc-per-node=$GPUS_PER_NODE --nnodes ${NNODES} \\\n"  // 10
      "  pretrain_gpt.py ${ARGS[@]} \\\n"                // 11
      "  --context-parallel-size $CP --hierarchical-context-parallel-sizes $A $P \\\n"  // 12
      "  --num-attention-heads 32 --hidden-size 2048 2>&1 | tee log.txt\n";             // 13
  const auto args = split_megatron_command_line(script, "launch.sh");
  REQUIRE(arg(args, "nproc_per_node").values == std::vector<std::string>{"8"});
  REQUIRE(arg(args, "nproc_per_node").from_launcher);
  REQUIRE(arg(args, "nnodes").values == std::vector<std::string>{"2"});
  REQUIRE(arg(args, "num_layers").values == std::vector<std::string>{"16"});
  REQUIRE(arg(args, "num_layers").line == 7);  // array elements keep the line that wrote them
  REQUIRE(arg(args, "seq_length").values == std::vector<std::string>{"8192"});
  REQUIRE(arg(args, "hierarchical_context_parallel_sizes").values == std::vector<std::string>{"2", "2"});
  REQUIRE(arg(args, "hierarchical_context_parallel_sizes").line == 12);
  REQUIRE(arg(args, "hierarchical_context_parallel_sizes").column == 31);
  REQUIRE(arg(args, "num_attention_heads").values == std::vector<std::string>{"32"});  // `2>&1 | tee` dropped
  REQUIRE_FALSE(arg(args, "num_attention_heads").from_launcher);

  const auto c = interpret_megatron_args(args, "launch.sh");
  REQUIRE(*c.world_size == 16);
  REQUIRE(*c.data_parallel_size() == 4);  // 16 / (TP 1 * CP 4 * PP 1)
  REQUIRE(*c.kv_channels == 64);          // Megatron: hidden_size / num_attention_heads = 2048 / 32
  REQUIRE(*c.num_query_groups == 32);     // no --group-query-attention: MHA
  REQUIRE(*c.ffn_hidden_size == 8192);    // 4 * hidden_size
  REQUIRE(c.params_dtype == "fp32");      // neither --bf16 nor --fp16
}

TEST_CASE("import: a quoted array expansion \"${ARGS[@]}\" gives one argument per element", "[import]") {
  // The usual way to pass a bash array (quoted, so that no element is split); it was read as one word, and the
  // whole array landed in "ignored" with CP switched off.
  const std::string script =
      "P=(--context-parallel-size 4 --cp-comm-type a2a+p2p\n"           // 1
      "   --hierarchical-context-parallel-sizes 2 2 --seq-length \"8 192\")\n"  // 2
      "torchrun --nproc_per_node 8 pretrain_gpt.py \"${P[@]}\" --num-layers 2\n";  // 3
  const auto args = split_megatron_command_line(script, "launch.sh");
  REQUIRE(arg(args, "context_parallel_size").values == std::vector<std::string>{"4"});
  REQUIRE(arg(args, "context_parallel_size").line == 1);
  REQUIRE(arg(args, "cp_comm_type").values == std::vector<std::string>{"a2a+p2p"});
  REQUIRE(arg(args, "hierarchical_context_parallel_sizes").values == std::vector<std::string>{"2", "2"});
  REQUIRE(arg(args, "hierarchical_context_parallel_sizes").line == 2);
  REQUIRE(arg(args, "seq_length").values == std::vector<std::string>{"8 192"});  // an element keeps its blank
  REQUIRE(arg(args, "num_layers").values == std::vector<std::string>{"2"});
  // A quoted plain variable stays one word, blanks and all.
  const auto one = split_megatron_command_line("X='--num-layers 4'\npretrain_gpt.py \"$X\"\n", "launch.sh");
  REQUIRE(std::none_of(one.begin(), one.end(), [](const MegatronArg& a) { return a.name == "num_layers"; }));
}

TEST_CASE("import: the fixture launch script round-trips to the hand-written scenario", "[import]") {
  std::vector<std::string> unresolved;
  const auto args = split_megatron_command_line(read_fixture("llama3_8b_128k_launch.sh"),
                                                "llama3_8b_128k_launch.sh", &unresolved);
  const auto cfg = interpret_megatron_args(args, "llama3_8b_128k_launch.sh");
  // MASTER_ADDR=$(hostname) is reported, and only feeds an ignored launcher option.
  REQUIRE(unresolved.size() == 1);
  REQUIRE(unresolved[0] == "llama3_8b_128k_launch.sh:11: cannot resolve command substitution '$(hostname)' (hcpsim "
                          "does not run commands)");
  const std::string yaml = scenario_yaml_of(cfg, ScenarioWriteOptions{});
  const Scenario got = load_scenario_text(yaml, "imported.yaml");
  const Scenario want = load_scenario(kFixtures + "llama3_8b_128k_expected.yaml");
  const auto got_report = validate_scenario(got, ValidationScope::placement);
  const auto want_report = validate_scenario(want, ValidationScope::placement);
  REQUIRE(got_report.data_parallel_size == 2);
  REQUIRE(got_report.data_parallel_size == want_report.data_parallel_size);

  const CpLayout lg = cp_layout_for(got, CpCommType::a2a_p2p);
  const CpLayout lw = cp_layout_for(want, CpCommType::a2a_p2p);
  REQUIRE(lg.a2a_size() == 8);
  REQUIRE(lg.p2p_size() == 2);
  REQUIRE(lg.a2a_size() == lw.a2a_size());
  REQUIRE(lg.p2p_size() == lw.p2p_size());
  REQUIRE(lg.chunk_size() == lw.chunk_size());

  REQUIRE(got.name == want.name);
  REQUIRE(got.model.num_attention_heads == want.model.num_attention_heads);
  REQUIRE(got.model.num_query_groups == want.model.num_query_groups);
  REQUIRE(got.model.kv_channels == want.model.kv_channels);
  REQUIRE(got.model.seq_length == want.model.seq_length);
  REQUIRE(got.model.micro_batch_size == want.model.micro_batch_size);
  REQUIRE(got.model.num_layers == want.model.num_layers);
  REQUIRE(got.model.hidden_size == want.model.hidden_size);
  REQUIRE(got.model.ffn_hidden_size == want.model.ffn_hidden_size);
  REQUIRE(got.model.global_batch_size == want.model.global_batch_size);
  REQUIRE(got.model.vocab_size == want.model.vocab_size);  // both absent: the tokenizer decides
  REQUIRE(got.model.gated_linear_unit == want.model.gated_linear_unit);
  REQUIRE(got.model.untie_embeddings_and_output_weights == want.model.untie_embeddings_and_output_weights);
  REQUIRE(got.model.params_dtype == want.model.params_dtype);
  REQUIRE(got.parallel.tensor_model_parallel_size == want.parallel.tensor_model_parallel_size);
  REQUIRE(got.parallel.pipeline_model_parallel_size == want.parallel.pipeline_model_parallel_size);
  REQUIRE(got.parallel.context_parallel_size == want.parallel.context_parallel_size);
  REQUIRE(got.parallel.data_parallel_size == want.parallel.data_parallel_size);
  REQUIRE(got.parallel.cp_comm_type == want.parallel.cp_comm_type);
  REQUIRE(got.parallel.hierarchical_context_parallel_sizes == want.parallel.hierarchical_context_parallel_sizes);
  REQUIRE(got.parallel.sequence_parallel == want.parallel.sequence_parallel);
  REQUIRE(got.parallel.use_distributed_optimizer == want.parallel.use_distributed_optimizer);
  REQUIRE(got.training.recompute_granularity == want.training.recompute_granularity);
  REQUIRE(got.training.fp8 == want.training.fp8);
  REQUIRE(got.cluster.preset == want.cluster.preset);
  REQUIRE(got.cluster.nodes == want.cluster.nodes);
  REQUIRE(got.cluster.gpus_per_node == want.cluster.gpus_per_node);
}

TEST_CASE("import: unmodelled flags are listed in input order, never written", "[import]") {
  const auto cfg = interpret_megatron_args(
      split_megatron_command_line(read_fixture("llama3_8b_128k_launch.sh"), "launch.sh"), "launch.sh");
  const std::vector<std::string> first{"--node_rank 0", "--master_addr $(hostname)", "--master_port 6000",
                                       "--max-position-embeddings 131072", "--position-embedding-type rope",
                                       "--rotary-base 500000"};
  REQUIRE(cfg.ignored.size() >= first.size());
  REQUIRE(std::vector<std::string>(cfg.ignored.begin(), cfg.ignored.begin() + 6) == first);
  REQUIRE(cfg.ignored.back() == "--load /checkpoints/llama3_8b_128k");
  const std::string yaml = scenario_yaml_of(cfg, ScenarioWriteOptions{});
  REQUIRE(yaml.find("rotary") == std::string::npos);
  REQUIRE(yaml.find("master") == std::string::npos);
  // The tokenizer decides the vocabulary: a note, and a comment instead of a value.
  REQUIRE(yaml.find("  # vocab_size: not set; Megatron takes it from the tokenizer\n") != std::string::npos);
  bool noted = false;
  for (const auto& n : cfg.notes) noted = noted || n.find("vocab_size not set") != std::string::npos;
  REQUIRE(noted);
  // Same input, same bytes.
  REQUIRE(scenario_yaml_of(cfg, ScenarioWriteOptions{}) == yaml);
}

TEST_CASE("import: Megatron's derived values (SwiGLU ffn, virtual pipeline, recompute, fp8, per-layer types)",
          "[import]") {
  const auto c = import_text(
      "python pretrain_gpt.py --num-layers 8 --hidden-size 4096 --num-attention-heads 32 --swiglu "
      "--seq-length 4096 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
      "--recompute-activations --fp8-format hybrid --fp16 --cp-comm-type p2p p2p a2a a2a p2p p2p a2a allgather\n");
  REQUIRE(*c.ffn_hidden_size == 10880);  // int(4*4096*2/3 / 64) * 64 = int(170.67) * 64
  REQUIRE(*c.virtual_pipeline_model_parallel_size == 2);  // (8 layers / PP 2) / 2 per stage
  REQUIRE(c.recompute_granularity == "selective");
  REQUIRE(c.fp8);
  REQUIRE(c.params_dtype == "fp16");
  REQUIRE(c.cp_comm_type ==
          std::vector<std::string>{"p2p", "p2p", "a2a", "a2a", "p2p", "p2p", "a2a", "all_gather"});
  REQUIRE_FALSE(c.world_size.has_value());  // no launcher: world unknown
  const std::string yaml = scenario_yaml_of(c, ScenarioWriteOptions{});
  REQUIRE(yaml.find("  cp_comm_type: [p2p, p2p, a2a, a2a, p2p, p2p, a2a, all_gather]") != std::string::npos);
  REQUIRE(yaml.find("  virtual_pipeline_model_parallel_size: 2") != std::string::npos);
  REQUIRE(yaml.find("  data_parallel_size: 1") != std::string::npos);
  REQUIRE(yaml.find("  fp8: true") != std::string::npos);
}

TEST_CASE("import: Llama3.1-405B's uneven pipeline split, from Megatron flags and from a Bridge config", "[import]") {
  // (126 + embedding + loss) / PP 8 / 2 layers per virtual stage = 8 virtual stages.
  const auto c = import_text(
      "python pretrain_gpt.py --num-layers 126 --hidden-size 16384 --num-attention-heads 128 --seq-length 8192 "
      "--pipeline-model-parallel-size 8 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
      "--num-layers-per-virtual-pipeline-stage 2\n");
  REQUIRE(c.account_for_embedding_in_pipeline_split);
  REQUIRE(c.account_for_loss_in_pipeline_split);
  REQUIRE(*c.virtual_pipeline_model_parallel_size == 8);
  const std::string yaml = scenario_yaml_of(c, ScenarioWriteOptions{});
  REQUIRE(yaml.find("  account_for_embedding_in_pipeline_split: true") != std::string::npos);
  REQUIRE(yaml.find("  account_for_loss_in_pipeline_split: true") != std::string::npos);
  const auto first_last = import_text(
      "python pretrain_gpt.py --num-layers 126 --hidden-size 16384 --num-attention-heads 128 --seq-length 8192 "
      "--pipeline-model-parallel-size 8 --decoder-first-pipeline-num-layers 15 --decoder-last-pipeline-num-layers 15 "
      "--tensor-model-parallel-size 8 --sequence-parallel --tp-comm-overlap\n");
  REQUIRE(*first_last.decoder_first_pipeline_num_layers == 15);
  REQUIRE(first_last.tp_comm_overlap);
  REQUIRE(scenario_yaml_of(first_last, ScenarioWriteOptions{}).find("  tp_comm_overlap: true") != std::string::npos);
  REQUIRE(scenario_yaml_of(first_last, ScenarioWriteOptions{}).find("  decoder_last_pipeline_num_layers: 15") !=
          std::string::npos);
  const auto b = parse_bridge_config(
      "model:\n  num_layers: 126\n  pipeline_model_parallel_size: 8\n  num_layers_in_first_pipeline_stage: 15\n"
      "  account_for_loss_in_pipeline_split: true\ncomm_overlap:\n  tp_comm_overlap: true\n",
      "b.yaml");
  REQUIRE(b.tp_comm_overlap);
  REQUIRE(*b.decoder_first_pipeline_num_layers == 15);
  REQUIRE(b.account_for_loss_in_pipeline_split);
}

TEST_CASE("import: a batch script's #SBATCH counts stand for the Slurm variables the job sets", "[import]") {
  // "--nnodes $SLURM_NNODES" in an sbatch script needed --nodes although the script's own #SBATCH line gives it.
  const std::string script =
      "#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH -N 4\n#SBATCH --ntasks-per-node=1 --gres=gpu:h100:8  # all\n"
      "#SBATCH --nodes=2-4\nsrun torchrun --nnodes $SLURM_NNODES --nproc_per_node $SLURM_GPUS_ON_NODE pretrain_gpt.py "
      "\\\n  --num-attention-heads 32 --seq-length 8192 --kv-channels 64\n";
  const auto settings = sbatch_settings(script);
  REQUIRE(settings.size() == 3);  // the range "2-4" is no count
  CHECK(settings[0].variable == "SLURM_NNODES");
  CHECK(settings[0].value == "4");
  CHECK(settings[0].line == 3);
  CHECK(settings[0].directive == "#SBATCH -N 4");
  CHECK(settings[1].variable == "SLURM_NTASKS_PER_NODE");
  CHECK(settings[2].variable == "SLURM_GPUS_ON_NODE");
  CHECK(settings[2].value == "8");
  std::vector<std::string> notes;
  const MegatronConfig c = interpret_megatron_args(split_megatron_command_line(script, "job.sh", &notes), "job.sh");
  CHECK(c.nnodes == 4);
  CHECK(c.nproc_per_node == 8);
  CHECK(c.world_size == 32);
  CHECK(std::find(notes.begin(), notes.end(), "$SLURM_NNODES = 4, from #SBATCH -N 4 at line 3") != notes.end());
  CHECK(notes.size() == 2);  // SLURM_NTASKS_PER_NODE is not used by the script: no note
  // A gres list counts its gpu entry, not the last one.
  const auto gres = sbatch_settings("#SBATCH --gres=nvme:1,gpu:a100:4,tmp:2\n");
  REQUIRE(gres.size() == 1);
  CHECK(gres[0].value == "4");
}

TEST_CASE("import: an MPI launcher's counts give the world, nodes and processes per node", "[import]") {
  // mpirun -np / srun -n started the script without torchrun: "world size unknown, DP 1 assumed".
  const std::string model = " python pretrain_gpt.py --num-attention-heads 32 --seq-length 8192 --kv-channels 64\n";
  for (const auto& [launch, nodes, per_node] :
       {std::tuple{"mpirun -np 16 -npernode 8 -x NCCL_DEBUG=INFO", 2, 8}, std::tuple{"mpiexec -n 32 -ppn 8", 4, 8},
        std::tuple{"srun -N 2 --ntasks-per-node=4", 2, 4}, std::tuple{"srun --ntasks=16 --nodes=4", 4, 4}}) {
    INFO(launch);
    const MegatronConfig c = import_text(std::string(launch) + model);
    CHECK(c.nnodes == nodes);
    CHECK(c.nproc_per_node == per_node);
    CHECK(c.world_size == nodes * per_node);
  }
  const MegatronConfig world_only = import_text("mpirun -np 16" + model);
  CHECK(!world_only.nnodes);
  CHECK(world_only.world_size == 16);  // the nodes then follow from the preset's GPUs per node
  CHECK(error_of([&] { import_text("mpirun -np 12 -npernode 8" + model); }) ==
        "launch.sh:1:8: -np: 12 processes do not fill nodes of 8; fix: give a multiple of -npernode 8");
  // An srun without counts of its own runs on the job's allocation: the #SBATCH lines give them.
  const MegatronConfig alloc =
      import_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\nsrun" + model);
  CHECK(alloc.nnodes == 2);
  CHECK(alloc.nproc_per_node == 8);
  CHECK(alloc.lines.at("nnodes") == 2);
  CHECK(import_text("#SBATCH --nodes=2\nsrun -N 4 --ntasks-per-node=2" + model).nnodes == 4);  // srun's own win
}

TEST_CASE("import: what cannot be resolved or derived is an InputError naming file, line, flag and fix", "[import]") {
  // --nnodes and --nproc_per_node from the job's environment are kept as written (the importer's --nodes and
  // --gpus-per-node give the counts, or it fails naming the flag: tests/apps/import_cli_test.cpp).
  const MegatronConfig slurm = import_text("torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 pretrain_gpt.py \\\n"
                                           "  --num-attention-heads 32 --seq-length 8192 --kv-channels 64\n");
  REQUIRE(slurm.nnodes_unresolved == "--nnodes $SLURM_NNODES");
  REQUIRE(!slurm.nnodes);
  REQUIRE(!slurm.world_size);
  REQUIRE(slurm.lines.at("nnodes") == 1);
  const MegatronConfig gpus = import_text("torchrun --nnodes 2 --nproc_per_node $GPUS pretrain_gpt.py \\\n"
                                          "  --num-attention-heads 32 --seq-length 8192 --kv-channels 64\n");
  REQUIRE(gpus.nproc_per_node_unresolved == "--nproc_per_node $GPUS");
  REQUIRE(!gpus.nproc_per_node);
  REQUIRE(!gpus.world_size);
  REQUIRE(*gpus.nnodes == 2);
  auto msg = error_of([] { import_text("torchrun --nproc_per_node 8 pretrain_gpt.py\n  --seq-length 8k\n"); });
  // A missing backslash ends the command at the new line: pretrain_gpt.py gets no options, so nothing is found.
  REQUIRE(msg.find("launch.sh: no training command found") == 0);
  msg = error_of([] { import_text("python pretrain_gpt.py --num-layers 8 --seq-length 8k\n"); });
  REQUIRE(msg == "launch.sh:1:39: --seq-length: expected an integer, got '8k'; fix: write an integer, e.g. "
                 "'--seq-length 8'");
  msg = error_of([] { import_text("echo hello\nls -l\n"); });
  REQUIRE(msg.find("launch.sh: no training command found") == 0);
  msg = error_of([] {
    scenario_yaml_of(import_text("python pretrain_gpt.py --num-layers 8 --hidden-size 64\n"), ScenarioWriteOptions{});
  });
  REQUIRE(msg.find("model.num_attention_heads: not set (--num-attention-heads / model.num_attention_heads is "
                   "missing)") != std::string::npos);
  msg = error_of([] {
    (void)import_text("torchrun --nnodes 1 --nproc_per_node 6 pretrain_gpt.py --context-parallel-size 4\n")
        .data_parallel_size();
  });
  REQUIRE(msg == "launch.sh:1:10: parallel.data_parallel_size: world size 6 is not divisible by TP*CP*PP = 1*4*1 = 4; "
                 "fix: make nnodes*nproc_per_node a multiple of 4, or change the parallel sizes");
}

TEST_CASE("import: command lines Megatron itself refuses are refused at their flag", "[import]") {
  // Each was imported with exit 0 (a negative CP then failed on the world size "multiple of -4").
  CHECK(error_of([] { import_text("python pretrain_gpt.py --bf16 --fp16\n"); }) ==
        "launch.sh:1:31: --fp16: given with --bf16: Megatron's validate_args asserts that at most one of them is set; "
        "fix: give one of --bf16 and --fp16");
  CHECK(error_of([] { import_text("python pretrain_gpt.py --transformer-impl local --context-parallel-size 2\n"); })
            .rfind("launch.sh:1:24: --transformer-impl: local attention (Megatron's DotProductAttention) has no "
                   "context parallelism",
                   0) == 0);
  CHECK(import_text("python pretrain_gpt.py --transformer-impl local\n").context_parallel_size == 1);  // no CP: read
  CHECK(error_of([] { import_text("python pretrain_gpt.py --context-parallel-size -4\n"); }) ==
        "launch.sh:1:24: --context-parallel-size: must be at least 1, got -4; fix: give a positive size, e.g. "
        "'--context-parallel-size 2'");
  CHECK(error_of([] { import_text("python pretrain_gpt.py --hierarchical-context-parallel-sizes 2,2\n"); })
            .find("e.g. '--hierarchical-context-parallel-sizes 2 2'") != std::string::npos);
}

TEST_CASE("import: a log's arguments block reads like the command line (Python spellings)", "[import]") {
  std::vector<MegatronArg> block;
  int line = 10;
  auto add = [&](const std::string& name, const std::string& value) {
    block.push_back({name, name, {value}, line++, 3, false});
  };
  add("cp_comm_type", "['p2p', 'a2a+p2p']");
  add("context_parallel_size", "4");
  add("fp8", "None");
  add("group_query_attention", "False");
  add("hidden_size", "1024");
  add("hierarchical_context_parallel_sizes", "[2, 2]");
  add("num_attention_heads", "16");
  add("num_layers", "2");
  add("num_query_groups", "1");
  add("recompute_granularity", "None");
  add("seq_length", "4096");
  add("sequence_parallel", "False");
  add("world_size", "8");
  add("lr", "0.0003");
  const auto c = interpret_megatron_args(block, "train.log", true);
  REQUIRE(c.cp_comm_type == std::vector<std::string>{"p2p", "a2a+p2p"});
  REQUIRE(*c.hierarchical_context_parallel_sizes == std::vector<int64_t>{2, 2});
  REQUIRE(*c.num_query_groups == 16);  // group_query_attention False: MHA, whatever num_query_groups says
  REQUIRE_FALSE(c.fp8);
  REQUIRE(c.recompute_granularity == "none");
  REQUIRE(*c.world_size == 8);
  REQUIRE(*c.data_parallel_size() == 2);
  REQUIRE(c.ignored.empty());  // a log prints every argument: none is listed as ignored
  REQUIRE(c.loc_of_scenario_key("parallel.hierarchical_context_parallel_sizes").line == 15);
  REQUIRE(c.loc_of_scenario_key("parallel.cp_comm_type").line == 10);
}

TEST_CASE("import: the Megatron-Bridge fixture config", "[import]") {
  const auto c = parse_bridge_config(read_fixture("llama3_8b_128k_bridge.yaml"), "bridge.yaml");
  REQUIRE(*c.num_attention_heads == 32);
  REQUIRE(*c.num_query_groups == 8);
  REQUIRE(*c.vocab_size == 128256);
  REQUIRE(c.tensor_model_parallel_size == 2);
  REQUIRE(c.context_parallel_size == 8);
  REQUIRE(*c.hierarchical_context_parallel_sizes == std::vector<int64_t>{4, 2});
  REQUIRE(c.sequence_parallel);
  REQUIRE(c.gated_linear_unit);
  REQUIRE(c.untie_embeddings_and_output_weights);  // share_embeddings_and_output_weights: false
  REQUIRE(c.use_distributed_optimizer);
  REQUIRE_FALSE(c.use_decentralized_pg);
  REQUIRE(c.recompute_granularity == "full");
  REQUIRE(c.fp8);
  REQUIRE(c.params_dtype == "bf16");
  REQUIRE(c.micro_batch_size == 1);
  REQUIRE(*c.global_batch_size == 32);
  REQUIRE_FALSE(c.virtual_pipeline_model_parallel_size.has_value());  // null
  REQUIRE(c.ignored.front() == "model.position_embedding_type: rope");
  REQUIRE(std::find(c.ignored.begin(), c.ignored.end(), "optimizer.lr: 0.0003") != c.ignored.end());
  REQUIRE(c.loc_of_scenario_key("parallel.hierarchical_context_parallel_sizes").line == 23);

  MegatronConfig on_two_nodes = c;
  on_two_nodes.nnodes = 2;
  on_two_nodes.nproc_per_node = 8;
  on_two_nodes.world_size = 16;
  const Scenario s = load_scenario_text(scenario_yaml_of(on_two_nodes, ScenarioWriteOptions{}), "bridge.yaml");
  REQUIRE(validate_scenario(s, ValidationScope::placement).data_parallel_size == 1);
  REQUIRE(cp_layout_for(s, CpCommType::a2a_p2p).a2a_size() == 4);
  // Comments name the config key as the Bridge file writes it (they named Megatron's argument: "swiglu" for
  // gated_linear_unit, "untie_embeddings_and_output_weights" at the line of share_embeddings_and_output_weights).
  const std::string written = scenario_yaml_of(on_two_nodes, ScenarioWriteOptions{});
  CHECK(written.find("Comments name the config key and line behind each value.") != std::string::npos);
  CHECK(written.find("# model.gated_linear_unit, line 13\n") != std::string::npos);
  CHECK(written.find("# model.share_embeddings_and_output_weights, line 14\n") != std::string::npos);
  CHECK(written.find("# mixed_precision, line 45\n") != std::string::npos);
  CHECK(written.find("swiglu") == std::string::npos);
  // The fixture leaves ddp.grad_reduce_in_fp32 out: Megatron's default (fp32) and no key written.
  REQUIRE_FALSE(c.grad_reduce_in_fp32.has_value());
  REQUIRE(s.parallel.grad_reduce_in_fp32);
  REQUIRE(scenario_yaml_of(on_two_nodes, ScenarioWriteOptions{}).find("grad_reduce_in_fp32") == std::string::npos);
  // A recipe that reduces gradients in bf16 (as the performance recipes do) carries that into the scenario.
  const std::string text = read_fixture("llama3_8b_128k_bridge.yaml");
  const auto ddp = text.find("\nddp:\n");
  REQUIRE(ddp != std::string::npos);
  auto bf16 = parse_bridge_config(text.substr(0, ddp) + "\nddp:\n  grad_reduce_in_fp32: false\n" + text.substr(ddp + 6),
                                  "bridge.yaml");
  REQUIRE(bf16.grad_reduce_in_fp32 == std::optional<bool>(false));
  bf16.nnodes = 2;
  bf16.nproc_per_node = 8;
  bf16.world_size = 16;
  const Scenario sb = load_scenario_text(scenario_yaml_of(bf16, ScenarioWriteOptions{}), "bridge.yaml");
  REQUIRE_FALSE(sb.parallel.grad_reduce_in_fp32);

  const auto bad = error_of([] { parse_bridge_config("model:\n  num_attention_heads: many\n", "b.yaml"); });
  REQUIRE(bad == "b.yaml:2:24: model.num_attention_heads: expected an integer, got 'many'; fix: write a whole number");
  // Bridge's ConfigContainer.validate asserts model.seq_length == the dataset's; it was listed as ignored.
  CHECK(error_of([] {
          parse_bridge_config("model:\n  seq_length: 65536\ndataset:\n  sequence_length: 32768\n", "b.yaml");
        }) == "b.yaml:4:20: dataset.sequence_length: 32768 differs from model.seq_length 65536: Megatron-Bridge's "
              "ConfigContainer.validate asserts that they match; fix: set both to the sequence length the run trains "
              "with");
  CHECK(parse_bridge_config("model:\n  seq_length: 8192\ndataset:\n  seq_length: 8192\n", "b.yaml").seq_length ==
        8192);
  // Bridge-style overrides change the config before it is read, and a value they set is located at them.
  const std::string base = "model:\n  context_parallel_size: 2\n  seq_length: 8192\n";
  const auto over = parse_bridge_config(base, "b.yaml",
                                        {"model.context_parallel_size=8", "model.cp_comm_type=a2a+p2p",
                                         "model.hierarchical_context_parallel_sizes=[4,2]", "train.micro_batch_size=2"});
  CHECK(over.context_parallel_size == 8);
  CHECK(over.hierarchical_context_parallel_sizes == std::optional<std::vector<int64_t>>({4, 2}));
  CHECK(over.micro_batch_size == 2);
  CHECK(over.source_keys.at("context_parallel_size") == "override 'model.context_parallel_size=8'");
  CHECK(over.source_keys.at("seq_length") == "model.seq_length");
  CHECK(parse_bridge_config(base, "b.yaml", {"model.seq_length=1", "model.seq_length=4096"}).seq_length == 4096);
  // Hydra's prefixes, as Bridge's scripts take them: + and ++ set the key ("++model" became a section of its own,
  // ignored), ~ deletes it (the CP size then takes its default, 1).
  CHECK(parse_bridge_config(base, "b.yaml", {"++model.context_parallel_size=4"}).context_parallel_size == 4);
  CHECK(parse_bridge_config(base, "b.yaml", {"+model.context_parallel_size=4"}).context_parallel_size == 4);
  CHECK(parse_bridge_config(base, "b.yaml", {"~model.context_parallel_size"}).context_parallel_size == 1);
  CHECK(error_of([&] { parse_bridge_config(base, "b.yaml", {"model.context_parallel_size=four"}); }) ==
        "override 'model.context_parallel_size=four': model.context_parallel_size: expected an integer, got 'four'; "
        "fix: write a whole number");
  for (const auto& [malformed, message] :
       {std::pair{"seq_length", "an override must look like section.key=value"},
        std::pair{"model..seq_length=1", "empty component in key path"},
        std::pair{"model.seq_length.x=1", "'seq_length' is not a section"},
        std::pair{"model.seq_length=[1", "value is not valid YAML"}}) {
    INFO(malformed);
    CHECK(error_of([&] { parse_bridge_config(base, "b.yaml", {malformed}); }).find(message) != std::string::npos);
  }
  const auto not_bridge = error_of([] { parse_bridge_config("train:\n  micro_batch_size: 1\n", "b.yaml"); });
  REQUIRE(not_bridge.find("not a Megatron-Bridge config: no 'model:' section") != std::string::npos);
}

TEST_CASE("import: --fp8-recipe and --fp8-param-gather, and the Bridge FP8 recipes' settings", "[import][fp8]") {
  const auto c = import_text(
      "python pretrain_gpt.py --num-layers 8 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
      "--bf16 --fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather --use-distributed-optimizer\n");
  REQUIRE(c.fp8_recipe == std::optional<std::string>("tensorwise"));
  REQUIRE(c.fp8_param_gather);
  const std::string yaml = scenario_yaml_of(c, ScenarioWriteOptions{});
  REQUIRE(yaml.find("  fp8_recipe: tensorwise ") != std::string::npos);
  REQUIRE(yaml.find("  fp8_param_gather: true ") != std::string::npos);
  const Scenario s = load_scenario_text(yaml, "imported.yaml");
  REQUIRE(s.training.fp8_recipe == Fp8Recipe::tensorwise);
  REQUIRE(s.training.fp8_param_gather);
  // Megatron's default recipe is delayed: no key written.
  const auto plain = import_text("python pretrain_gpt.py --num-layers 8 --hidden-size 4096 --num-attention-heads 32 "
                                 "--seq-length 4096 --fp8-format hybrid\n");
  REQUIRE_FALSE(plain.fp8_recipe.has_value());
  REQUIRE(scenario_yaml_of(plain, ScenarioWriteOptions{}).find("fp8_recipe") == std::string::npos);
  const auto mx = error_of([] {
    import_text("python pretrain_gpt.py --num-layers 8 --hidden-size 4096 --num-attention-heads 32 "
                "--seq-length 4096 --fp8-format e4m3 --fp8-recipe mxfp8\n");
  });
  REQUIRE(mx.find("--fp8-recipe") != std::string::npos);
  REQUIRE(mx.find("the FP8 recipe 'mxfp8' is not modelled") != std::string::npos);
  // Bridge: a recipe name sets what its recipe sets (mixed_precision.py: both FP8 recipes gather FP8 parameters).
  const auto cs = parse_bridge_config("model:\n  num_layers: 8\nmixed_precision: bf16_with_fp8_current_scaling_mixed\n",
                                      "b.yaml");
  REQUIRE(cs.fp8);
  REQUIRE(cs.fp8_recipe == std::optional<std::string>("tensorwise"));
  REQUIRE(cs.fp8_param_gather);
  const auto map = parse_bridge_config(
      "model:\n  num_layers: 8\nmixed_precision:\n  fp8: hybrid\n  fp8_recipe: delayed\n  fp8_param_gather: false\n",
      "b.yaml");
  REQUIRE(map.fp8_recipe == std::optional<std::string>("delayed"));
  REQUIRE_FALSE(map.fp8_param_gather);
  const auto bad = error_of(
      [] { parse_bridge_config("model:\n  num_layers: 8\nmixed_precision:\n  fp8_recipe: mxfp8\n", "b.yaml"); });
  REQUIRE(bad.find("mixed_precision.fp8_recipe") != std::string::npos);
}

TEST_CASE("import: --attention-backend and Bridge model.attention_backend become model.attention_backend",
          "[import]") {
  const std::string line = "python pretrain_gpt.py --num-attention-heads 32 --seq-length 8192 --kv-channels 128 ";
  for (const std::string b : {"flash", "fused", "auto"}) {
    const MegatronConfig c = import_text(line + "--attention-backend " + b + "\n");
    REQUIRE(c.attention_backend == b);
    REQUIRE(scenario_yaml_of(c, ScenarioWriteOptions{}).find("  attention_backend: " + b) != std::string::npos);
    REQUIRE(std::find_if(c.ignored.begin(), c.ignored.end(), [](const std::string& i) {
              return i.find("attention-backend") != std::string::npos;
            }) == c.ignored.end());
  }
  REQUIRE(!import_text(line + "\n").attention_backend);
  // unfused and local attention have no context parallelism: refused at the flag, not dropped.
  const std::string msg = error_of([&] { import_text(line + "--attention-backend unfused\n"); });
  REQUIRE(msg.find("launch.sh:1:85: --attention-backend: attention backend 'unfused' is not modelled") == 0);
  REQUIRE(msg.find("fix: use --attention-backend auto, flash or fused") != std::string::npos);
  const auto bridge = parse_bridge_config("model:\n  attention_backend: AttnBackend.flash\n", "b.yaml");
  REQUIRE(bridge.attention_backend == "flash");
  REQUIRE(error_of([] { parse_bridge_config("model:\n  attention_backend: local\n", "b.yaml"); })
              .find("b.yaml:2:22: model.attention_backend: attention backend 'local' is not modelled") == 0);
}

TEST_CASE("import: the gradient-reduction dtype follows Megatron-LM's bf16 / fp16 rules", "[import]") {
  const std::string line = "python pretrain_gpt.py --num-attention-heads 32 --seq-length 8192 --kv-channels 128 ";
  // arguments.py: under --bf16, --grad-reduce-in-bf16 turns accumulate_allreduce_grads_in_fp32 off, else it is on.
  const MegatronConfig bf16 = import_text(line + "--bf16 --grad-reduce-in-bf16\n");
  REQUIRE(bf16.grad_reduce_in_fp32 == false);
  REQUIRE(scenario_yaml_of(bf16, ScenarioWriteOptions{}).find("  grad_reduce_in_fp32: false") != std::string::npos);
  REQUIRE(!import_text(line + "--bf16\n").grad_reduce_in_fp32);  // Megatron's default: no key written
  REQUIRE(import_text(line + "--fp16 --accumulate-allreduce-grads-in-fp32\n").grad_reduce_in_fp32 == true);
  // fp16 without the flag reduces in fp16 (the bf16 rule does not apply), with a note.
  const MegatronConfig fp16 = import_text(line + "--fp16\n");
  REQUIRE(fp16.grad_reduce_in_fp32 == false);
  REQUIRE(fp16.notes.back().find("Megatron reduces gradients in fp16") != std::string::npos);
}

TEST_CASE("import: a data-preprocessing command before the training line is not taken for it", "[import]") {
  std::vector<std::string> notes;
  const std::string script =
      "python tools/preprocess_data.py --input data.json --output-prefix data --workers 8\n"
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-attention-heads 32 --seq-length 8192 --kv-channels 128\n"
      "python tools/checkpoint/convert.py --model-type GPT --load-dir ckpt\n";
  const MegatronConfig c =
      interpret_megatron_args(split_megatron_command_line(script, "launch.sh", &notes), "launch.sh");
  REQUIRE(c.num_attention_heads == 32);
  REQUIRE(c.nproc_per_node == 8);
  REQUIRE(notes == std::vector<std::string>{
                       "line 1: another preprocess_data.py command; the pretrain_gpt.py one at line 2 was imported (a "
                       "pretrain*.py script)",
                       "line 3: another convert.py command; the pretrain_gpt.py one at line 2 was imported (a "
                       "pretrain*.py script)"});
  // Without a pretrain*.py script, the line torchrun launches wins over an earlier plain python line.
  notes.clear();
  const MegatronConfig launched = interpret_megatron_args(
      split_megatron_command_line("python prep.py --input x --workers 4\n"
                                  "torchrun --nproc_per_node 8 train.py --num-attention-heads 16 --seq-length 4096\n",
                                  "launch.sh", &notes),
      "launch.sh");
  REQUIRE(launched.num_attention_heads == 16);
  REQUIRE(notes.size() == 1);
  REQUIRE(notes[0].find("(launched by torchrun)") != std::string::npos);
}

TEST_CASE("import: --encoder-seq-length stands for --seq-length, as Megatron's arguments.py sets it", "[import]") {
  const std::string line = "python pretrain_gpt.py --num-attention-heads 8 --hidden-size 1024 ";
  const MegatronConfig c = import_text(line + "--encoder-seq-length 65536\n");
  REQUIRE(c.seq_length == 65536);
  REQUIRE(scenario_yaml_of(c, ScenarioWriteOptions{}).find("seq_length: 65536                               # "
                                                           "encoder_seq_length, line 1") != std::string::npos);
  REQUIRE(error_of([&] { import_text(line + "--seq-length 8 --encoder-seq-length 65536\n"); }) ==
          "launch.sh:1:82: --encoder-seq-length: given with --seq-length: Megatron's arguments.py asserts "
          "encoder_seq_length is None then; fix: give only --seq-length");
}
