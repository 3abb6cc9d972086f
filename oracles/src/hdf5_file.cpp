#include "hdf5_file.hpp"

#include <cstring>
#include <filesystem>

#include "hcpsim/core/input_file.hpp"
#include "hcpsim/io/output_file.hpp"

namespace hcpsim::hdf5 {

void write_file(const std::string& path, const std::string& what, const std::string& option,
                const std::function<void(Writer&)>& body) {
  const OutputTarget target = classify_output(path);
  if (target.kind != OutputKind::absent && target.kind != OutputKind::regular)
    throw InputError(SourceLoc{path, 0, 0, ""}, option,
                     "will not write the " + what + " to '" + path + "' (" +
                         (target.reason.empty() ? to_string(target.kind) : target.reason) + "): an HDF5 " + what +
                         " is a regular file",
                     "give the path of a regular file");
  // Created exclusively next to the (symlink-resolved) target; HDF5 then truncates our own empty file.
  const std::string tmp = create_output_temp(target.path, what, option);
  QuietErrors quiet;
  {
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    H5Pset_obj_track_times(fcpl.get(), false);  // the root group
    // The 1.8 file format: the oldest with dense attribute storage (/meta, Writer::group), read by every h5py.
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
    if (!file.ok()) {
      discard_output_temp(tmp);
      throw InputError(SourceLoc{}, option, "cannot create '" + tmp + "'", "check that the directory exists");
    }
    try {
      Writer w(path, file.get());
      body(w);
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
  commit_output_file(tmp, path, what, option);
}

hid_t open_file(const std::string& path, const std::string& what, const std::string& fix) {
  if (!std::filesystem::exists(path)) io_fail(path, "no such file", "check the path");
  note_input_file(path);  // no output of this command may replace it
  if (H5Fis_hdf5(path.c_str()) <= 0) io_fail(path, "not an HDF5 file (or truncated)", fix);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) io_fail(path, "cannot open the HDF5 file (truncated or corrupt)", "rewrite the " + what);
  return file;
}

bool has_dataset(hid_t file, const std::string& name) {
  const std::string group = name.substr(0, name.rfind('/'));
  return (group.empty() || H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0) &&
         H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0;
}

/// Largest dataset read_dump accepts: 2^34 elements (128 GiB as doubles), far beyond any oracle run.
constexpr hsize_t kMaxDatasetElements = hsize_t{1} << 34;

/// Reads dataset `name` (absolute) as doubles with its dims; throws InputError naming it when absent.
std::vector<double> read_dataset(hid_t file, const std::string& path, const std::string& name,
                                 std::vector<hsize_t>& dims) {
  if (!has_dataset(file, name))
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


/// Longest string attribute read (the scenario YAML text); a larger size means a corrupt type.
constexpr size_t kMaxAttributeBytes = size_t{16} << 20;

void read_meta(hid_t file, std::span<const char* const> text_names, std::span<const char* const> number_names,
               std::map<std::string, std::string>& text, std::map<std::string, double>& numbers) {
  if (H5Lexists(file, "/meta", H5P_DEFAULT) <= 0) return;
  Handle meta(H5Gopen2(file, "/meta", H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) return;
  auto open = [&](const char* name) {
    return H5Aexists(meta.get(), name) > 0 ? H5Aopen(meta.get(), name, H5P_DEFAULT) : hid_t{-1};
  };
  for (const char* name : text_names) {
    Handle a(open(name), H5Aclose);
    if (!a.ok()) continue;
    Handle type(H5Aget_type(a.get()), H5Tclose);
    if (!type.ok() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) continue;
    const size_t size = H5Tget_size(type.get());
    if (size == 0 || size > kMaxAttributeBytes) continue;
    std::string value(size, '\0');
    if (H5Aread(a.get(), type.get(), value.data()) >= 0) {
      value.resize(std::strlen(value.c_str()));
      text[name] = value;
    }
  }
  for (const char* name : number_names) {
    Handle a(open(name), H5Aclose);
    if (!a.ok()) continue;
    Handle type(H5Aget_type(a.get()), H5Tclose);
    Handle space(H5Aget_space(a.get()), H5Sclose);
    if (!type.ok() || !space.ok() || H5Sget_simple_extent_npoints(space.get()) != 1) continue;
    const auto cls = H5Tget_class(type.get());
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) continue;
    double v = 0;
    if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) >= 0) numbers[name] = v;
  }
}

}  // namespace hcpsim::hdf5
