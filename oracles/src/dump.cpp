#include "hcpsim/oracles/dump.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

// HDF5 only in this translation unit; 1.10 C API (Debian 12 ships 1.10.8, default API mapping v18: only
// 1.8/1.10-compatible calls are used here). The library is thread-safe but serialises: dumps run on one thread.
#include <hdf5.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/core/input_file.hpp"
#include "hcpsim/io/output_file.hpp"

namespace hcpsim {

namespace {

[[noreturn]] void io_fail(const std::string& path, const std::string& problem, const std::string& fix) {
  throw InputError(SourceLoc{path, 0, 0, {}}, "", problem, fix);  // the location already names the file
}

/// Owns one hid_t and closes it with the matching H5*close.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  [[nodiscard]] hid_t get() const { return id_; }
  [[nodiscard]] bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

/// Silences HDF5's automatic error-stack printing while alive (errors become InputError instead).
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

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

class Writer {
 public:
  Writer(const std::string& path, hid_t file) : path_(path), file_(file) {
    gcpl_ = H5Pcreate(H5P_GROUP_CREATE);
    dcpl_ = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(gcpl_, false);
    H5Pset_obj_track_times(dcpl_, false);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    H5Pclose(gcpl_);
    H5Pclose(dcpl_);
  }

  hid_t group(const std::string& name) {
    const hid_t g = H5Gcreate2(file_, name.c_str(), H5P_DEFAULT, gcpl_, H5P_DEFAULT);
    check(g >= 0, "create group " + name);
    groups_.push_back(g);
    return g;
  }

  /// Writes `t` [b, s, h, w] as a bshd dataset, or an lse tensor [b, s, h, 1] as [b, h, s].
  void dataset(hid_t loc, const std::string& name, const HostTensor& t, bool as_float64, bool lse) {
    if (std::find(omit.begin(), omit.end(), group_name(loc) + "/" + name) != omit.end()) return;
    std::vector<hsize_t> dims;
    std::vector<double> values;
    if (lse) {
      dims = {static_cast<hsize_t>(t.batch()), static_cast<hsize_t>(t.heads()), static_cast<hsize_t>(t.rows())};
      values.reserve(static_cast<size_t>(t.elements()));
      for (int64_t b = 0; b < t.batch(); ++b)
        for (int64_t h = 0; h < t.heads(); ++h)
          for (int64_t s = 0; s < t.rows(); ++s) values.push_back(t(b, s, h, 0));
    } else {
      dims = {static_cast<hsize_t>(t.batch()), static_cast<hsize_t>(t.rows()), static_cast<hsize_t>(t.heads()),
              static_cast<hsize_t>(t.width())};
      values = t.values();
    }
    Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
    check(space.ok(), "dataspace of " + name);
    const hid_t type = as_float64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE;
    Handle ds(H5Dcreate2(loc, name.c_str(), type, space.get(), H5P_DEFAULT, dcpl_, H5P_DEFAULT), H5Dclose);
    check(ds.ok(), "create dataset " + name);
    herr_t st = 0;
    if (as_float64) {
      st = H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    } else {
      std::vector<float> f(values.size());
      for (size_t i = 0; i < values.size(); ++i) f[i] = static_cast<float>(values[i]);  // exact for fp32/bf16/fp16
      st = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, f.data());
    }
    check(st >= 0, "write dataset " + name);
  }

