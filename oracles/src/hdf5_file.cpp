#include "hdf5_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <initializer_list>

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
    // On a failed write (a full disk) the library still flushes metadata when the file is closed; a failed close
    // leaves the file in its table and the library crashes at exit. Truncating our own temporary first frees its
    // space, so the close succeeds, and the temporary is removed after it.
    auto abandon = [&] {
      std::error_code ec;
      std::filesystem::resize_file(tmp, 0, ec);
      file.reset();
      discard_output_temp(tmp);
    };
    try {
      Writer w(path, file.get());
      body(w);
      w.close_groups();
    } catch (...) {
      abandon();
      throw;
    }
    if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) {
      abandon();
      io_fail(path, "HDF5 flush failed", "check free space");
    }
  }
  commit_output_file(tmp, path, what, option);
}

hid_t open_file(const std::string& path, const std::string& what, const std::string& fix) {
  if (!std::filesystem::exists(path)) io_fail(path, "no such file", "check the path");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    io_fail(path, "a directory, not an HDF5 file", "give the path of the " + what);
  note_input_file(path);  // no output of this command may replace it
  if (H5Fis_hdf5(path.c_str()) <= 0) io_fail(path, "not an HDF5 file (or truncated)", fix);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) io_fail(path, "cannot open the HDF5 file (truncated or corrupt)", "rewrite the " + what);
  return file;
}

void corrupt_object(const std::string& path, const std::string& object) {
  io_fail(path, "cannot read " + object + " (a damaged object header or attribute)",
          "the file is corrupt; make it again with the command that wrote it");
}

bool is_group(hid_t file, const std::string& name, const std::string& path) {
  Handle obj(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.ok()) corrupt_object(path, name);  // it exists (a hard link to it): an object that cannot open is damaged
  return H5Iget_type(obj.get()) == H5I_GROUP;
}


bool has_dataset(hid_t file, const std::string& path, const std::string& name) {
  // Component by component: H5Lexists on "/a/b" would already follow a soft or external link at "/a".
  for (size_t slash = name.find('/', 1);; slash = name.find('/', slash + 1)) {
    const std::string prefix = name.substr(0, slash);
    // < 0 is HDF5 failing to read the group that would hold the link (a damaged object header), not absence.
    const htri_t exists = H5Lexists(file, prefix.c_str(), H5P_DEFAULT);
    if (exists < 0) corrupt_object(path, prefix);
    if (exists == 0) return false;
    H5L_info_t info{};
    if (H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) < 0) corrupt_object(path, prefix);
    if (info.type != H5L_TYPE_HARD)
      io_fail(path, std::string(info.type == H5L_TYPE_EXTERNAL ? "external" : "soft") + " link " + prefix +
                        ": hcpsim follows only hard links, so that nothing outside the file is read",
              "store the object itself in the file (h5py: copy it in instead of linking)");
    if (slash == std::string::npos) return true;
    // A component with more below it must be a group: H5Lexists of "/hcp/out" fails (< 0) when /hcp is a dataset.
    if (!is_group(file, prefix, path))
      io_fail(path, prefix + " is not a group, so it holds no " + name,
              "write " + prefix + " as a group (the README's 'HDF5 dump layout')");
  }
}

namespace {

/// Largest dataset read_dump accepts: 2^34 elements (128 GiB as doubles), far beyond any oracle run.
constexpr hsize_t kMaxDatasetElements = hsize_t{1} << 34;

/// Size of the file at `path` in bytes; the bound of every declared size in it.
hsize_t file_bytes(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  if (ec) io_fail(path, "cannot read the size of the file (" + ec.message() + ")", "check the path");
  return static_cast<hsize_t>(n);
}

/// Refuses a dataset whose data would come from outside the file, through a filter, or from fill values.
void check_storage(hid_t ds, const std::string& path, const std::string& name, hsize_t n) {
  Handle type(H5Dget_type(ds), H5Tclose);
  Handle dcpl(H5Dget_create_plist(ds), H5Pclose);
  if (!type.ok() || !dcpl.ok()) io_fail(path, "cannot read the type of dataset " + name, "the file is corrupt; rewrite it");
  const std::string rewrite = "rewrite the dataset as plain contiguous data in the file (h5py: create_dataset(name, "
                              "data=...) without compression, external= or a virtual layout)";
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL)
    io_fail(path, "dataset " + name + " is a virtual dataset (its data lives in other files)", rewrite);
  if (H5Pget_external_count(dcpl.get()) != 0)
    io_fail(path, "dataset " + name + " has external storage (its data lives in another file)", rewrite);
  if (H5Pget_nfilters(dcpl.get()) != 0)
    io_fail(path, "dataset " + name + " uses a filter pipeline (compression, shuffle, checksum); hcpsim writes and "
                  "reads only unfiltered data", rewrite);
  const H5T_class_t cls = H5Tget_class(type.get());
  const size_t element_bytes = H5Tget_size(type.get());
  if ((cls != H5T_FLOAT && cls != H5T_INTEGER) || element_bytes == 0 || element_bytes > 8)
    io_fail(path, "dataset " + name + " is not of an integer or float type of at most 8 bytes",
            "store the tensors as float32 or float64");
  const hsize_t bytes = file_bytes(path);
  if (n > bytes / element_bytes)
    io_fail(path, "dataset " + name + " claims " + std::to_string(n) + " elements but the file has only " +
                      std::to_string(bytes) + " bytes",
            "the file is truncated or corrupt; rewrite it");
  // Every byte of data must be stored: chunks never written read as fill values, which lets a small file declare
  // gigabytes.
  const hsize_t stored = H5Dget_storage_size(ds);
  if (stored > bytes || stored < n * element_bytes)
    io_fail(path, "dataset " + name + " declares " + std::to_string(n * element_bytes) + " bytes of data but stores " +
                      std::to_string(stored) + " (unwritten data would be fill values)",
            "write every element of the dataset");
}

}  // namespace

