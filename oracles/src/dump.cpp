#include "hcpsim/oracles/dump.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/fnv_hash.hpp"
#include "hcpsim/core/thd_layout.hpp"
#include "hdf5_file.hpp"

namespace hcpsim {

namespace {

using hdf5::Handle;
using hdf5::io_fail;

const char* kTensorNames[] = {"out", "lse", "dq", "dk", "dv"};
const char* kMetricNames[] = {"out", "softmax_lse", "dq", "dk", "dv"};

HostTensor* output_slot(AttentionOutputs& o, size_t i) {
  HostTensor* all[] = {&o.out, &o.softmax_lse, &o.dq, &o.dk, &o.dv};
  return all[i];
}
const HostTensor* output_slot(const AttentionOutputs& o, size_t i) {
  const HostTensor* all[] = {&o.out, &o.softmax_lse, &o.dq, &o.dk, &o.dv};
  return all[i];
}

std::string rank_name(size_t g) { return "rank" + std::to_string(g); }

/// fnv1a64 of a tensor's shape [b, s, h, w] and its values' bytes (the same bits give the same digest).
uint64_t tensor_digest(const HostTensor& t) {
  const int64_t shape[] = {t.batch(), t.rows(), t.heads(), t.width()};
  uint64_t h = fnv1a64(reinterpret_cast<const unsigned char*>(shape), sizeof shape);
  return fnv1a64(reinterpret_cast<const unsigned char*>(t.data()), static_cast<size_t>(t.elements()) * sizeof(double),
                 h);
}

/// /meta/reference_digest: "out=<16 hex> lse=<16 hex> dq=… dk=… dv=…", the tensor_digest of each /reference
/// tensor as written (lse in its in-memory [b, s, h, 1] form).
std::string reference_digest_text(const AttentionOutputs& r) {
  std::string text;
  for (size_t i = 0; i < 5; ++i) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tensor_digest(*output_slot(r, i))));
    text += std::string(text.empty() ? "" : " ") + kTensorNames[i] + "=" + hex;
  }
  return text;
}

/// The recorded digest of /reference tensor `name` in a reference_digest text, or "" if it has none.
std::string recorded_digest(const std::string& text, const std::string& name) {
  const std::string key = name + "=";
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1))
    if (at == 0 || text[at - 1] == ' ') return text.substr(at + key.size(), 16);
  return "";
}

/// The ThdDumpLayout datasets under /meta (nothing for a layout without packed sequences).
void write_thd_layout(hdf5::Writer& w, hid_t meta, const ThdDumpLayout& thd) {
  if (thd.empty()) return;
  w.int_dataset(meta, "cu_seqlens", thd.cu_seqlens);
  w.int_dataset(meta, "cu_seqlens_padded", thd.cu_seqlens_padded);
  const hid_t tokens = w.group("/meta/thd_tokens");
  for (size_t g = 0; g < thd.rank_tokens.size(); ++g) w.int_dataset(tokens, rank_name(g), thd.rank_tokens[g]);
  const hid_t te = w.group("/meta/thd_te_indices");
  for (size_t g = 0; g < thd.te_indices.size(); ++g) w.int_dataset(te, rank_name(g), thd.te_indices[g]);
}

}  // namespace

ThdDumpLayout thd_dump_layout(const PackedSequences& packing, int64_t a2a_size, int64_t p2p_size) {
  ThdDumpLayout thd;
  if (!packing.thd()) return thd;
  const ThdLayout layout(a2a_size, p2p_size, packing, ThdLayout::ValidRule::padded);
  thd.cu_seqlens = packing.cu_seqlens();
  thd.cu_seqlens_padded = packing.cu_seqlens_padded();
  const int64_t cp = a2a_size * p2p_size;
  for (int64_t g = 0; g < cp; ++g) {
    thd.rank_tokens.push_back(layout.tokens_before_a2a(g));
    thd.te_indices.push_back(thd_partitioned_indices(thd.cu_seqlens_padded, cp, g));
  }
  return thd;
}