  void attr(hid_t loc, const std::string& name, const std::string& value) {
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), std::max<size_t>(1, value.size()));
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle a(H5Acreate2(loc, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    check(a.ok(), "create attribute " + name);
    const std::string padded = value.empty() ? std::string(1, '\0') : value;
    check(H5Awrite(a.get(), type.get(), padded.data()) >= 0, "write attribute " + name);
  }

  void attr(hid_t loc, const std::string& name, double value) {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle a(H5Acreate2(loc, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    check(a.ok(), "create attribute " + name);
    check(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &value) >= 0, "write attribute " + name);
  }

  /// Absolute name of an open group.
  static std::string group_name(hid_t loc) {
    char buf[256] = {0};
    H5Iget_name(loc, buf, sizeof(buf));
    return buf;
  }

  std::vector<std::string> omit;  ///< absolute dataset paths not to write

  void close_groups() {
    for (hid_t g : groups_) H5Gclose(g);
    groups_.clear();
  }

  void check(bool ok, const std::string& what) const {
    if (!ok) io_fail(path_, "HDF5 error while writing (" + what + ")", "check free space and permissions");
  }

 private:
  std::string path_;
  hid_t file_;
  hid_t gcpl_ = -1, dcpl_ = -1;
  std::vector<hid_t> groups_;
};

}  // namespace

void write_dump(const std::string& path, const DumpContents& c, const std::vector<std::string>& omit) {
  const OutputTarget target = classify_output(path);
  if (target.kind != OutputKind::absent && target.kind != OutputKind::regular)
    throw InputError(SourceLoc{path, 0, 0, ""}, "--dump",
                     "will not write the dump to '" + path + "' (" +
                         (target.reason.empty() ? to_string(target.kind) : target.reason) +
                         "): an HDF5 dump is a regular file",
                     "give the path of a regular file");
  // Created exclusively next to the (symlink-resolved) target; HDF5 then truncates our own empty file.
  const std::string tmp = create_output_temp(target.path, "dump", "--dump");
  QuietErrors quiet;
  {
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    H5Pset_obj_track_times(fcpl.get(), false);  // the root group
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), H5Fclose);
    if (!file.ok()) {
      discard_output_temp(tmp);
      throw InputError(SourceLoc{}, "--dump", "cannot create '" + tmp + "'", "check that the directory exists");
    }
    try {
      Writer w(path, file.get());
      w.omit = omit;
      const bool f64 = c.dtype == Dtype::fp64;
      const hid_t meta = w.group("/meta");
      for (const auto& [k, v] : c.meta_text) w.attr(meta, k, v);
      for (const auto& [k, v] : c.meta_number) w.attr(meta, k, v);
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
      const hid_t metrics = w.group("/metrics");
      for (const TensorError& e : c.metrics) {
        const hid_t g = w.group("/metrics/" + e.tensor);
        w.attr(g, "max_abs_err", e.max_abs_err);
        w.attr(g, "max_rel_err", e.max_rel_err);
        w.attr(g, "rel_l2_err", e.rel_l2_err);
        w.attr(g, "tolerance", e.tolerance);
        w.attr(g, "pass", e.pass ? 1.0 : 0.0);
      }
      (void)metrics;
      w.close_groups();
    } catch (...) {
      discard_output_temp(tmp);
      throw;
    }
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) {
      discard_output_temp(tmp);
      io_fail(path, "HDF5 flush failed", "check free space");
    }
  }
  commit_output_file(tmp, path, "dump", "--dump");
}

namespace {

/// Largest dataset read_dump accepts: 2^34 elements (128 GiB as doubles), far beyond any oracle run.
constexpr hsize_t kMaxDatasetElements = hsize_t{1} << 34;

/// Reads dataset `name` (absolute) as doubles with its dims; throws InputError naming it when absent.
std::vector<double> read_dataset(hid_t file, const std::string& path, const std::string& name,
                                 std::vector<hsize_t>& dims) {
  if (H5Lexists(file, name.substr(0, name.rfind('/')).c_str(), H5P_DEFAULT) <= 0 ||
      H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0)
    io_fail(path, "missing dataset " + name,
            "write every dataset of the layout in the README ('HDF5 dump layout'), e.g. with h5py");
  Handle ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) io_fail(path, "cannot open dataset " + name, "the file may be truncated or corrupt; rewrite it");
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > 4) io_fail(path, "dataset " + name + " has rank " + std::to_string(rank), "use the layout's shapes");
  dims.assign(static_cast<size_t>(rank), 0);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  // Structural check before any allocation: a corrupt header can claim absurd sizes (found by fuzzing).
  hsize_t n = 1;
  for (hsize_t d : dims) {
    if (d != 0 && n > kMaxDatasetElements / d)
      io_fail(path, "dataset " + name + " claims more than 2^34 elements", "the file is corrupt; rewrite it");
    n *= d;
  }
  std::error_code size_ec;
  const auto file_bytes = static_cast<hsize_t>(std::filesystem::file_size(path, size_ec));
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
  if (!type.ok() || !dcpl.ok()) io_fail(path, "cannot read the type of dataset " + name, "the file is corrupt; rewrite it");
  const hsize_t element_bytes = H5Tget_size(type.get());
  const bool unfiltered = H5Pget_nfilters(dcpl.get()) == 0;
  if (!size_ec && (H5Dget_storage_size(ds.get()) > file_bytes ||
                   (unfiltered && element_bytes > 0 && n > file_bytes / element_bytes)))
    io_fail(path, "dataset " + name + " claims " + std::to_string(n) + " elements but the file has only " +
                      std::to_string(file_bytes) + " bytes",
            "the file is truncated or corrupt; rewrite it");
  std::vector<double> values(static_cast<size_t>(n));
  if (H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0)
    io_fail(path, "cannot read dataset " + name, "the file may be truncated or corrupt; rewrite it");
  return values;
}

