// Rank files of shard / gather: what is written reads back exactly, and a file that is no rank file is refused.
#include <filesystem>
#include <fstream>
#include <utility>

#include <hdf5.h>

#include "catch_compat.hpp"
#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/dump.hpp"
#include "hcpsim/oracles/rank_file.hpp"

using namespace hcpsim;

TEST_CASE("rank_file: outputs round-trip exactly, lse as [b, h, s], and /meta cp_rank is required", "[dump]") {
  const auto dir = std::filesystem::temp_directory_path() / "hcpsim_rank_file_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RankFile f;
  f.meta_number = {{"cp_rank", 3}, {"cp_size", 4}, {"a2a_size", 2}, {"p2p_size", 2}};
  f.meta_text = {{"cp_comm_type", "a2a+p2p"}, {"dtype", "fp64"}};
  f.float64 = true;
  RankTensor out{"out", HostTensor(1, 4, 2, 3), {8, 9, 54, 55}, 2};
  RankTensor lse{"lse", HostTensor(1, 4, 2, 1), {8, 9, 54, 55}, 2};
  for (size_t i = 0; i < out.values.values().size(); ++i) out.values.values()[i] = 0.1 * static_cast<double>(i) - 1;
  for (size_t i = 0; i < lse.values.values().size(); ++i) lse.values.values()[i] = 1.0 / static_cast<double>(i + 3);
  f.inputs.push_back({"q", HostTensor(1, 4, 2, 3, 0.5), {8, 9, 54, 55}, 2});
  f.outputs = {out, lse};
  const std::string path = (dir / "rank3.h5").string();
  write_rank_file(path, f);
  const RankFile r = read_rank_file(path);
  REQUIRE(r.meta_number.at("cp_rank") == 3);
  REQUIRE(r.meta_number.at("cp_size") == 4);
  REQUIRE(r.meta_text.at("cp_comm_type") == "a2a+p2p");
  REQUIRE(r.inputs.empty());  // inputs are not read back: the schedule places outputs
  REQUIRE(r.outputs.size() == 2);
  REQUIRE(r.outputs[0].name == "out");
  REQUIRE(r.outputs[0].values.same_shape(out.values));
  REQUIRE(r.outputs[0].values.values() == out.values.values());  // float64: bit for bit
  REQUIRE(r.outputs[1].name == "lse");
  REQUIRE(r.outputs[1].values.same_shape(lse.values));
  REQUIRE(r.outputs[1].values.values() == lse.values.values());
  // The same content gives the same bytes.
  const std::string again = (dir / "again.h5").string();
  write_rank_file(again, f);
  auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  REQUIRE(bytes(path) == bytes(again));
  // A dump is not a rank file: no /meta cp_rank.
  DumpContents d;
  d.meta_text["dtype"] = "fp64";
  for (HostTensor* t : {&d.inputs.q, &d.inputs.k, &d.inputs.v, &d.inputs.dout, &d.reference.out, &d.reference.dq,
                        &d.reference.dk, &d.reference.dv, &d.hcp.out, &d.hcp.dq, &d.hcp.dk, &d.hcp.dv})
    *t = HostTensor(1, 2, 1, 2);
  d.reference.softmax_lse = d.hcp.softmax_lse = HostTensor(1, 2, 1, 1);
  const std::string dump = (dir / "dump.h5").string();
  write_dump(dump, d);
  try {
    (void)read_rank_file(dump);
    FAIL("read_rank_file accepted a dump");
  } catch (const InputError& e) {
    REQUIRE(std::string(e.what()).find("no /meta attribute cp_rank") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("rank_file: /meta cp_rank and cp_size are integers (a framework indexes with them)", "[dump]") {
  const auto dir = std::filesystem::temp_directory_path() / "hcpsim_rank_file_int_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  RankFile f;
  f.meta_number = {{"cp_rank", 1}, {"cp_size", 4}, {"softmax_scale", 0.125}};
  f.meta_text = {{"cp_comm_type", "p2p"}, {"dtype", "fp64"}};
  f.float64 = true;
  f.outputs.push_back({"out", HostTensor(1, 2, 1, 1, 0.5), {0, 1}, 0});
  const std::string path = (dir / "rank1.h5").string();
  write_rank_file(path, f);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t meta = H5Gopen2(file, "/meta", H5P_DEFAULT);
  for (const auto& [name, cls] : {std::pair{"cp_rank", H5T_INTEGER}, std::pair{"cp_size", H5T_INTEGER},
                                  std::pair{"softmax_scale", H5T_FLOAT}}) {
    const hid_t a = H5Aopen(meta, name, H5P_DEFAULT);
    const hid_t t = H5Aget_type(a);
    CHECK(H5Tget_class(t) == cls);
    H5Tclose(t);
    H5Aclose(a);
  }
  H5Gclose(meta);
  H5Fclose(file);
  CHECK(read_rank_file(path).meta_number.at("cp_rank") == 1.0);
  std::filesystem::remove_all(dir);
}