void write_dump(const std::string& path, const DumpContents& c, const std::vector<std::string>& omit,
                const std::string& option) {
  hdf5::write_file(path, "dump", option, [&](hdf5::Writer& w) {
    w.omit = omit;
    const bool f64 = c.dtype == Dtype::fp64;
    const hid_t meta = w.group("/meta");
    for (const auto& [k, v] : c.meta_text)
      if (k != "reference_digest") w.attr(meta, k, v);
    w.attr(meta, "reference_digest", reference_digest_text(c.reference));  // of what is written now
    for (const auto& [k, v] : c.meta_number)
      if (!(c.seed && k == "seed")) w.attr(meta, k, v);
    if (c.seed) w.attr_u64(meta, "seed", *c.seed);
    write_thd_layout(w, meta, c.thd);
    const hid_t in = w.group("/inputs");
    w.dataset(in, "q", c.inputs.q, f64, false);
    w.dataset(in, "k", c.inputs.k, f64, false);
    w.dataset(in, "v", c.inputs.v, f64, false);
    w.dataset(in, "do", c.inputs.dout, f64, false);
    const hid_t ref = w.group("/reference");
    const hid_t hcp = w.group("/hcp");
    for (size_t i = 0; i < 5; ++i) {
      w.dataset(ref, kTensorNames[i], *output_slot(c.reference, i), true, i == 1);
      w.dataset(hcp, kTensorNames[i], *output_slot(c.hcp, i), f64, i == 1);
    }
    w.group("/metrics");
    for (const TensorError& e : c.metrics) {
      const hid_t g = w.group("/metrics/" + e.tensor);
      w.attr(g, "max_abs_err", e.max_abs_err);
      w.attr(g, "max_rel_err", e.max_rel_err);
      w.attr(g, "rel_l2_err", e.rel_l2_err);
      w.attr(g, "tolerance", e.tolerance);
      w.attr(g, "pass", e.pass ? 1.0 : 0.0);
    }
  });
}

namespace {

using hdf5::read_bshd;
using hdf5::read_lse;

/// The /meta attributes hcpsim writes and reads. They are opened by name: opening by index makes Debian's
/// libhdf5 1.10.8 build the whole attribute table, which crashes inside the library on some corrupt files
/// (found by fuzzing, docs/robustness.md).
constexpr const char* kMetaTextNames[] = {"scenario_yaml",  "scenario_digest", "overrides",      "dtype",
                                          "backend",        "hcpsim_version",  "compiler",       "x86_level",
                                          "cuda",           "attn_mask_type",  "qkv_format",     "cp_comm_type",
                                          "input_distribution", "inject", "gpu_backend", "device",
                                          "reference_digest"};
constexpr const char* kMetaNumberNames[] = {"seed", "a2a_size", "p2p_size", "causal", "softmax_scale",
                                            "pad_between_seqs"};
void read_attributes(hid_t file, const std::string& path, DumpContents& c) {
  hdf5::read_meta(file, path, kMetaTextNames, kMetaNumberNames, c.meta_text, c.meta_number);
  hdf5::QuietErrors quiet;
  Handle meta(H5Gopen2(file, "/meta", H5P_DEFAULT), H5Gclose);
  uint64_t seed = 0;
  if (meta.ok() && hdf5::read_u64_attribute(meta.get(), "seed", seed, path)) c.seed = seed;
}

/// A 1-D integer dataset `name` (absolute) if present, else empty.
std::vector<int64_t> read_optional_ints(hid_t file, const std::string& path, const std::string& name) {
  if (!hdf5::has_dataset(file, path, name)) return {};
  std::vector<hsize_t> dims;
  const std::vector<double> v = hdf5::read_dataset(file, path, name, dims);
  if (dims.size() != 1) io_fail(path, "dataset " + name + " is not 1-D", "write it as a 1-D int64 array");
  std::vector<int64_t> ints;
  ints.reserve(v.size());
  for (double x : v) ints.push_back(static_cast<int64_t>(x));
  return ints;
}

/// The ThdDumpLayout of a dump, when it has one (cu_seqlens_padded present): ranks read until one is missing.
ThdDumpLayout read_thd_layout(hid_t file, const std::string& path) {
  ThdDumpLayout thd;
  thd.cu_seqlens_padded = read_optional_ints(file, path, "/meta/cu_seqlens_padded");
  if (thd.empty()) return thd;
  thd.cu_seqlens = read_optional_ints(file, path, "/meta/cu_seqlens");
  for (size_t g = 0;; ++g) {
    const std::string tokens = "/meta/thd_tokens/" + rank_name(g);
    const std::string te = "/meta/thd_te_indices/" + rank_name(g);
    if (!hdf5::has_dataset(file, path, tokens) || !hdf5::has_dataset(file, path, te)) break;
    thd.rank_tokens.push_back(read_optional_ints(file, path, tokens));
    thd.te_indices.push_back(read_optional_ints(file, path, te));
  }
  return thd;
}

std::vector<size_t> tensor_indices(const std::vector<std::string>& tensors) {
  std::vector<size_t> idx;
  if (tensors.empty()) return {0, 1, 2, 3, 4};
  for (size_t i = 0; i < 5; ++i)
    if (std::find(tensors.begin(), tensors.end(), kMetricNames[i]) != tensors.end()) idx.push_back(i);
  return idx;
}

}  // namespace

