// Hostile HDF5 inputs (docs/robustness.md "HDF5 inputs"): each crafted file here is made with the HDF5 C API from a
// dump the binary wrote, and every command reading it must exit 2 naming the file and the refusal, without reading
// anything outside it.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <hdf5.h>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/isolated_read.hpp"
#include "run_command.hpp"

namespace {

using hcpsim::test::run_hcpsim;
namespace fs = std::filesystem;

fs::path work_dir() {
  static const fs::path dir = [] {
    // One directory per test process: CTest runs the cases of this file in parallel processes.
    const fs::path d = fs::temp_directory_path() / ("hcpsim_hdf5_inputs_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

/// A valid dump of a small run, written once by the binary.
std::string good_dump() {
  static const std::string path = [] {
    const std::string p = (work_dir() / "good.h5").string();
    const auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --dump " + p);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return p;
  }();
  return path;
}

/// Copies the good dump to `name`, removes /inputs/q and lets `craft` put something hostile in its place.
std::string crafted(const std::string& name, const std::function<void(hid_t file, hid_t inputs)>& craft) {
  const std::string path = (work_dir() / name).string();
  fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const hid_t inputs = H5Gopen2(file, "/inputs", H5P_DEFAULT);
  REQUIRE(inputs >= 0);
  REQUIRE(H5Ldelete(inputs, "q", H5P_DEFAULT) >= 0);
  craft(file, inputs);
  H5Gclose(inputs);
  REQUIRE(H5Fclose(file) >= 0);
  return path;
}

/// Creates /inputs/q as float32 of `dims` with creation plist `dcpl`, writing every element when `write`.
void make_q(hid_t inputs, const std::vector<hsize_t>& dims, hid_t dcpl, bool write) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(inputs, "q", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(ds >= 0);
  if (write) {
    hsize_t n = 1;
    for (hsize_t d : dims) n *= d;
    const std::vector<float> v(n, 0.5f);
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
  }
  H5Dclose(ds);
  H5Sclose(space);
}

const std::vector<hsize_t> kQDims = {1, 64, 4, 16};  // small; the refusals do not depend on the shape

/// compare good.h5 PATH exits 2 naming PATH and `problem`.
void require_refused(const std::string& path, const std::string& problem) {
  const auto r = run_hcpsim("compare " + good_dump() + " " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find(path) != std::string::npos);
  REQUIRE(r.output.find(problem) != std::string::npos);
}

/// A copy of good_dump() named `name` in work_dir() with the link `object` (e.g. "/reference") deleted.
std::string dump_without(const std::string& name, const char* object) {
  const std::string path = (work_dir() / name).string();
  fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  REQUIRE(H5Ldelete(file, object, H5P_DEFAULT) >= 0);
  REQUIRE(H5Fclose(file) >= 0);
  return path;
}

}  // namespace

TEST_CASE("apps: an HDF5 dataset of 2^31 elements with a fill value and no data is refused before allocating",
          "[apps][hdf5]") {
  const std::string path = crafted("fill_bomb.h5", [](hid_t, hid_t inputs) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const std::vector<hsize_t> chunk = {1, 64, 16, 16};
    H5Pset_chunk(dcpl, 4, chunk.data());
    const float fill = 1.0f;
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill);
    make_q(inputs, {1, 2048, 1024, 1024}, dcpl, false);
    H5Pclose(dcpl);
  });
  require_refused(path, "claims 2147483648 elements");
}

TEST_CASE("apps: an HDF5 dataset that stores fewer bytes than it declares is refused", "[apps][hdf5]") {
  const std::string path = crafted("unwritten.h5", [](hid_t, hid_t inputs) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const std::vector<hsize_t> chunk = {1, 16, 4, 16};
    H5Pset_chunk(dcpl, 4, chunk.data());
    make_q(inputs, kQDims, dcpl, false);
    H5Pclose(dcpl);
  });
  require_refused(path, "declares 16384 bytes of data but stores 0");
}

TEST_CASE("apps: an HDF5 dataset with a filter pipeline is refused", "[apps][hdf5]") {
  const std::string path = crafted("deflate.h5", [](hid_t, hid_t inputs) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const std::vector<hsize_t> chunk = {1, 16, 4, 16};
    H5Pset_chunk(dcpl, 4, chunk.data());
    H5Pset_deflate(dcpl, 6);
    make_q(inputs, kQDims, dcpl, true);
    H5Pclose(dcpl);
  });
  require_refused(path, "/inputs/q uses a filter pipeline");
}

