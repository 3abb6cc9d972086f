#include "validation_thd.hpp"

#include <string>
#include <utility>

#include "hcpsim/config/cp_variant_config.hpp"
#include "hcpsim/config/thd_packing.hpp"

namespace hcpsim {
namespace {

/// The longest packed sequence hcpsim models: validation.cpp's model.seq_length bound (2^34), which the derived
/// packed length must meet too.
constexpr int64_t kMaxPackedLength = int64_t{1} << 34;

std::string str(int64_t v) { return std::to_string(v); }

[[noreturn]] void fail(const Scenario& s, const std::string& key, const std::string& problem, const std::string& fix) {
  throw InputError(s.loc(key), key, problem, fix);
}

/// The THD keys set in a model whose qkv_format is not thd.
void check_keys_without_thd(const Scenario& s) {
  const ModelConfig& m = s.model;
  for (const auto& [key, set] :
       {std::pair<const char*, bool>{"packed_sequence_lengths", m.packed_sequence_lengths.has_value()},
        {"packing", m.packing.has_value()},
        {"pad_between_seqs", m.pad_between_seqs.has_value()}})
    if (set)
      fail(s, std::string("model.") + key,
           "only used with qkv_format thd (packed sequences), but qkv_format is " + to_string(m.qkv_format),
           std::string("set model.qkv_format: thd, or remove model.") + key);
}

/// "sequence i: L -> Lp" for the first padded sequence of `p`, and how many are padded.
std::string padded_example(const PackedSequences& p) {
  int64_t padded = 0;
  std::string first;
  for (size_t i = 0; i < p.seq_lengths.size(); ++i) {
    if (p.seq_lengths_padded[i] == p.seq_lengths[i]) continue;
    if (padded++ == 0)
      first = "sequence " + str(static_cast<int64_t>(i)) + ": " + str(p.seq_lengths[i]) + " -> " +
              str(p.seq_lengths_padded[i]);
  }
  return str(padded) + " of the " + str(p.num_sequences()) + " sequences are padded (" + first + ")";
}

}  // namespace

void check_thd_model(const Scenario& s) {
  const ModelConfig& m = s.model;
  if (m.qkv_format != QkvFormat::thd) return check_keys_without_thd(s);
  if (!m.packed_sequence_lengths && !m.packing)
    fail(s, "model.qkv_format", "qkv_format thd needs the actual lengths of the packed sequences",
         "add model.packed_sequence_lengths: [L0, L1, ...] (packing order) or model.packing: {seed, num_sequences, "
         "min_length, max_length}");
  if (m.packed_sequence_lengths && m.packing)
    fail(s, "model.packing", "give exactly one of model.packed_sequence_lengths and model.packing, not both",
         "remove model.packing or model.packed_sequence_lengths");
  if (const auto problem = thd_key_problem(m)) fail(s, problem->key, problem->problem, problem->fix);
  // Source: Megatron-LM arguments.py: "micro_batch_size must be 1 when using sequence packing".
  if (m.micro_batch_size != 1)
    fail(s, "model.micro_batch_size",
         "must be 1 with qkv_format thd, got " + str(m.micro_batch_size) +
             ": the packed sequences of a micro-batch form one sequence (Megatron: \"micro_batch_size must be 1 when "
             "using sequence packing\")",
         "set model.micro_batch_size: 1 and pack more or longer sequences instead");
  const int64_t cp = s.parallel.context_parallel_size;
  if (cp < 1) return;  // the parallel rules name it
  const PackedSequences p = scenario_packing(s);
  const std::string lengths_key = m.packing ? "model.packing" : "model.packed_sequence_lengths";
  if (p.total_padded() > kMaxPackedLength)  // before seq_length, which is derived from it
    fail(s, lengths_key,
         "the packed length " + str(p.total_padded()) + " of the " + str(p.num_sequences()) +
             " padded sequences is larger than hcpsim models (at most " + str(kMaxPackedLength) + " tokens)",
         "pack fewer or shorter sequences");
  if (m.seq_length != p.total_padded())
    fail(s, "model.seq_length",
         "seq_length " + str(m.seq_length) + " is not the packed length " + str(p.total_padded()) + " of the " +
             str(p.num_sequences()) + " packed sequences, each padded to a multiple of 2*context_parallel_size = " +
             str(2 * cp),
         "set model.seq_length: " + str(p.total_padded()) + ", or remove model.seq_length (hcpsim derives it)");
  // Source: TE context_parallel.py cp_p2p_fwd_prepare_qkv: without pad_between_seqs the per-step lengths are
  // cu_seqlens // cp_size, which count padding tokens of the rank's chunks as sequence tokens.
  if (m.pad_between_seqs == false && p.has_padding())
    fail(s, "model.pad_between_seqs",
         "false, but " + padded_example(p) + " to multiples of 2*context_parallel_size = " + str(2 * cp) +
             ": TE would attend the padding as tokens (per-step lengths cu_seqlens // cp_size)",
         "set model.pad_between_seqs: true or auto");
  // Source: TE attn_forward_func_with_cp: "Context parallelism only supports attention bias with FusedAttention
  // backend and non-padding mask types!" (THD runs a padding or padding_causal mask).
  if (m.attention_bias && cp > 1)
    fail(s, "model.attention_bias",
         "TE supports no attention bias with context parallelism and qkv_format thd (a padding mask type)",
         "set model.attention_bias: false");
  if (m.has_sliding_window())
    fail(s, "model.window_size",
         "sliding windows with qkv_format thd are not modelled by hcpsim (its document masks are full or causal "
         "within each sequence)",
         "use window_size: [-1, -1], or qkv_format bshd");
}

void check_thd_cp_comm_type(const Scenario& s, CpCommType type, const std::vector<int>& te) {
  if (s.model.qkv_format != QkvFormat::thd) return;
  const CpVariantConfig& row = cp_variant_config(type);
  const std::array<int, 3>& need = row.thd_min_te_version;
  const std::string need_text = str(need[0]) + "." + str(need[1]);
  if (!cp_variant(type).takes_thd)
    fail(s, "parallel.cp_comm_type",
         "qkv_format thd with cp_comm_type " + to_string(type) + ": TE >= " + need_text + " runs it (" +
             row.thd_te_source + "), but hcpsim does not model it yet",
         "use cp_comm_type p2p or a2a+p2p (or a2a)");
  if (te.empty() || s.parallel.context_parallel_size <= 1) return;
  if (te < std::vector<int>(need.begin(), need.end()))
    fail(s, "parallel.te_version",
         "qkv_format thd with cp_comm_type " + to_string(type) + " needs Transformer Engine >= " + need_text + " (" +
             row.thd_te_source + "), got " + *s.parallel.te_version,
         "upgrade Transformer Engine to " + need_text + " or newer" +
             (type == CpCommType::p2p ? std::string() : ", or use cp_comm_type p2p"));
}

}  // namespace hcpsim