const std::vector<std::string>& dump_tensor_names() {
  static const std::vector<std::string> names(std::begin(kMetricNames), std::end(kMetricNames));
  return names;
}

namespace {

/// Shape consistency of a read dump: every tensor of the same problem as /inputs/q (the `selected` outputs, and
/// /reference only `with_reference`). @throws InputError (io_fail) naming the dataset, its shape and the expected one.
void check_dump_shapes(const DumpContents& c, const std::string& path, const std::vector<size_t>& selected,
                       bool with_reference) {
  const HostTensor& q = c.inputs.q;
  auto expect = [&](const HostTensor& t, int64_t heads, int64_t width, const std::string& name) {
    if (t.batch() == q.batch() && t.rows() == q.rows() && t.heads() == heads && t.width() == width) return;
    const bool lse = width == 1;  // stored [b, h, s]
    auto shape = [lse](int64_t b, int64_t s, int64_t h, int64_t d) {
      return lse ? fmt::format("[{}, {}, {}]", b, h, s) : fmt::format("[{}, {}, {}, {}]", b, s, h, d);
    };
    io_fail(path,
            "dataset " + name + " is " + shape(t.batch(), t.rows(), t.heads(), t.width()) + " where /inputs/q " +
                fmt::format("[{}, {}, {}, {}]", q.batch(), q.rows(), q.heads(), q.width()) + " makes it " +
                shape(q.batch(), q.rows(), heads, width),
            "all tensors must describe the same [b, s] problem (lse as [b, h, s])");
  };
  const int64_t H = q.heads(), Hkv = c.inputs.k.heads(), dk = q.width(), dv = c.inputs.v.width();
  expect(c.inputs.k, Hkv, dk, "/inputs/k");
  expect(c.inputs.v, Hkv, dv, "/inputs/v");
  expect(c.inputs.dout, H, dv, "/inputs/do");
  const int64_t heads[] = {H, H, H, Hkv, Hkv}, widths[] = {dv, 1, dk, dk, dv};
  for (const AttentionOutputs* o : {&c.reference, &c.hcp}) {
    if (o == &c.reference && !with_reference) continue;
    const std::string g = o == &c.reference ? "/reference/" : "/hcp/";
    for (size_t i : selected) expect(*output_slot(*o, i), heads[i], widths[i], g + kTensorNames[i]);
  }
}

}  // namespace

