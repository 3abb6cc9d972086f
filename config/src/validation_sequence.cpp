#include "validation_sequence.hpp"

#include <numeric>
#include <string>

#include "validation_fail.hpp"

namespace hcpsim {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

void check_sequence_split(const Scenario& s) {
  const int64_t cp = s.parallel.context_parallel_size, seq = s.model.seq_length;
  if (cp > 1 && seq % (2 * cp) != 0)
    fail_between(s, "model.seq_length", {"model.seq_length", "parallel.context_parallel_size"},
                 "seq_length " + str(seq) + " is not divisible by 2*context_parallel_size = " + str(2 * cp) +
                     " (the load-balanced split cuts the sequence into 2*cp chunks)",
                 "pad the sequence to a multiple of " + str(2 * cp) + ", e.g. " +
                     str((seq + 2 * cp - 1) / (2 * cp) * (2 * cp)));
  const int64_t tp = s.parallel.tensor_model_parallel_size;
  if (!s.parallel.sequence_parallel || tp <= 1 || cp < 1 || seq % cp != 0) return;
  const int64_t per_rank = seq / cp;
  // Both rules together: seq a multiple of 2·cp (the split) and of cp·tp (SP), i.e. of their lcm.
  const int64_t multiple = std::lcm(cp > 1 ? 2 * cp : int64_t{1}, cp * tp);
  if (per_rank % tp != 0)
    fail_between(s, "model.seq_length",
                 {"model.seq_length", "parallel.tensor_model_parallel_size", "parallel.context_parallel_size",
                  "parallel.sequence_parallel"},
                 str(per_rank) + " tokens per CP rank (seq_length " + str(seq) + " / context_parallel_size " +
                     str(cp) + ") do not split over tensor_model_parallel_size " + str(tp) +
                     " with sequence_parallel (Megatron scatters each CP rank's tokens over the TP ranks)",
                 (s.model.qkv_format == QkvFormat::thd ? "pad the packed sequences to a total that is a multiple of "
                                                        : "use a seq_length that is a multiple of ") +
                     str(multiple) + " (e.g. " + str((seq + multiple - 1) / multiple * multiple) +
                     "), or sequence_parallel: false");
}

}  // namespace hcpsim
