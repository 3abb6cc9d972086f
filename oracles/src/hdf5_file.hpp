#pragma once
// HDF5 helpers of the dump files (dump.cpp, rank_file.cpp): handles, quiet error stacks, the writer and the
// dataset readers. HDF5 only in these translation units; 1.10 C API (Debian 12 ships 1.10.8, default API mapping
// v18: only 1.8/1.10-compatible calls are used here). The library is thread-safe but serialises: dumps run on one
// thread.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include <hdf5.h>

#include "hcpsim/core/error.hpp"
#include "hcpsim/oracles/host_tensor.hpp"

namespace hcpsim::hdf5 {

[[noreturn]] inline void io_fail(const std::string& path, const std::string& problem, const std::string& fix) {
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
  /// Closes the handle now (nothing happens at destruction); returns the close's status.
  herr_t reset() {
    const herr_t st = id_ >= 0 ? close_(id_) : 0;
    id_ = -1;
    return st;
  }

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

class Writer {
 public:
  Writer(const std::string& path, hid_t file) : path_(path), file_(file) {
    gcpl_ = H5Pcreate(H5P_GROUP_CREATE);
    dcpl_ = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(gcpl_, false);
    meta_gcpl_ = H5Pcopy(gcpl_);
    // Dense attribute storage: a compact attribute must fit 64 KiB, and the effective scenario YAML of a preset
    // with its efficiency tables is already ~45 KB.
    H5Pset_attr_phase_change(meta_gcpl_, 0, 0);
    H5Pset_obj_track_times(dcpl_, false);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    close_groups();  // also on an error path: an open group would keep the file open past its removal
    H5Pclose(gcpl_);
    H5Pclose(meta_gcpl_);
    H5Pclose(dcpl_);
  }

  hid_t group(const std::string& name) {
    const hid_t g = H5Gcreate2(file_, name.c_str(), H5P_DEFAULT, name == "/meta" ? meta_gcpl_ : gcpl_, H5P_DEFAULT);
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

  /// Writes `v` as a 1-D int64 dataset (a rank file's token positions).
  void int_dataset(hid_t loc, const std::string& name, const std::vector<int64_t>& v) {
    const hsize_t n = v.size();
    Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    check(space.ok(), "dataspace of " + name);
    Handle ds(H5Dcreate2(loc, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, dcpl_, H5P_DEFAULT), H5Dclose);
    check(ds.ok(), "create dataset " + name);
    check(H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, "write dataset " + name);
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

  /// A numeric attribute: a 64-bit integer for the counts, ranks, flags and the seed (integer_attribute) when the
  /// value is a whole number, so that h5py hands a framework an int it can index with; float64 otherwise.
  void attr(hid_t loc, const std::string& name, double value) {
    const bool whole = integer_attribute(name) && std::isfinite(value) && std::trunc(value) == value &&
                       std::abs(value) < 9.2e18;
    const auto v = static_cast<int64_t>(whole ? value : 0);
    if (whole) scalar_attr(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
    else scalar_attr(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
  }

  /// An unsigned 64-bit integer attribute (the input seed, exact for any value).
  void attr_u64(hid_t loc, const std::string& name, uint64_t value) {
    scalar_attr(loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
  }

  /// A scalar attribute stored as `file_type`, written from `value` of `memory_type`.
  void scalar_attr(hid_t loc, const std::string& name, hid_t file_type, hid_t memory_type, const void* value) {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Handle a(H5Acreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    check(a.ok(), "create attribute " + name);
    check(H5Awrite(a.get(), memory_type, value) >= 0, "write attribute " + name);
  }

  /// The numeric attributes hcpsim writes that are integers (everything but softmax_scale): sizes, ranks, the
  /// row offset of a head range, flags and the input seed.
  static bool integer_attribute(const std::string& name) {
    for (const char* n : {"seed", "a2a_size", "p2p_size", "cp_rank", "cp_size", "causal", "pad_between_seqs",
                          "head_begin", "tp_rank", "tp_size"})
      if (name == n) return true;
    return false;
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
  hid_t gcpl_ = -1, meta_gcpl_ = -1, dcpl_ = -1;
  std::vector<hid_t> groups_;
};

/// Creates `path` (temporary name + rename, object times off so the same content gives the same bytes) and lets
/// `body` fill it. On any failure nothing is left under `path` that was not there before.
/// @throws InputError (key `option`) when the file cannot be created or written.
void write_file(const std::string& path, const std::string& what, const std::string& option,
                const std::function<void(Writer&)>& body);

/// Opens `path` read-only after checking that it exists and is HDF5.
/// @throws InputError located at `path` otherwise, with `fix` as the fix for a file that is not HDF5 (`what`
///   names the file kind, e.g. "dump").
hid_t open_file(const std::string& path, const std::string& what, const std::string& fix);

/// Whether the absolute object `name` (e.g. "/hcp/lse") exists, every link on its way checked before it is
/// followed: only hard links are accepted, so nothing outside the file is ever opened.
/// @throws InputError located at `path` for a soft or external link on the way (naming the link).
bool has_dataset(hid_t file, const std::string& path, const std::string& name);

/// Reads the string attributes `text_names` and the numeric ones `number_names` of /meta that exist (each opened by
/// name); attributes of another type class or shape are skipped. No /meta: nothing read.
/// @throws InputError located at `path` for a string attribute declaring more than 16 MiB or more bytes than the
///   file holds, or a /meta reached through a soft or external link.
void read_meta(hid_t file, const std::string& path, std::span<const char* const> text_names,
               std::span<const char* const> number_names, std::map<std::string, std::string>& text,
               std::map<std::string, double>& numbers);

/// Reads the scalar numeric attribute `name` of object `obj` into `value`; false (value untouched) when it is
/// absent or not one integer or float of at most 8 bytes. @throws InputError naming `path` (the file) when HDF5
/// cannot read the attribute storage (a corrupt file): that is not absence.
bool read_number_attribute(hid_t obj, const char* name, double& value, const std::string& path);

/// Reads the scalar integer attribute `name` of `obj` exactly as a uint64 (a non-negative integer of at most 8
/// bytes); false (value untouched) when it is absent, not an integer, negative or not scalar. @throws InputError
/// naming `path` when the attribute storage cannot be read.
bool read_u64_attribute(hid_t obj, const char* name, uint64_t& value, const std::string& path);

/// Whether the object at absolute path `name` (which must exist) is a group. @throws InputError naming `path`
/// (corrupt) when it cannot be opened.
bool is_group(hid_t file, const std::string& name, const std::string& path);

/// Throws the InputError of a file whose `object` (a group, link or attribute) HDF5 cannot read: corrupt.
[[noreturn]] void corrupt_object(const std::string& path, const std::string& object);

/// Reads dataset `name` (absolute) as doubles with its dims, after checking that its data lies in the file itself
/// and is all stored: no external storage, no virtual layout, no filter pipeline (hcpsim writes none), an integer or
/// float type of at most 8 bytes, and a declared size (dims product × element size) within the file and within the
/// bytes actually stored (no fill values stand in for data).
/// @throws InputError naming the dataset when it is absent or any check fails.
std::vector<double> read_dataset(hid_t file, const std::string& path, const std::string& name,
                                 std::vector<hsize_t>& dims);
/// Reads a 4-D [b, s, h, d] dataset.
HostTensor read_bshd(hid_t file, const std::string& path, const std::string& name);
/// Reads a 3-D [b, h, s] softmax_lse dataset into a [b, s, h, 1] tensor.
HostTensor read_lse(hid_t file, const std::string& path, const std::string& name);

}  // namespace hcpsim::hdf5
