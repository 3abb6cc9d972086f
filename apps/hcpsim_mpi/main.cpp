// hcpsim_mpi_verify: the GPU backend with one process per GPU (one CP rank each), launched by MPI across nodes:
//   mpirun -np <context_parallel_size> hcpsim_mpi_verify SCENARIO [overrides] [--dtype D] [--kernels auto|clear]
// Every process builds the same schedule and plan, generates the same inputs from oracle.seed, runs its own rank
// on GPU (local rank mod visible GPUs) in one NCCL communicator (unique id broadcast over MPI), and sends its
// output buffers to process 0, which gathers them, runs the fp64 reference and prints the verification table.
// A separate binary: the main `hcpsim` never links MPI. Exit codes as hcpsim: 0 pass, 1 fail, 2 bad input,
// 3 device error.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <fmt/core.h>
#include <nccl.h>

#include "../hcpsim/app_common.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/config/scenario_loader.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/config/validation.hpp"
#include "hcpsim/gpu/cuda_check.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/oracles/head_selection.hpp"
#include "hcpsim/oracles/verify.hpp"

namespace {

using namespace hcpsim;

using app::kExitBadInput;
using app::kExitDevice;
using app::kExitFailed;
using app::kExitOk;

struct Args {
  std::string scenario;
  std::vector<std::string> overrides;
  std::string dtype;
  std::string kernels = "auto";
};

int run(const Args& args, int world_rank, int world_size) {
  Scenario s = load_scenario(args.scenario, args.overrides);
  (void)validate_scenario(s, ValidationScope::attention);
  Dtype dtype = s.oracle.dtype;
  if (!args.dtype.empty()) {
    const auto d = parse_dtype(args.dtype);
    if (!d) throw InputError(SourceLoc{}, "--dtype", "unknown dtype '" + args.dtype + "'", "use fp32, bf16 or fp16");
    dtype = *d;
  }
  gpu::check_gpu_dtype(dtype);
  if (args.kernels != "auto" && args.kernels != "clear")
    throw InputError(SourceLoc{}, "--kernels", "unknown kernel choice '" + args.kernels + "'", "use auto or clear");
  const CpCommType type = s.parallel.distinct_cp_comm_types().front();  // the first of a per-layer list
  const CpLayout layout = cp_layout_for(s, type);
  if (layout.cp_size() != world_size)
    throw InputError(SourceLoc{}, "mpirun -np",
                     fmt::format("{} processes for context_parallel_size {}", world_size, layout.cp_size()),
                     fmt::format("launch with mpirun -np {} (one process per CP rank)", layout.cp_size()));
  // oracle.heads as in `hcpsim verify`: the same head subset, regenerated at the same global indices.
  const AttentionShape full = attention_shape(s);
  const HeadSelection sel = select_heads(full, layout.a2a_size(), s.oracle.heads);
  const Schedule schedule = build_schedule(type, layout, sel.shape);

  int devices = 0;
  HCPSIM_CUDA_CHECK(cudaGetDeviceCount(&devices));
  gpu::DeviceRunOptions o;
  o.dtype = dtype;
  o.devices = world_size;
  o.process_rank = world_rank;
  o.device_index = world_rank % devices;
  o.tensor_cores = args.kernels == "auto";
  ncclUniqueId id;
  if (world_rank == 0) HCPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(id.internal, sizeof(id.internal), MPI_BYTE, 0, MPI_COMM_WORLD);
  std::copy(id.internal, id.internal + sizeof(id.internal), o.nccl_unique_id.begin());

  const VerifyOptions vo = verify_options(sel, full, s.oracle.seed, s.oracle.input_distribution, dtype, 1);
  AttentionInputs inputs = make_attention_inputs(vo.seed, schedule.shape, vo.input_distribution, vo.q_heads,
                                                 vo.kv_heads, vo.full_heads_q, vo.full_heads_kv);
  const gpu::DeviceRunResult local = gpu::run_schedule_on_device(schedule, inputs, o);

  // Gather every rank's output buffers on process 0, in rank order.
  std::vector<float> flat;
  for (const auto& b : local.local_outputs) flat.insert(flat.end(), b.begin(), b.end());
  const int count = static_cast<int>(flat.size());
  std::vector<int> counts(static_cast<size_t>(world_size)), displs(static_cast<size_t>(world_size));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<float> all;
  if (world_rank == 0) {
    int total = 0;
    for (int r = 0; r < world_size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(flat.data(), count, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (world_rank != 0) return kExitOk;

  gpu::OutputGatherer gather(schedule.shape);
  for (int r = 0; r < world_size; ++r) {
    const RankProgram& prog = schedule.ranks[static_cast<size_t>(r)];
    const float* p = all.data() + displs[static_cast<size_t>(r)];
    for (const IoBinding& bind : prog.outputs) {
      gather.add(prog, bind, p);
      p += prog.buffers[static_cast<size_t>(bind.buffer)].elements();
    }
  }
  ExecutionResult gathered;
  gathered.outputs = gather.finish(dtype);
  const VerifyRun run = verify_schedule_run(schedule, vo, [&](const Schedule&, const AttentionInputs&) {
    return gathered;
  });
  fmt::print("verify {} [A={}, P={}] on {} GPUs, one process each (NCCL {}), {}\n{}", to_string(type),
             layout.a2a_size(), layout.p2p_size(), world_size, local.backend, local.device_name,
             to_string(run.report));
  return run.report.pass ? kExitOk : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  CLI::App app{"hcpsim_mpi_verify: verify a scenario with one process per GPU (launch with mpirun)"};
  Args args;
  app.add_option("scenario", args.scenario, "scenario YAML")->required();
  app.add_option("overrides", args.overrides, "key.path=value overrides");
  app.add_option("--dtype", args.dtype, "fp32, bf16 or fp16 (default: oracle.dtype)");
  app.add_option("--kernels", args.kernels, "auto (tensor cores where supported) or clear")->capture_default_str();
  int code = kExitOk;
  try {
    app.parse(argc, argv);
    code = run(args, world_rank, world_size);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e) == 0 ? kExitOk : kExitBadInput;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    code = kExitBadInput;
  } catch (const DeviceError& e) {
    std::fprintf(stderr, "device error (process %d): %s\n", world_rank, e.what());
    code = kExitDevice;
  }
  if (code == kExitBadInput || code == kExitDevice) MPI_Abort(MPI_COMM_WORLD, code);  // peers may wait in MPI/NCCL
  MPI_Finalize();
  return code;
}
