// HDF5 dumps: round trip, determinism, clear errors for truncated / incomplete / mismatched files, atomic writes.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include <hdf5.h>

#include "catch_compat.hpp"
#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/core/schedule_builder.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/verify.hpp"

using namespace hcpsim;
namespace fs = std::filesystem;

namespace {

DumpContents small_dump(Dtype dtype, int threads, uint64_t seed = 7) {
  AttentionShape shape;
  shape.batch = 2;
  shape.seq_length = 32;
  shape.heads_q = 4;
  shape.heads_kv = 2;
  shape.head_dim_qk = 8;
  shape.head_dim_v = 4;
  shape.causal = true;
  shape.softmax_scale = 0.35;
  const Schedule s = build_schedule(CpCommType::a2a_p2p, CpLayout(2, 2, 32), shape);
  VerifyOptions o;
  o.seed = seed;
  o.dtype = dtype;
  o.threads = threads;
  const VerifyRun run = verify_schedule_run(s, o);
  DumpContents d;
  d.dtype = dtype;
  d.inputs = run.inputs;
  d.reference = run.reference;
  d.hcp = run.hcp;
  d.metrics = run.report.tensors;
  d.meta_text = {{"dtype", to_string(dtype)}, {"backend", "cpu"}, {"scenario_yaml", "name: test\n"}};
  d.meta_number = {{"seed", static_cast<double>(seed)}};
  return d;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string error_of(const std::string& path) {
  try {
    (void)read_dump(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("oracles: HDF5 dump round trip keeps every value (fp64 exactly, fp32 values exactly)", "[oracles][dump]") {
  const fs::path dir = fresh_dir("hcpsim_dump_roundtrip");
  for (Dtype dt : {Dtype::fp64, Dtype::bf16}) {
    const DumpContents d = small_dump(dt, 1);
    const std::string p = (dir / ("r_" + to_string(dt) + ".h5")).string();
    write_dump(p, d);
    REQUIRE(fs::exists(p));
    REQUIRE_FALSE(fs::exists(p + ".tmp"));
    const DumpContents r = read_dump(p);
    REQUIRE(r.dtype == dt);
    REQUIRE(r.meta_text.at("scenario_yaml") == "name: test\n");
    REQUIRE(r.meta_number.at("seed") == 7.0);
    // bf16 inputs/results are stored as float32 (exact widening), the reference as float64: all round-trip exactly
    REQUIRE(r.inputs.q.values() == d.inputs.q.values());
    REQUIRE(r.inputs.dout.values() == d.inputs.dout.values());
    REQUIRE(r.reference.dq.values() == d.reference.dq.values());
    REQUIRE(r.reference.softmax_lse.values() == d.reference.softmax_lse.values());  // [b, h, s] and back
    REQUIRE(r.hcp.out.values() == d.hcp.out.values());
    REQUIRE(r.hcp.softmax_lse.values() == d.hcp.softmax_lse.values());
    REQUIRE(r.hcp.dv.values() == d.hcp.dv.values());
    REQUIRE(r.metrics.size() == 5);
    REQUIRE(r.metrics[2].rel_l2_err == d.metrics[2].rel_l2_err);
    // a dump compared with itself passes with zero error
    const DumpComparison c = compare_dumps(r, r, 1e-12, 0, p, p);
    REQUIRE(c.pass);
    REQUIRE(c.tensors[0].max_abs_err == 0.0);
  }
  fs::remove_all(dir);
}

TEST_CASE("oracles: two runs and 1 vs 2 threads give byte-identical dumps", "[oracles][dump]") {
  const fs::path dir = fresh_dir("hcpsim_dump_determinism");
  write_dump((dir / "a.h5").string(), small_dump(Dtype::fp32, 1));
  write_dump((dir / "b.h5").string(), small_dump(Dtype::fp32, 1));
  write_dump((dir / "c.h5").string(), small_dump(Dtype::fp32, 2));
  const std::string a = bytes_of(dir / "a.h5");
  REQUIRE(a.size() > 1000);
  REQUIRE(a == bytes_of(dir / "b.h5"));
  REQUIRE(a == bytes_of(dir / "c.h5"));
  fs::remove_all(dir);
}

TEST_CASE("oracles: truncated, incomplete and mismatched dumps are clear InputErrors", "[oracles][dump]") {
  const fs::path dir = fresh_dir("hcpsim_dump_errors");
  const std::string good = (dir / "good.h5").string();
  const DumpContents d = small_dump(Dtype::fp32, 1);
  write_dump(good, d);
  // truncated: the first half of the file
  const std::string all = bytes_of(good);
  const std::string cut = (dir / "cut.h5").string();
  {
    std::ofstream f(cut, std::ios::binary);
    f.write(all.data(), static_cast<std::streamsize>(all.size() / 2));
  }
  std::string msg = error_of(cut);
  INFO(msg);
  REQUIRE(msg.find("cut.h5") != std::string::npos);
  REQUIRE((msg.find("truncated") != std::string::npos || msg.find("not an HDF5 file") != std::string::npos));
  REQUIRE(msg.find("fix:") != std::string::npos);
  // a missing dataset is named, with the fix
  const std::string missing = (dir / "missing.h5").string();
  write_dump(missing, d, {"/hcp/dq"});
  msg = error_of(missing);
  INFO(msg);
  REQUIRE(msg.find("missing dataset /hcp/dq") != std::string::npos);
  REQUIRE(msg.find("fix:") != std::string::npos);
  // not HDF5 at all
  const std::string text = (dir / "text.h5").string();
  std::ofstream(text) << "hello";
  REQUIRE(error_of(text).find("not an HDF5 file") != std::string::npos);
  // different inputs: compare refuses
  const std::string other = (dir / "other.h5").string();
  write_dump(other, small_dump(Dtype::fp32, 1, 8));
  std::string why;
  try {
    (void)compare_dumps(read_dump(good), read_dump(other), 1e-5, 1e-5, good, other);
  } catch (const InputError& e) {
    why = e.what();
  }
  INFO(why);
  CHECK(why.find("/inputs differ") != std::string::npos);
  CHECK(why.find("(not the same problem; seed 8 against 7)") != std::string::npos);  // the seeds, from /meta
  // A dataset of another shape is given with its shape and the one /inputs/q makes it (it named neither).
  DumpContents bad = d;
  bad.hcp.out = HostTensor(2, 32, 2, 4);
  const std::string shape = (dir / "shape.h5").string();
  write_dump(shape, bad);
  CHECK(error_of(shape).find("dataset /hcp/out is [2, 32, 2, 4] where /inputs/q [2, 32, 4, 8] makes it "
                             "[2, 32, 4, 4]") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("oracles: an interrupted dump leaves no file under the final name", "[oracles][dump]") {
  const fs::path dir = fresh_dir("hcpsim_dump_interrupted");
  DumpContents d = small_dump(Dtype::fp32, 1);
  d.metrics[0].tensor = "no/such/group";  // creating /metrics/no/such/group fails halfway through the write
  const std::string p = (dir / "x.h5").string();
  REQUIRE_THROWS_AS(write_dump(p, d), InputError);
  REQUIRE_FALSE(fs::exists(p));
  REQUIRE_FALSE(fs::exists(p + ".tmp"));
  fs::remove_all(dir);
}

namespace {

/// The HDF5 type class and size of attribute `name` of group `group` in `path` (what h5py hands a reader).
std::pair<H5T_class_t, size_t> attribute_type(const std::string& path, const char* group, const char* name) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t g = H5Gopen2(f, group, H5P_DEFAULT);
  const hid_t a = H5Aopen(g, name, H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  const std::pair<H5T_class_t, size_t> out{H5Tget_class(t), H5Tget_size(t)};
  H5Tclose(t);
  H5Aclose(a);
  H5Gclose(g);
  H5Fclose(f);
  return out;
}

}  // namespace

TEST_CASE("oracles: /meta counts, ranks and the seed are integers; a seed above 2^53 reads back exactly",
          "[oracles][dump]") {
  const fs::path dir = fresh_dir("hcpsim_dump_integer_meta");
  DumpContents d = small_dump(Dtype::fp64, 1);
  d.meta_number["a2a_size"] = 2;
  d.meta_number["p2p_size"] = 2;
  d.meta_number["causal"] = 1;
  d.meta_number["softmax_scale"] = 0.125;
  d.seed = 9007199254740993ULL;  // 2^53 + 1: no double holds it
  const std::string p = (dir / "meta.h5").string();
  write_dump(p, d);
  for (const char* name : {"a2a_size", "p2p_size", "causal"})
    CHECK(attribute_type(p, "/meta", name) == std::pair<H5T_class_t, size_t>{H5T_INTEGER, 8});
  CHECK(attribute_type(p, "/meta", "seed") == std::pair<H5T_class_t, size_t>{H5T_INTEGER, 8});
  CHECK(attribute_type(p, "/meta", "softmax_scale") == std::pair<H5T_class_t, size_t>{H5T_FLOAT, 8});
  const DumpContents r = read_dump(p);
  REQUIRE(r.seed.has_value());
  CHECK(*r.seed == 9007199254740993ULL);
  CHECK(r.meta_number.at("a2a_size") == 2.0);
  CHECK(r.meta_number.at("softmax_scale") == 0.125);
  // Without DumpContents::seed the seed of meta_number is written, as an integer too, and reads back exactly.
  DumpContents old = small_dump(Dtype::fp64, 1);
  const std::string q = (dir / "old.h5").string();
  write_dump(q, old);
  const DumpContents o = read_dump(q);
  CHECK(o.meta_number.at("seed") == 7.0);
  CHECK(o.seed == std::optional<uint64_t>(7));  // an integer attribute now, so exact too
  fs::remove_all(dir);
}

TEST_CASE("oracles: compare_dumps refuses equal inputs of another problem (packing, scale), naming what differs",
          "[oracles][dump]") {
  DumpContents a = small_dump(Dtype::fp64, 1);
  a.meta_number["softmax_scale"] = 0.35;
  auto refused = [&](const DumpContents& b) {
    try {
      (void)compare_dumps(a, b, 1e-10, 1e-10, "a.h5", "b.h5", {});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  DumpContents b = a;
  REQUIRE(refused(b).empty());
  b.meta_number["softmax_scale"] = 0.5;
  CHECK(refused(b).find("its /meta/softmax_scale is 0.5, that of 'a.h5' is 0.34999999999999998 (not the same "
                        "problem") != std::string::npos);
  b = a;
  DumpContents packed = a;
  packed.thd.cu_seqlens = {0, 30, 64};
  packed.thd.cu_seqlens_padded = {0, 32, 64};
  b.thd.cu_seqlens = {0, 8, 64};
  b.thd.cu_seqlens_padded = {0, 8, 64};
  try {
    (void)compare_dumps(packed, b, 1e-10, 1e-10, "a.h5", "b.h5", {});
    FAIL("another packing was compared");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("its /meta/cu_seqlens is [0, 8, 64], that of 'a.h5' is [0, 30, 64]") !=
          std::string::npos);
  }
}