std::vector<double> read_dataset(hid_t file, const std::string& path, const std::string& name,
                                 std::vector<hsize_t>& dims) {
  if (!has_dataset(file, path, name))
    io_fail(path, "missing dataset " + name,
            "write every dataset of the layout in the README ('HDF5 dump layout'), e.g. with h5py");
  Handle ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) io_fail(path, "cannot open dataset " + name, "the file may be truncated or corrupt; rewrite it");
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
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
  check_storage(ds.get(), path, name, n);
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


/// Longest string attribute read (the scenario YAML text); a larger size means a corrupt or hostile file.
constexpr size_t kMaxAttributeBytes = size_t{16} << 20;

namespace {

/// Whether attribute `name` of `obj` exists, opened (by name, never by index) into `out`. @throws InputError
/// naming `path` when HDF5 cannot tell (a damaged attribute storage) or cannot open an attribute it lists.
bool open_attribute(hid_t obj, const char* name, hid_t& out, const std::string& path) {
  const htri_t exists = H5Aexists(obj, name);
  if (exists < 0) corrupt_object(path, std::string("attribute ") + name);
  out = exists > 0 ? H5Aopen(obj, name, H5P_DEFAULT) : hid_t{-1};
  if (exists > 0 && out < 0) corrupt_object(path, std::string("attribute ") + name);
  return out >= 0;
}

/// Whether the attribute holds exactly one element (a scalar or a 1-element array).
bool single_element(hid_t a) {
  Handle space(H5Aget_space(a), H5Sclose);
  return space.ok() && H5Sget_simple_extent_npoints(space.get()) == 1;
}

}  // namespace

namespace {

/// Opens attribute `name` of `obj` when it is a scalar (one element) number of at most 8 bytes of a class in
/// `classes`, and hands `read(attribute, type)` the open handles; false when absent, of another kind, or unread.
template <typename Read>
bool read_scalar_number(hid_t obj, const char* name, const std::string& path,
                        std::initializer_list<H5T_class_t> classes, Read read) {
  hid_t id = -1;
  if (!open_attribute(obj, name, id, path)) return false;
  Handle a(id, H5Aclose);
  Handle type(H5Aget_type(a.get()), H5Tclose);
  if (!type.ok() || !single_element(a.get())) return false;
  const auto cls = H5Tget_class(type.get());
  const size_t size = H5Tget_size(type.get());
  if (std::find(classes.begin(), classes.end(), cls) == classes.end() || size == 0 || size > 8) return false;
  return read(a.get(), type.get());
}

}  // namespace

bool read_number_attribute(hid_t obj, const char* name, double& value, const std::string& path) {
  return read_scalar_number(obj, name, path, {H5T_FLOAT, H5T_INTEGER}, [&](hid_t a, hid_t) {
    double v = 0;
    if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) return false;
    value = v;
    return true;
  });
}

bool read_u64_attribute(hid_t obj, const char* name, uint64_t& value, const std::string& path) {
  return read_scalar_number(obj, name, path, {H5T_INTEGER}, [&](hid_t a, hid_t type) {
    if (H5Tget_sign(type) == H5T_SGN_2) {  // signed: read as int64, refuse a negative value
      int64_t v = 0;
      if (H5Aread(a, H5T_NATIVE_INT64, &v) < 0 || v < 0) return false;
      value = static_cast<uint64_t>(v);
      return true;
    }
    uint64_t v = 0;
    if (H5Aread(a, H5T_NATIVE_UINT64, &v) < 0) return false;
    value = v;
    return true;
  });
}

void read_meta(hid_t file, const std::string& path, std::span<const char* const> text_names,
               std::span<const char* const> number_names, std::map<std::string, std::string>& text,
               std::map<std::string, double>& numbers) {
  if (!has_dataset(file, path, "/meta")) return;
  if (!is_group(file, "/meta", path))
    io_fail(path, "/meta is not a group (its attributes hold the dump's provenance)",
            "write /meta as a group with attributes (the README's 'HDF5 dump layout'), or leave it out");
  Handle meta(H5Gopen2(file, "/meta", H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) corrupt_object(path, "/meta");
  const hsize_t bytes = file_bytes(path);
  for (const char* name : text_names) {
    hid_t id = -1;
    if (!open_attribute(meta.get(), name, id, path)) continue;
    Handle a(id, H5Aclose);
    Handle type(H5Aget_type(a.get()), H5Tclose);
    if (!type.ok() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0 ||
        !single_element(a.get()))
      continue;
    const size_t size = H5Tget_size(type.get());
    if (size > kMaxAttributeBytes || size > bytes)
      io_fail(path, "attribute /meta/" + std::string(name) + " declares a string of " + std::to_string(size) +
                        " bytes (at most " + std::to_string(std::min<hsize_t>(kMaxAttributeBytes, bytes)) +
                        ": 16 MiB and the file's size)",
              "the file is corrupt; rewrite it");
    if (size == 0) continue;
    std::string value(size, '\0');
    if (H5Aread(a.get(), type.get(), value.data()) >= 0) {
      value.resize(std::strlen(value.c_str()));
      text[name] = value;
    }
  }
  for (const char* name : number_names) {
    double v = 0;
    if (read_number_attribute(meta.get(), name, v, path)) numbers[name] = v;
  }
}

}  // namespace hcpsim::hdf5