DumpContents read_dump(const std::string& path, const std::vector<std::string>& tensors, bool with_reference) {
  const std::vector<size_t> selected = tensor_indices(tensors);
  hdf5::QuietErrors quiet;
  Handle file(hdf5::open_file(path, "dump", "pass a dump written by 'hcpsim verify --dump' or the README recipe"), H5Fclose);
  // A rank file of 'hcpsim shard' (it has /tokens) fails on its missing /reference with advice for dumps.
  if (hdf5::has_dataset(file.get(), path, "/tokens"))
    io_fail(path, "this is a rank file of 'hcpsim shard' (one CP rank's /inputs, /tokens and /outputs), not a dump",
            "give the dump it was cut from ('hcpsim verify --dump'), or put rank files back into a dump with "
            "'hcpsim gather DUMP RANK.h5... -o OUT.h5'");
  DumpContents c;
  read_attributes(file.get(), path, c);
  c.thd = read_thd_layout(file.get(), path);
  c.inputs.q = read_bshd(file.get(), path, "/inputs/q");
  c.inputs.k = read_bshd(file.get(), path, "/inputs/k");
  c.inputs.v = read_bshd(file.get(), path, "/inputs/v");
  c.inputs.dout = read_bshd(file.get(), path, "/inputs/do");
  // A whole group missing: leaving tensors out (compare --tensors) cannot help, so say what the file lacks.
  if (with_reference && !hdf5::has_dataset(file.get(), path, "/reference"))
    io_fail(path, "missing group /reference (the fp64 truth that a reference dump carries)",
            "write it (the README's 'HDF5 dump layout'); with 'hcpsim compare', give a dump of 'hcpsim verify "
            "--dump' first and your own file second (the file under test needs only /inputs and /hcp)");
  if (!hdf5::has_dataset(file.get(), path, "/hcp"))
    io_fail(path, "missing group /hcp (the context-parallel outputs: out, lse, dq, dk, dv)",
            "write them (the README's 'HDF5 dump layout'); a rank file of 'hcpsim shard' goes through 'hcpsim "
            "gather' first");
  for (size_t i : selected) {
    const std::string r = std::string("/reference/") + kTensorNames[i];
    const std::string h = std::string("/hcp/") + kTensorNames[i];
    for (const std::string& name : {r, h})
      if ((with_reference || name == h) && !hdf5::has_dataset(file.get(), path, name)) {
        std::string others;  // the example --tensors: every tensor but the missing one
        for (size_t j = 0; j < std::size(kMetricNames); ++j)
          if (j != i) others += (others.empty() ? "" : ",") + std::string(kMetricNames[j]);
        io_fail(path, "missing dataset " + name,
                std::string("write it (the README's 'HDF5 dump layout', e.g. with h5py; a rank file of 'hcpsim "
                            "shard' goes through 'hcpsim gather' first); 'hcpsim compare' can leave '") +
                    kMetricNames[i] + "' out (--tensors " + others +
                    "), while verify --reference, shard and gather need all five tensors");
      }
    if (with_reference) {
      HostTensor& t = *output_slot(c.reference, i);
      t = i == 1 ? read_lse(file.get(), path, r) : read_bshd(file.get(), path, r);
      const auto recorded = c.meta_text.find("reference_digest");
      if (recorded != c.meta_text.end()) {
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tensor_digest(t)));
        if (recorded_digest(recorded->second, kTensorNames[i]) != hex)
          io_fail(path,
                  r + " is not what was written: its values differ from the digest in /meta/reference_digest (the "
                      "file was edited or damaged after 'hcpsim verify --dump' wrote it)",
                  "write the dump again with 'hcpsim verify --dump'; if you replaced /reference on purpose, delete "
                  "the attribute /meta/reference_digest");
      }
    }
    *output_slot(c.hcp, i) = i == 1 ? read_lse(file.get(), path, h) : read_bshd(file.get(), path, h);
  }
  check_dump_shapes(c, path, selected, with_reference);
  const auto it = c.meta_text.find("dtype");
  if (it != c.meta_text.end()) {
    if (auto d = parse_dtype(it->second)) c.dtype = *d;
  }
  for (const char* m : kMetricNames) {
    const std::string g = std::string("/metrics/") + m;
    if (!hdf5::has_dataset(file.get(), path, g)) continue;
    TensorError e;
    e.tensor = m;
    Handle grp(H5Gopen2(file.get(), g.c_str(), H5P_DEFAULT), H5Gclose);
    auto get = [&](const char* an, double& v) { hdf5::read_number_attribute(grp.get(), an, v, path); };
    double pass = 0;
    get("max_abs_err", e.max_abs_err);
    get("max_rel_err", e.max_rel_err);
    get("rel_l2_err", e.rel_l2_err);
    get("tolerance", e.tolerance);
    get("pass", pass);
    e.pass = pass != 0;
    c.metrics.push_back(e);
  }
  return c;
}

double default_compare_tolerance(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp64: return 1e-10;
    case Dtype::fp32: return 1e-5;
    case Dtype::bf16: return kTeBf16Tolerance;
    case Dtype::fp16: return kTeFp16Tolerance;
  }
  return 1e-5;
}

namespace {

/// What the two dumps' /meta say about where their inputs came from, where they differ: "; seed 99 against 1234".
std::string input_origins(const DumpContents& a, const DumpContents& b) {
  std::string why;
  const auto seed = [](const DumpContents& d) -> std::optional<std::string> {
    if (d.seed) return std::to_string(*d.seed);
    const auto it = d.meta_number.find("seed");
    return it == d.meta_number.end() ? std::nullopt : std::optional<std::string>(fmt::format("{:.17g}", it->second));
  };
  if (const auto sa = seed(a), sb = seed(b); sa && sb && *sa != *sb) why += "; seed " + *sb + " against " + *sa;
  for (const char* key : {"dtype", "input_distribution"}) {
    const auto x = a.meta_text.find(key), y = b.meta_text.find(key);
    if (x != a.meta_text.end() && y != b.meta_text.end() && x->second != y->second)
      why += fmt::format("; {} {} against {}", key, y->second, x->second);
  }
  if (a.inputs.q.heads() != b.inputs.q.heads())
    why += fmt::format("; {} q heads against {} (oracle.heads)", b.inputs.q.heads(), a.inputs.q.heads());
  return why;
}

}  // namespace

