#include "validation_window.hpp"

#include <fmt/format.h>

#include "hcpsim/core/error.hpp"

namespace hcpsim {

void check_window_size(const Scenario& s, std::vector<std::string>& warnings) {
  const ModelConfig& m = s.model;
  if (!m.window_size) return;
  const int64_t left = (*m.window_size)[0], right = (*m.window_size)[1];
  const bool causal = m.attn_mask_type == AttnMaskType::causal;
  const std::string given = fmt::format("[{}, {}]", left, right);
  const std::string mask = causal ? "causal" : "no_mask";
  const std::string legal = causal ? "[-1, 0] (no window) or [left >= 0, 0]" : "[-1, -1] (no window) or [left >= 0, right >= 0]";
  // TE's check_set_window_size, branch by branch.
  bool refused = false;
  if (causal) {
    const bool no_window = (left == -1 && right == -1) || (left == -1 && right == 0);
    if (!no_window && left >= 0 && right != 0)
      warnings.push_back(fmt::format("model.window_size {} with a causal mask: TE uses [{}, 0], with a warning",
                                     given, left));
    refused = !no_window && left < 0;
  } else {
    const bool no_window = (left == -1 && right == 0) || (left == -1 && right == -1);
    refused = !no_window && (left < 0 || right < 0);
  }
  if (refused)
    throw InputError(s.loc("model.window_size"), "model.window_size",
                     "window_size " + given + " with attn_mask_type " + mask +
                         " is refused by Transformer Engine (check_set_window_size asserts)",
                     "use " + legal);
  if (left >= 0)
    warnings.push_back("model.window_size " + given +
                       ": sliding windows are not modelled: hcpsim's schedules, simulator and oracle compute full " +
                       mask + " attention (simulate's attention time is an upper bound; verify refuses the window)");
}

}  // namespace hcpsim
