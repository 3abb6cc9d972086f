// The device executor on a real GPU: the same differential verification as the CPU backend (fp64 reference,
// tolerance model of verify.hpp), every builder, faults, the kernels against the host replay of the same plan, and
// the one-rank NCCL ring step. Every test skips (GPU_SKIP) without a usable device.

#include <cmath>
#include <cstdlib>
#include <string>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/fault_injection.hpp"
#include "hcpsim/config/scenario_adapters.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/gpu/device_executor.hpp"
#include "hcpsim/gpu/device_info.hpp"
#include "hcpsim/gpu/execution_plan.hpp"
#include "hcpsim/gpu/host_replay.hpp"
#include "hcpsim/oracles/verify.hpp"
#include "test_util.hpp"

using namespace hcpsim;

namespace {

#define REQUIRE_DEVICE()                                                   \
  do {                                                                     \
    const auto probe = gpu::probe_devices();                               \
    if (probe.devices.empty()) GPU_SKIP_IF_NO_DEVICE(probe.status);        \
  } while (0)

ScheduleRunner device_runner(Dtype dtype, bool tensor_cores, gpu::DeviceRunResult* keep = nullptr) {
  return [=](const Schedule& s, const AttentionInputs& in) {
    gpu::DeviceRunOptions o;
    o.dtype = dtype;
    o.tensor_cores = tensor_cores;
    gpu::DeviceRunResult r = gpu::run_schedule_on_device(s, in, o);
    if (keep != nullptr) *keep = r;
    return r.result;
  };
}

double rel_l2(const HostTensor& a, const HostTensor& b) {
  double d2 = 0, r2 = 0;
  for (int64_t i = 0; i < a.elements(); ++i) {
    const double x = a.data()[i], y = b.data()[i];
    if (!std::isfinite(y)) continue;
    d2 += (x - y) * (x - y);
    r2 += y * y;
  }
  return std::sqrt(d2 / r2);
}

}  // namespace

TEST_CASE("gpu: every builder verifies against the fp64 reference on one device (fp32, bf16, fp16)", "[gpu]") {
  REQUIRE_DEVICE();
  struct Case {
    CpCommType type;
    int64_t A, P, b, S, H, Hkv, dk, dv;
    bool causal;
  };
  const Case cases[] = {
      {CpCommType::a2a_p2p, 2, 2, 1, 256, 4, 2, 64, 64, true},   {CpCommType::a2a_p2p, 2, 4, 2, 512, 8, 4, 128, 128, true},
      {CpCommType::a2a_p2p, 2, 2, 1, 256, 4, 4, 64, 64, false},  {CpCommType::p2p, 1, 4, 1, 256, 4, 2, 64, 64, true},
      {CpCommType::a2a, 4, 1, 1, 256, 8, 4, 128, 128, true},     {CpCommType::all_gather, 1, 4, 1, 256, 4, 4, 64, 64, true},
      {CpCommType::a2a_p2p, 2, 2, 1, 256, 4, 2, 96, 64, true},  // dk ≠ dv: the clear kernels
  };
  for (const Case& c : cases) {
    const AttentionShape shape = test::attention_shape(c.b, c.S, c.H, c.Hkv, c.dk, c.dv, c.causal);
    const Schedule s = build_schedule(c.type, CpLayout(c.A, c.P, c.S), shape);
    for (Dtype d : {Dtype::fp32, Dtype::bf16, Dtype::fp16}) {
      for (bool tc : {true, false}) {
        VerifyOptions opt;
        opt.seed = 31;
        opt.dtype = d;
        opt.threads = 4;
        const VerifyRun run = verify_schedule_run(s, opt, device_runner(d, tc));
        INFO(to_string(c.type) << " A=" << c.A << " P=" << c.P << " dk=" << c.dk << " " << to_string(d)
                               << (tc ? " tensor cores" : " clear") << "\n" << to_string(run.report));
        REQUIRE(run.report.pass);
      }
    }
  }
}