DumpComparison compare_dumps(const DumpContents& a, const DumpContents& b, double rtol, double atol,
                             const std::string& a_path, const std::string& b_path,
                             const std::vector<std::string>& tensors) {
  auto same = [](const HostTensor& x, const HostTensor& y) { return x.same_shape(y) && x.values() == y.values(); };
  if (!same(a.inputs.q, b.inputs.q) || !same(a.inputs.k, b.inputs.k) || !same(a.inputs.v, b.inputs.v) ||
      !same(a.inputs.dout, b.inputs.dout))
    throw InputError(SourceLoc{b_path, 0, 0, {}}, "",
                     "its /inputs differ from those of '" + a_path + "' (not the same problem" + input_origins(a, b) +
                         ")",
                     "dump both runs from the same scenario, seed, dtype and oracle.heads, or copy /inputs of the "
                     "first file into your own");
  // Equal inputs do not make the same problem: the mask, the scale and the packed sequences decide the outputs
  // too. Compared where both files record them (a framework's own dump may record none).
  auto differs = [&](const std::string& what, const std::string& av, const std::string& bv) {
    throw InputError(SourceLoc{b_path, 0, 0, {}}, "",
                     fmt::format("its {} is {}, that of '{}' is {} (not the same problem: equal /inputs, other "
                                 "attention)",
                                 what, bv, a_path, av),
                     "dump both runs from the same scenario (mask, kv_channels / softmax scale, packed sequences)");
  };
  for (const char* key : {"attn_mask_type", "qkv_format"}) {
    const auto x = a.meta_text.find(key), y = b.meta_text.find(key);
    if (x != a.meta_text.end() && y != b.meta_text.end() && x->second != y->second)
      differs(std::string("/meta/") + key, x->second, y->second);
  }
  for (const char* key : {"causal", "softmax_scale"}) {
    const auto x = a.meta_number.find(key), y = b.meta_number.find(key);
    if (x != a.meta_number.end() && y != b.meta_number.end() &&
        std::abs(x->second - y->second) > 1e-12 * std::max(std::abs(x->second), std::abs(y->second)))
      differs(std::string("/meta/") + key, fmt::format("{:.17g}", x->second), fmt::format("{:.17g}", y->second));
  }
  auto join_ints = [](const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); };
  if (!a.thd.empty() && !b.thd.empty()) {
    if (a.thd.cu_seqlens != b.thd.cu_seqlens)
      differs("/meta/cu_seqlens", join_ints(a.thd.cu_seqlens), join_ints(b.thd.cu_seqlens));
    if (a.thd.cu_seqlens_padded != b.thd.cu_seqlens_padded)
      differs("/meta/cu_seqlens_padded", join_ints(a.thd.cu_seqlens_padded), join_ints(b.thd.cu_seqlens_padded));
  }
  DumpComparison r;
  r.rtol = rtol;
  r.atol = atol;
  r.pass = true;
  int64_t compared = 0;
  for (size_t i : tensor_indices(tensors)) {
    const HostTensor& x = *output_slot(b.hcp, i);
    const HostTensor& y = *output_slot(a.hcp, i);
    TensorError e = compare_tensor(kMetricNames[i], x, y, rtol);
    int64_t bad = 0;
    if (x.same_shape(y)) {
      for (int64_t k = 0; k < x.elements(); ++k) {
        const double xv = x.data()[k], yv = y.data()[k];
        if (xv == yv) continue;  // also equal infinities
        if (!std::isfinite(xv) || !std::isfinite(yv) || std::abs(xv - yv) > atol + rtol * std::abs(yv)) ++bad;
      }
    } else {
      bad = y.elements();
    }
    compared += y.elements();
    e.tolerance = rtol;
    e.pass = bad == 0;
    r.violations.push_back(bad);
    const TensorError vs_ref = compare_tensor(kMetricNames[i], x, *output_slot(a.reference, i), 1.0);
    r.b_vs_reference.push_back(vs_ref.rel_l2_err);
    r.pass = r.pass && e.pass;
    r.tensors.push_back(std::move(e));
  }
  if (compared == 0)
    throw InputError(SourceLoc{a_path, 0, 0, {}}, "", "nothing to compare: every compared tensor of /hcp has 0 elements",
                     "dump a run with model.seq_length > 0 and at least one head; a comparison of no values proves "
                     "nothing");
  return r;
}

void skip_hdf5_shutdown_at_exit() { H5dont_atexit(); }

}  // namespace hcpsim