TEST_CASE("apps: an HDF5 dataset with external storage is refused without reading the other file", "[apps][hdf5]") {
  const std::string secret = (work_dir() / "secret.bin").string();
  std::ofstream(secret, std::ios::binary) << std::string(1 << 14, 'S');
  const std::string path = crafted("external_storage.h5", [&](hid_t, hid_t inputs) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(H5Pset_external(dcpl, secret.c_str(), 0, 1 << 14) >= 0);
    make_q(inputs, kQDims, dcpl, false);
    H5Pclose(dcpl);
  });
  require_refused(path, "/inputs/q has external storage");
}

TEST_CASE("apps: external and soft links in an HDF5 input are refused before they are followed", "[apps][hdf5]") {
  const std::string external = crafted("external_link.h5", [&](hid_t, hid_t inputs) {
    REQUIRE(H5Lcreate_external(good_dump().c_str(), "/inputs/q", inputs, "q", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  });
  require_refused(external, "external link /inputs/q");
  const std::string soft = crafted("soft_link.h5", [&](hid_t, hid_t inputs) {
    REQUIRE(H5Lcreate_soft("/inputs/k", inputs, "q", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  });
  require_refused(soft, "soft link /inputs/q");
}

TEST_CASE("apps: a virtual HDF5 dataset is refused", "[apps][hdf5]") {
  const std::string path = crafted("virtual.h5", [&](hid_t, hid_t inputs) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hid_t space = H5Screate_simple(4, kQDims.data(), nullptr);
    REQUIRE(H5Pset_virtual(dcpl, space, good_dump().c_str(), "/inputs/k", space) >= 0);
    H5Sclose(space);
    make_q(inputs, kQDims, dcpl, false);
    H5Pclose(dcpl);
  });
  require_refused(path, "/inputs/q is a virtual dataset");
}

TEST_CASE("apps: an HDF5 string attribute declaring more than 16 MiB is refused", "[apps][hdf5]") {
  const std::string path = (work_dir() / "huge_attribute.h5").string();
  fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t meta = H5Gopen2(file, "/meta", H5P_DEFAULT);
    REQUIRE(H5Adelete(meta, "scenario_yaml") >= 0);
    const size_t size = (size_t{16} << 20) + 1;
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, size);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(meta, "scenario_yaml", type, space, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    const std::string text(size, 'y');
    REQUIRE(H5Awrite(a, type, text.data()) >= 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
    H5Gclose(meta);
    REQUIRE(H5Fclose(file) >= 0);
  }
  require_refused(path, "attribute /meta/scenario_yaml declares a string of 16777217 bytes");
  const auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --reference " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("declares a string of") != std::string::npos);
}

TEST_CASE("apps: files that crash libhdf5 itself exit 2 naming the file, not with a signal", "[apps][hdf5]") {
  for (const char* name : {"h5aexists_msg_iterate_heap_overflow.h5", "h5c_protect_huge_allocation.h5",
                           "h5lexists_accum_read_segv.h5"}) {
    const std::string path = std::string(HCPSIM_SOURCE_DIR) + "/tests/fuzz/hdf5_library_crashes/" + name;
    const auto r = run_hcpsim("compare " + path + " " + path);
    INFO(r.output);
    REQUIRE(r.exit_code == 2);
    REQUIRE(r.output.find(path) != std::string::npos);
  }
}

TEST_CASE("oracles: a reader child killed by a signal becomes an InputError naming the file", "[oracles][hdf5]") {
  std::string message;
  try {
    hcpsim::probe_in_child("some/dump.h5", [] { std::raise(SIGKILL); });
  } catch (const hcpsim::InputError& e) {
    message = e.what();
  }
  INFO(message);
  REQUIRE(message.find("some/dump.h5") != std::string::npos);
  REQUIRE(message.find("signal 9") != std::string::npos);
  // A probe that returns or throws is a clean outcome: the caller reads the file itself.
  REQUIRE_NOTHROW(hcpsim::probe_in_child("x.h5", [] {}));
  REQUIRE_NOTHROW(hcpsim::probe_in_child("x.h5", [] { throw std::runtime_error("ordinary"); }));
}

TEST_CASE("oracles: a reader child that hangs is killed after its limit and becomes an InputError",
          "[oracles][hdf5]") {
  std::string message;
  try {
    hcpsim::probe_in_child("hung/dump.h5", [] {
      for (;;) pause();  // a libhdf5 hang: never returns
    }, 0.2);
  } catch (const hcpsim::InputError& e) {
    message = e.what();
  }
  INFO(message);
  REQUIRE(message.find("hung/dump.h5") != std::string::npos);
  REQUIRE(message.find("did not finish within 0.2 s") != std::string::npos);
  // The default limit: 60 s plus the file at 20 MB/s (a missing file counts as empty).
  REQUIRE(hcpsim::isolated_read_timeout_s("no/such/file.h5") == 60.0);
}

TEST_CASE("apps: verify --dump on a full file system exits 2, keeps the old file and leaves no temporary",
          "[apps][hdf5]") {
  // A failed write used to leave HDF5 handles open, and the library crashed at exit (signal 11 after the right
  // error). Needs a small private tmpfs, so root; skipped (with a warning) elsewhere.
  const std::string mnt = (work_dir() / "full_fs").string();
  fs::create_directories(mnt);
  if (hcpsim::test::run_command("mount -t tmpfs -o size=256k tmpfs '" + mnt + "'").exit_code != 0) {
    WARN("cannot mount a tmpfs here (not root): the full-disk case is not run");
    return;
  }
  hcpsim::test::run_command("dd if=/dev/zero of='" + mnt + "/filler' bs=1k count=100");
  const std::string dump = mnt + "/d.h5";
  std::ofstream(dump) << "previous dump\n";
  const auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --dump " + dump);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(mnt)) names.push_back(e.path().filename().string());
  std::ifstream in(dump);
  std::string first_line;
  std::getline(in, first_line);
  in.close();
  hcpsim::test::run_command("umount '" + mnt + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find("HDF5 error while writing") != std::string::npos);
  REQUIRE(first_line == "previous dump");
  std::sort(names.begin(), names.end());
  REQUIRE(names == std::vector<std::string>{"d.h5", "filler"});
}

TEST_CASE("apps: gather refuses a rank file whose output is an external link", "[apps][hdf5]") {
  std::string ranks;
  for (int g = 0; g < 4; ++g) {
    const std::string rank = (work_dir() / ("rank" + std::to_string(g) + ".h5")).string();
    const auto r = run_hcpsim("shard " + good_dump() + " --cp-rank " + std::to_string(g) + " --outputs -o " + rank);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    ranks += " " + rank;
  }
  const std::string rank0 = (work_dir() / "rank0.h5").string();
  const hid_t file = H5Fopen(rank0.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  REQUIRE(H5Ldelete(file, "/outputs/out", H5P_DEFAULT) >= 0);
  REQUIRE(H5Lcreate_external(good_dump().c_str(), "/hcp/out", file, "/outputs/out", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  REQUIRE(H5Fclose(file) >= 0);
  const auto r = run_hcpsim("gather " + good_dump() + ranks + " -o " + (work_dir() / "gathered.h5").string());
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  REQUIRE(r.output.find(rank0) != std::string::npos);
  REQUIRE(r.output.find("external link /outputs/out") != std::string::npos);
  REQUIRE_FALSE(fs::exists(work_dir() / "gathered.h5"));
}

TEST_CASE("apps: a dump whose /meta header or attributes are damaged is corrupt (exit 2), not a PASS", "[apps][hdf5]") {
  // 64 bytes of 0xff over the /meta group's header (offset 200) or its attribute storage (400): the attributes
  // were read as absent (compare printed PASS with every provenance field "(absent)", verify --reference called
  // the fp32 dump fp64) and HDF5 printed "infinite loop closing library" at exit.
  for (const long offset : {200L, 400L}) {
    const std::string path = (work_dir() / ("meta_damaged_" + std::to_string(offset) + ".h5")).string();
    fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(offset);
      const std::string junk(64, '\xff');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    const auto r = run_hcpsim("compare " + good_dump() + " " + path);
    INFO(offset << "\n" << r.output);
    CHECK(r.exit_code == 2);
    CHECK(r.output.find(path + ": cannot read ") != std::string::npos);
    CHECK(r.output.find("the file is corrupt") != std::string::npos);
    CHECK(r.output.find("PASS") == std::string::npos);
    CHECK(r.output.find("infinite loop closing library") == std::string::npos);
  }
}

TEST_CASE("apps: compare judges B against A's reference, so B needs no /reference", "[apps][hdf5]") {
  // A framework's own dump holds /inputs and /hcp only. compare asked for B's /reference/<tensor> one tensor at a
  // time, and its fix (compare without that tensor) led to the next missing one.
  const std::string path = dump_without("no_reference.h5", "/reference");
  auto r = run_hcpsim("compare " + good_dump() + " " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("result: PASS") != std::string::npos);
  // A, the reference, still needs its /reference.
  r = run_hcpsim("compare " + path + " " + good_dump());
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  // The whole group is missing: the fix says so (it suggested --tensors without 'out', which cannot help).
  CHECK(r.output.find("missing group /reference (the fp64 truth that a reference dump carries); fix: write it (the "
                      "README's 'HDF5 dump layout'); with 'hcpsim compare', give a dump of 'hcpsim verify --dump' "
                      "first and your own file second") != std::string::npos);
  CHECK(r.output.find("--tensors") == std::string::npos);
  // No /hcp at all: named as the group, for A and B alike.
  const std::string no_hcp = dump_without("no_hcp.h5", "/hcp");
  r = run_hcpsim("compare " + good_dump() + " " + no_hcp);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(r.output.find(no_hcp + ": missing group /hcp (the context-parallel outputs: out, lse, dq, dk, dv); fix: "
                      "write them") != std::string::npos);
}

TEST_CASE("apps: a dump whose /hcp or /meta is a dataset, not a group, is named as such", "[apps][hdf5]") {
  // HDF5 fails to look below a dataset (H5Lexists < 0) as it fails on a damaged header: the file was called corrupt.
  for (const char* group : {"/hcp", "/meta"}) {
    const std::string path = (work_dir() / (std::string("not_group_") + (group + 1) + ".h5")).string();
    fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
    {
      const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      REQUIRE(file >= 0);
      REQUIRE(H5Ldelete(file, group, H5P_DEFAULT) >= 0);
      const hsize_t dims[1] = {4};
      const hid_t space = H5Screate_simple(1, dims, nullptr);
      const hid_t ds = H5Dcreate2(file, group, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      REQUIRE(ds >= 0);
      const double v[4] = {0, 0, 0, 0};
      REQUIRE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
      H5Dclose(ds);
      H5Sclose(space);
      REQUIRE(H5Fclose(file) >= 0);
    }
    require_refused(path, std::string(group) + " is not a group");
  }
}

TEST_CASE("apps: a dump whose /reference was edited after it was written is refused, not judged against", "[apps][hdf5]") {
  // One value of /reference/out changed (0.74 → 99): verify --reference measured its non-CP baseline against the
  // same wrong reference, the fp32 tolerance (2 × baseline) grew with it, and the run printed PASS.
  const std::string path = (work_dir() / "edited_reference.h5").string();
  fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    const hid_t ds = H5Dopen2(file, "/reference/out", H5P_DEFAULT);
    REQUIRE(ds >= 0);
    const hid_t space = H5Dget_space(ds);
    std::vector<double> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    REQUIRE(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
    v[0] = 99.0;
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
    H5Sclose(space);
    H5Dclose(ds);
    REQUIRE(H5Fclose(file) >= 0);
  }
  const std::string verify = "verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --reference ";
  auto r = run_hcpsim(verify + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  CHECK(r.output.find("/reference/out is not what was written") != std::string::npos);
  CHECK(r.output.find("PASS") == std::string::npos);
  r = run_hcpsim("compare " + path + " " + good_dump());
  CHECK(r.exit_code == 2);
  // The untouched dump is accepted; a user who replaces /reference on purpose deletes the digest, as the fix says.
  r = run_hcpsim(verify + good_dump());
  CHECK(r.exit_code == 0);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    REQUIRE(H5Adelete_by_name(file, "/meta", "reference_digest", H5P_DEFAULT) >= 0);
    REQUIRE(H5Fclose(file) >= 0);
  }
  r = run_hcpsim("compare " + path + " " + good_dump());
  CHECK(r.exit_code != 2);
}

TEST_CASE("apps: verify --reference names one edited input value as an edit, not as other heads", "[apps][hdf5]") {
  const std::string path = (work_dir() / "edited_input.h5").string();
  fs::copy_file(good_dump(), path, fs::copy_options::overwrite_existing);
  {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    const hid_t ds = H5Dopen2(file, "/inputs/do", H5P_DEFAULT);
    REQUIRE(ds >= 0);
    const hid_t space = H5Dget_space(ds);
    std::vector<double> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
    REQUIRE(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
    v[5] = 0.125;
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0);
    H5Sclose(space);
    H5Dclose(ds);
    REQUIRE(H5Fclose(file) >= 0);
  }
  const auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 --reference " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  CHECK(r.output.find("/inputs/do is not what this scenario generates: 1 of its") != std::string::npos);
  CHECK(r.output.find("(the first at flat index 5), so the file was edited or damaged") != std::string::npos);
}

TEST_CASE("apps: compare refuses dumps of equal inputs but another mask (exit 2), it does not FAIL them", "[apps][hdf5]") {
  // Causal against no_mask: the inputs are the same, so compare judged one against the other and printed FAIL
  // with 10^5 elements outside tolerance (exit 1), where verify --reference refuses the pair.
  const std::string path = (work_dir() / "no_mask.h5").string();
  auto r = run_hcpsim("verify scenarios/llama32_1b_cp4_a2a_p2p.yaml model.seq_length=64 model.attn_mask_type=no_mask "
                      "--dump " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_hcpsim("compare " + good_dump() + " " + path);
  INFO(r.output);
  REQUIRE(r.exit_code == 2);
  CHECK(r.output.find("its /meta/attn_mask_type is no_mask, that of '" + good_dump() + "' is causal (not the same "
                      "problem") != std::string::npos);
  CHECK(r.output.find("FAIL") == std::string::npos);
}