TEST_CASE("gpu: the device computes what the host replay of the same plan computes", "[gpu]") {
  REQUIRE_DEVICE();
  // Clear kernels in fp32: the same arithmetic in the same order on both sides (block_math.hpp, --fmad=false);
  // only expf/logf differ (CUDA's are within 2 ulp of the correctly rounded result, CUDA C++ Programming Guide,
  // "Mathematical Functions"): rel L2 ≲ 1e-6. A scheduling race (a copy before its producer) gives O(1).
  const AttentionShape shape = test::attention_shape(1, 256, 4, 2, 64, 64, true);
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 256), shape);
  const AttentionInputs in = make_attention_inputs(3, shape, "clamped_normal");
  const AttentionOutputs host = gpu::execute_plan_on_host(s, gpu::build_execution_plan(s), in, Dtype::fp32);
  gpu::DeviceRunOptions o;
  o.dtype = Dtype::fp32;
  const gpu::DeviceRunResult dev = gpu::run_schedule_on_device(s, in, o);
  REQUIRE(rel_l2(dev.result.outputs.out, host.out) < 1e-5);
  REQUIRE(rel_l2(dev.result.outputs.dq, host.dq) < 1e-5);
  REQUIRE(rel_l2(dev.result.outputs.dk, host.dk) < 1e-5);
  REQUIRE(rel_l2(dev.result.outputs.dv, host.dv) < 1e-5);
  REQUIRE(dev.clear_blocks > 0);
  REQUIRE(dev.tensor_core_blocks == 0);  // fp32 never runs on tensor cores
  // The measured timeline: every op once, end ≥ start, attention blocks carry their kernel.
  size_t ops = 0;
  for (const RankProgram& p : s.ranks) ops += p.ops.size();
  REQUIRE(dev.timeline.size() == ops);
  for (const gpu::MeasuredOp& m : dev.timeline) {
    REQUIRE(m.end_s >= m.start_s);
    if (m.kind == OpKind::attn_fwd_block) REQUIRE(m.kernel == "clear");
  }
  const std::string csv = gpu::measured_ops_csv(dev, Dtype::fp32);
  REQUIRE(csv.rfind("op_kind,dtype,head_dim,q_rows,kv_rows,causal,m,n,k,bytes,flops,measured_s", 0) == 0);
  REQUIRE(csv.find("\nattn_bwd_block,fp32,64,") != std::string::npos);
}

TEST_CASE("gpu: injected faults fail verification on the device", "[gpu]") {
  REQUIRE_DEVICE();
  const AttentionShape shape = test::attention_shape(1, 256, 4, 2, 64, 64, true);
  const Schedule good = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 256), shape);
  for (FaultKind f : all_fault_kinds()) {
    if (!fault_must_fail(f) || fault_needs_packing(f)) continue;  // the GPU backend refuses THD
    VerifyOptions opt;
    opt.seed = 5;
    opt.dtype = Dtype::bf16;
    if (f == FaultKind::naive_lse_merge) opt.input_distribution = "adversarial";
    const VerifyRun run = verify_schedule_run(inject_fault(good, f), opt, device_runner(Dtype::bf16, true));
    INFO("fault " << to_string(f));
    REQUIRE_FALSE(run.report.pass);
  }
}

TEST_CASE("gpu: a one-rank NCCL communicator runs one ring step", "[gpu]") {
  REQUIRE_DEVICE();
  const gpu::NcclRingCheck c = gpu::nccl_one_rank_ring_step(0, 1 << 20);
  INFO(c.text);
  REQUIRE(c.ok);
  REQUIRE(c.max_abs_err == 0);
  REQUIRE(c.nccl_version >= 20000);
}

TEST_CASE("gpu: the NCCL backend verifies p2p on two GPUs", "[gpu]") {
  const auto probe = gpu::probe_devices();
  if (probe.devices.size() < 2)
    GPU_SKIP_IF_NO_DEVICE("the NCCL backend needs 2 GPUs, " << probe.devices.size() << " visible (" << probe.status
                                                            << ")");
  const AttentionShape shape = test::attention_shape(1, 256, 4, 2, 64, 64, true);
  const Schedule s = build_schedule(CpCommType::p2p, CpLayout(1, 2, 256), shape);
  VerifyOptions opt;
  opt.dtype = Dtype::bf16;
  const VerifyRun run = verify_schedule_run(s, opt, [](const Schedule& sc, const AttentionInputs& in) {
    gpu::DeviceRunOptions o;
    o.dtype = Dtype::bf16;
    o.devices = 2;
    return gpu::run_schedule_on_device(sc, in, o).result;
  });
  INFO(to_string(run.report));
  REQUIRE(run.report.pass);
}

TEST_CASE("gpu: without a device the executor raises DeviceError naming the cause", "[gpu]") {
  const auto probe = gpu::probe_devices();
  if (!probe.devices.empty()) {
    WARN("GPU_SKIP: a device is present; this test checks the no-device path");
    return;
  }
  const AttentionShape shape = test::attention_shape(1, 32, 4, 2, 16, 16, true);
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 32), shape);
  const AttentionInputs in = make_attention_inputs(1, shape, "clamped_normal");
  try {
    (void)gpu::run_schedule_on_device(s, in, gpu::DeviceRunOptions{});
    FAIL("expected DeviceError");
  } catch (const DeviceError& e) {
    REQUIRE(std::string(e.what()).find("no usable CUDA device") != std::string::npos);
    REQUIRE(std::string(e.what()).find("--backend cpu") != std::string::npos);
  }
}