HostTensor read_bshd(hid_t file, const std::string& path, const std::string& name) {
  std::vector<hsize_t> d;
  std::vector<double> v = read_dataset(file, path, name, d);
  if (d.size() != 4) io_fail(path, "dataset " + name + " must be 4-D [b, s, h, d]", "store tensors in bshd order");
  HostTensor t(static_cast<int64_t>(d[0]), static_cast<int64_t>(d[1]), static_cast<int64_t>(d[2]),
               static_cast<int64_t>(d[3]));
  t.values() = std::move(v);
  return t;
}

HostTensor read_lse(hid_t file, const std::string& path, const std::string& name) {
  std::vector<hsize_t> d;
  std::vector<double> v = read_dataset(file, path, name, d);
  if (d.size() != 3) io_fail(path, "dataset " + name + " must be 3-D [b, h, s]", "store softmax_lse as [b, h, s]");
  const auto B = static_cast<int64_t>(d[0]), H = static_cast<int64_t>(d[1]), S = static_cast<int64_t>(d[2]);
  HostTensor t(B, S, H, 1);
  size_t i = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) t(b, s, h, 0) = v[i++];
  return t;
}

/// The /meta attributes hcpsim writes and reads. They are opened by name: opening by index makes Debian's
/// libhdf5 1.10.8 build the whole attribute table, which crashes inside the library on some corrupt files
/// (found by fuzzing, docs/robustness.md).
constexpr const char* kMetaTextNames[] = {"scenario_yaml", "dtype", "backend", "hcpsim_version", "x86_level",
                                          "attn_mask_type", "qkv_format", "cp_comm_type", "input_distribution",
                                          "inject"};
constexpr const char* kMetaNumberNames[] = {"seed", "a2a_size", "p2p_size", "causal", "softmax_scale"};
/// Longest string attribute read (the scenario YAML text); a larger size means a corrupt type.
constexpr size_t kMaxAttributeBytes = size_t{16} << 20;

void read_attributes(hid_t file, DumpContents& c) {
  if (H5Lexists(file, "/meta", H5P_DEFAULT) <= 0) return;
  Handle meta(H5Gopen2(file, "/meta", H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) return;
  auto open = [&](const char* name) {
    return H5Aexists(meta.get(), name) > 0 ? H5Aopen(meta.get(), name, H5P_DEFAULT) : hid_t{-1};
  };
  for (const char* name : kMetaTextNames) {
    Handle a(open(name), H5Aclose);
    if (!a.ok()) continue;
    Handle type(H5Aget_type(a.get()), H5Tclose);
    if (!type.ok() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) continue;
    const size_t size = H5Tget_size(type.get());
    if (size == 0 || size > kMaxAttributeBytes) continue;
    std::string value(size, '\0');
    if (H5Aread(a.get(), type.get(), value.data()) >= 0) {
      value.resize(std::strlen(value.c_str()));
      c.meta_text[name] = value;
    }
  }
  for (const char* name : kMetaNumberNames) {
    Handle a(open(name), H5Aclose);
    if (!a.ok()) continue;
    Handle type(H5Aget_type(a.get()), H5Tclose);
    Handle space(H5Aget_space(a.get()), H5Sclose);
    if (!type.ok() || !space.ok() || H5Sget_simple_extent_npoints(space.get()) != 1) continue;
    const auto cls = H5Tget_class(type.get());
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) continue;
    double v = 0;
    if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) >= 0) c.meta_number[name] = v;
  }
}

}  // namespace

