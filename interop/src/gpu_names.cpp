// GPU names in logs and on the command line: cluster presets and the datasheet peaks of GPUs without a preset
// (megatron_log.hpp).
#include <algorithm>
#include <cctype>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/interop/megatron_log.hpp"

namespace hcpsim {
namespace {

std::string lower(const std::string& s) {
  std::string n;
  for (char c : s) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

/// Dense BF16 Tensor Core TFLOP/s: the NVIDIA datasheets give them "with sparsity", so the figures here are half.
/// `token` is matched as a whole word in lower case; longer tokens first, so "h100 pcie" wins over "h100".
struct DatasheetEntry {
  const char* token;
  const char* name;
  double tflops;
  const char* source;
  const char* family;
};
constexpr DatasheetEntry kDatasheetGpus[] = {
    {"h100 pcie", "H100 PCIe", 756.0, "NVIDIA H100 datasheet: BF16 1,513 TFLOPS with sparsity", "dgx-h100"},
    {"h100 nvl", "H100 NVL", 835.5, "NVIDIA H100 datasheet: BF16 1,671 TFLOPS with sparsity", "dgx-h100"},
    {"gh200", "GH200", 989.5, "NVIDIA GH200 datasheet: BF16 1,979 TFLOPS with sparsity", "dgx-h100"},
    {"h800", "H800", 989.5, "NVIDIA H800 SXM5 (the H100 SXM5's compute): BF16 1,979 TFLOPS with sparsity", "dgx-h100"},
    {"h20", "H20", 148.0, "NVIDIA H20: BF16 296 TFLOPS with sparsity", "dgx-h100"},
    {"a800", "A800", 312.0, "NVIDIA A800 (the A100's compute): BF16 624 TFLOPS with sparsity", "dgx-a100"},
    {"l40s", "L40S", 362.05, "NVIDIA L40S datasheet: BF16 733 TFLOPS with sparsity", "dgx-h100"},
};

/// Whether lower-case `text` holds `token` at `at` as a whole word (no letter or digit on either side).
bool whole_word_at(const std::string& text, size_t at, size_t len) {
  const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(text[at - 1]));
  const size_t end = at + len;
  const bool right = end >= text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
  return left && right;
}

/// The first whole-word occurrence of `token` in `text`, or npos.
size_t find_word(const std::string& text, const std::string& token) {
  for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + 1))
    if (whole_word_at(text, at, token.size())) return at;
  return std::string::npos;
}

}  // namespace

std::optional<DatasheetGpu> datasheet_gpu(const std::string& name) {
  const std::string n = lower(name);
  for (const DatasheetEntry& e : kDatasheetGpus)
    if (find_word(n, e.token) != std::string::npos) return DatasheetGpu{e.name, e.tflops, e.source, e.family};
  return std::nullopt;
}

std::optional<std::string> gpu_named_in_line(const std::string& line) {
  const std::string n = lower(line);
  for (const DatasheetEntry& e : kDatasheetGpus)
    if (find_word(n, e.token) != std::string::npos) return std::string(e.name);
  // "H100 80GB HBM3", "H100-SXM5-80GB": the preset GPUs (a following letter or "-SXM" still names them).
  for (const char* g : {"H100", "H200", "A100", "B200"}) {
    for (size_t at = line.find(g); at != std::string::npos; at = line.find(g, at + 1)) {
      const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(line[at - 1]));
      const size_t end = at + 4;
      const bool right = end >= line.size() || !std::isdigit(static_cast<unsigned char>(line[end]));
      if (left && right) return std::string(g);
    }
  }
  return std::nullopt;
}

std::optional<std::string> preset_of_gpu_name(const std::string& name) {
  const std::string n = lower(name);
  for (const auto& p : cluster_preset_names())
    if (n == p) return p;
  if (datasheet_gpu(name)) return std::nullopt;
  for (const char* g : {"h100", "h200", "a100", "b200"}) {
    if (n.rfind(g, 0) == 0 && (n.size() == 4 || !std::isdigit(static_cast<unsigned char>(n[4]))))
      return std::string("dgx-") + g;
    if (n.rfind(std::string("nvidia ") + g, 0) == 0) return std::string("dgx-") + g;
  }
  return std::nullopt;
}

}  // namespace hcpsim
