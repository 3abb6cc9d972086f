// GPU names in logs and on the command line: cluster presets and the datasheet peaks of GPUs without a preset
// (megatron_log.hpp).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hcpsim/config/cluster_spec.hpp"
#include "hcpsim/interop/megatron_log.hpp"

namespace hcpsim {
namespace {

/// Lower case, with '-' and '_' read as spaces: "H100-PCIe", "h100_pcie" and "H100 PCIe" name one GPU.
std::string lower(const std::string& s) {
  std::string n;
  for (char c : s) n += c == '-' || c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

/// Words that may follow a preset GPU's name and still name that GPU (nvidia-smi's "NVIDIA H100 80GB HBM3",
/// the presets' "H100-SXM5-80GB", "A100-SXM4-40GB"); any other word ("PCIe", "NVL", "X") names another part.
bool preset_qualifier(const std::string& word) {
  for (const char* q : {"sxm", "sxm4", "sxm5", "sxm6", "40gb", "80gb", "94gb", "141gb", "180gb", "192gb", "hbm2",
                        "hbm2e", "hbm3", "hbm3e"})
    if (word == q) return true;
  return false;
}

/// Dense BF16 Tensor Core TFLOP/s: the NVIDIA datasheets give them "with sparsity", so the figures here are half.
/// `token` is matched as a whole word in lower case, and `variant` (when not empty) as a whole word anywhere after
/// it ("NVIDIA A100 80GB PCIe", "A100-PCIE-40GB").
struct DatasheetEntry {
  const char* token;
  const char* variant;
  const char* name;
  double tflops;
  const char* source;
  const char* family;
  double fp8_tflops;  ///< dense FP8 Tensor Core TFLOP/s (half the datasheet's sparse figure); 0 = no FP8
};
constexpr DatasheetEntry kDatasheetGpus[] = {
    {"h100", "pcie", "H100 PCIe", 756.0, "NVIDIA H100 datasheet: BF16 1,513 / FP8 3,026 TFLOPS with sparsity",
     "dgx-h100", 1513.0},
    {"h100", "nvl", "H100 NVL", 835.5, "NVIDIA H100 datasheet: BF16 1,671 / FP8 3,341 TFLOPS with sparsity",
     "dgx-h100", 1670.5},
    {"h200", "nvl", "H200 NVL", 835.5, "NVIDIA H200 datasheet: BF16 1,671 / FP8 3,341 TFLOPS with sparsity",
     "dgx-h200", 1670.5},
    {"a100", "pcie", "A100 PCIe", 312.0, "NVIDIA A100 datasheet: BF16 624 TFLOPS with sparsity (no FP8)", "dgx-a100",
     0.0},
    {"gh200", "", "GH200", 989.5, "NVIDIA GH200 datasheet: BF16 1,979 / FP8 3,958 TFLOPS with sparsity", "dgx-h100",
     1979.0},
    {"h800", "", "H800", 989.5,
     "NVIDIA H800 SXM5 (the H100 SXM5's compute): BF16 1,979 / FP8 3,958 TFLOPS with sparsity", "dgx-h100", 1979.0},
    {"h20", "", "H20", 148.0, "NVIDIA H20: BF16 296 / FP8 592 TFLOPS with sparsity", "dgx-h100", 296.0},
    {"a800", "", "A800", 312.0, "NVIDIA A800 (the A100's compute): BF16 624 TFLOPS with sparsity (no FP8)", "dgx-a100",
     0.0},
    {"l40s", "", "L40S", 362.05, "NVIDIA L40S datasheet: BF16 733 / FP8 1,466 TFLOPS with sparsity", "dgx-h100", 733.0},
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

/// Whether lower-case `text` names entry `e`: its token, then its variant word among the next few words (a log
/// line may say "PCIe" again much later, about something else).
bool names_entry(const std::string& text, const DatasheetEntry& e) {
  constexpr size_t kVariantWithinChars = 16;  // "a100 80gb pcie", "a100 sxm4 40gb": one or two words between
  const size_t at = find_word(text, e.token);
  if (at == std::string::npos) return false;
  const std::string after = text.substr(at, std::strlen(e.token) + kVariantWithinChars);
  return *e.variant == '\0' || find_word(after, e.variant) != std::string::npos;
}

}  // namespace

std::optional<DatasheetGpu> datasheet_gpu(const std::string& name) {
  const std::string n = lower(name);
  for (const DatasheetEntry& e : kDatasheetGpus)
    if (names_entry(n, e)) return DatasheetGpu{e.name, e.tflops, e.source, e.family, e.fp8_tflops};
  return std::nullopt;
}

std::optional<std::string> gpu_named_in_line(const std::string& line) {
  const std::string n = lower(line);
  for (const DatasheetEntry& e : kDatasheetGpus)
    if (names_entry(n, e)) return std::string(e.name);
  // "H100 80GB HBM3", "H100-SXM5-80GB": the preset GPUs as a whole word ("H100X" or "H1000" is another part).
  for (const char* g : {"H100", "H200", "A100", "B200"}) {
    for (size_t at = line.find(g); at != std::string::npos; at = line.find(g, at + 1)) {
      const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(line[at - 1]));
      const size_t end = at + 4;
      const bool right = end >= line.size() || !std::isalnum(static_cast<unsigned char>(line[end]));
      if (left && right) return std::string(g);
    }
  }
  return std::nullopt;
}

/// The preset GPU `n` (lower(name)) names: "h100", "nvidia h100", then only preset_qualifier words.
std::optional<std::string> preset_gpu_of(const std::string& n) {
  std::vector<std::string> words;
  for (size_t at = 0; at < n.size();) {
    const size_t end = std::min(n.find(' ', at), n.size());
    if (end > at) words.push_back(n.substr(at, end - at));
    at = end + 1;
  }
  size_t first = !words.empty() && words[0] == "nvidia" ? 1 : 0;
  if (first >= words.size()) return std::nullopt;
  for (const char* g : {"h100", "h200", "a100", "b200"}) {
    if (words[first] != g) continue;
    for (size_t k = first + 1; k < words.size(); ++k)
      if (!preset_qualifier(words[k])) return std::nullopt;
    return std::string("dgx-") + g;
  }
  return std::nullopt;
}

std::optional<std::string> preset_of_gpu_name(const std::string& name) {
  const std::string n = lower(name);
  std::string plain;  // a preset name keeps its hyphen: "dgx-h100"
  for (char c : name) plain += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& p : cluster_preset_names())
    if (plain == p) return p;
  if (datasheet_gpu(name)) return std::nullopt;
  return preset_gpu_of(n);
}

}  // namespace hcpsim
