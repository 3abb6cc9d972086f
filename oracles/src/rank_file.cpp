#include "hcpsim/oracles/rank_file.hpp"

#include "hdf5_file.hpp"

namespace hcpsim {

namespace {

/// The /meta attributes a rank file holds (opened by name, as in dump.cpp).
constexpr const char* kRankTextNames[] = {"cp_comm_type", "dtype",          "hcpsim_version", "compiler",
                                          "x86_level",    "cuda",           "backend",        "inject",
                                          "attn_mask_type", "qkv_format",   "input_distribution", "scenario_yaml",
                                          "scenario_digest", "overrides",   "source_dump"};
constexpr const char* kRankNumberNames[] = {"cp_rank", "cp_size", "a2a_size", "p2p_size", "causal", "softmax_scale",
                                            "seed"};
constexpr const char* kOutputNames[] = {"out", "lse", "dq", "dk", "dv"};

}  // namespace

void write_rank_file(const std::string& path, const RankFile& f) {
  hdf5::write_file(path, "rank file", "-o", [&](hdf5::Writer& w) {
    const hid_t meta = w.group("/meta");
    for (const auto& [k, v] : f.meta_text) w.attr(meta, k, v);
    for (const auto& [k, v] : f.meta_number)
      if (!(f.seed && k == "seed")) w.attr(meta, k, v);
    if (f.seed) w.attr_u64(meta, "seed", *f.seed);
    const hid_t tokens = w.group("/tokens");
    for (const auto* group : {&f.inputs, &f.outputs}) {
      if (group->empty()) continue;
      const hid_t g = w.group(group == &f.inputs ? "/inputs" : "/outputs");
      for (const RankTensor& t : *group) {
        w.dataset(g, t.name, t.values, f.float64, t.name == "lse");
        w.int_dataset(tokens, t.name, t.tokens);
        hdf5::Handle ds(H5Dopen2(g, t.name.c_str(), H5P_DEFAULT), H5Dclose);
        w.check(ds.ok(), "open dataset " + t.name);
        w.attr(ds.get(), "head_begin", static_cast<double>(t.head_begin));
      }
    }
  });
}

RankFile read_rank_file(const std::string& path) {
  hdf5::QuietErrors quiet;
  hdf5::Handle file(hdf5::open_file(path, "rank file", "pass a file written by 'hcpsim shard' with your /outputs added"),
                    H5Fclose);
  RankFile f;
  hdf5::read_meta(file.get(), path, kRankTextNames, kRankNumberNames, f.meta_text, f.meta_number);
  {
    hdf5::Handle meta(H5Gopen2(file.get(), "/meta", H5P_DEFAULT), H5Gclose);
    uint64_t seed = 0;
    if (meta.ok() && hdf5::read_u64_attribute(meta.get(), "seed", seed, path)) f.seed = seed;
  }
  if (!f.meta_number.count("cp_rank"))
    hdf5::io_fail(path, "no /meta attribute cp_rank", "start from the file 'hcpsim shard --cp-rank g' wrote");
  for (const char* name : kOutputNames) {
    const std::string ds = std::string("/outputs/") + name;
    if (!hdf5::has_dataset(file.get(), path, ds)) continue;
    RankTensor t;
    t.name = name;
    t.values = t.name == "lse" ? hdf5::read_lse(file.get(), path, ds) : hdf5::read_bshd(file.get(), path, ds);
    f.outputs.push_back(std::move(t));
  }
  return f;
}

}  // namespace hcpsim