DumpContents read_dump(const std::string& path) {
  QuietErrors quiet;
  if (!std::filesystem::exists(path)) io_fail(path, "no such file", "check the path");
  note_input_file(path);  // no output of this command may replace it
  if (H5Fis_hdf5(path.c_str()) <= 0)
    io_fail(path, "not an HDF5 file (or truncated)", "pass a dump written by 'hcpsim verify --dump' or the README recipe");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) io_fail(path, "cannot open the HDF5 file (truncated or corrupt)", "rewrite the dump");
  DumpContents c;
  read_attributes(file.get(), c);
  c.inputs.q = read_bshd(file.get(), path, "/inputs/q");
  c.inputs.k = read_bshd(file.get(), path, "/inputs/k");
  c.inputs.v = read_bshd(file.get(), path, "/inputs/v");
  c.inputs.dout = read_bshd(file.get(), path, "/inputs/do");
  for (size_t i = 0; i < 5; ++i) {
    const std::string r = std::string("/reference/") + kTensorNames[i];
    const std::string h = std::string("/hcp/") + kTensorNames[i];
    *output_slot(c.reference, i) = i == 1 ? read_lse(file.get(), path, r) : read_bshd(file.get(), path, r);
    *output_slot(c.hcp, i) = i == 1 ? read_lse(file.get(), path, h) : read_bshd(file.get(), path, h);
  }
  // Shape consistency: every tensor of the same problem.
  const HostTensor& q = c.inputs.q;
  auto expect = [&](const HostTensor& t, int64_t heads, int64_t width, const std::string& name) {
    if (t.batch() != q.batch() || t.rows() != q.rows() || t.heads() != heads || t.width() != width)
      io_fail(path, "dataset " + name + " has a shape inconsistent with /inputs/q",
              "all tensors must describe the same [b, s] problem (lse as [b, h, s])");
  };
  const int64_t H = q.heads(), Hkv = c.inputs.k.heads(), dk = q.width(), dv = c.inputs.v.width();
  expect(c.inputs.k, Hkv, dk, "/inputs/k");
  expect(c.inputs.v, Hkv, dv, "/inputs/v");
  expect(c.inputs.dout, H, dv, "/inputs/do");
  for (const AttentionOutputs* o : {&c.reference, &c.hcp}) {
    const std::string g = o == &c.reference ? "/reference/" : "/hcp/";
    expect(o->out, H, dv, g + "out");
    expect(o->softmax_lse, H, 1, g + "lse");
    expect(o->dq, H, dk, g + "dq");
    expect(o->dk, Hkv, dk, g + "dk");
    expect(o->dv, Hkv, dv, g + "dv");
  }
  const auto it = c.meta_text.find("dtype");
  if (it != c.meta_text.end()) {
    if (auto d = parse_dtype(it->second)) c.dtype = *d;
  }
  for (const char* m : kMetricNames) {
    const std::string g = std::string("/metrics/") + m;
    if (H5Lexists(file.get(), "/metrics", H5P_DEFAULT) <= 0 || H5Lexists(file.get(), g.c_str(), H5P_DEFAULT) <= 0)
      continue;
    TensorError e;
    e.tensor = m;
    Handle grp(H5Gopen2(file.get(), g.c_str(), H5P_DEFAULT), H5Gclose);
    auto get = [&](const char* an, double& v) {
      if (H5Aexists(grp.get(), an) <= 0) return;
      Handle a(H5Aopen(grp.get(), an, H5P_DEFAULT), H5Aclose);
      H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v);
    };
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

DumpComparison compare_dumps(const DumpContents& a, const DumpContents& b, double rtol, double atol,
                             const std::string& a_path, const std::string& b_path) {
  const AttentionInputs* ins[] = {&a.inputs, &b.inputs};
  (void)ins;
  auto same = [](const HostTensor& x, const HostTensor& y) { return x.same_shape(y) && x.values() == y.values(); };
  if (!same(a.inputs.q, b.inputs.q) || !same(a.inputs.k, b.inputs.k) || !same(a.inputs.v, b.inputs.v) ||
      !same(a.inputs.dout, b.inputs.dout))
    throw InputError(SourceLoc{b_path, 0, 0, {}}, b_path,
                     "its /inputs differ from those of '" + a_path + "' (not the same problem)",
                     "dump both runs from the same scenario, seed, dtype and oracle.heads, or copy /inputs of the "
                     "first file into your own");
  DumpComparison r;
  r.rtol = rtol;
  r.atol = atol;
  r.pass = true;
  for (size_t i = 0; i < 5; ++i) {
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
    e.tolerance = rtol;
    e.pass = bad == 0;
    r.violations.push_back(bad);
    const TensorError vs_ref = compare_tensor(kMetricNames[i], x, *output_slot(a.reference, i), 1.0);
    r.b_vs_reference.push_back(vs_ref.rel_l2_err);
    r.pass = r.pass && e.pass;
    r.tensors.push_back(std::move(e));
  }
  return r;
}

}  // namespace hcpsim
