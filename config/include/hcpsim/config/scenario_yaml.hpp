#pragma once
/// Writing a Scenario back out as a scenario file (schema_version 1), the inverse of scenario_loader.hpp.

#include <string>

#include "hcpsim/config/scenario.hpp"

namespace hcpsim {

/// The complete effective configuration of `scenario` (after the loader's defaults and overrides) as the text
/// of a scenario file that load_scenario_text accepts. Sections and keys come in the loader's order, so the same
/// Scenario always gives the same bytes:
/// - schema_version, name;
/// - model: every ModelConfig field the loader reads; the optional ones (hidden_size, ffn_hidden_size,
///   global_batch_size, vocab_size, window_size, packed_sequence_lengths, packing) only when set; pad_between_seqs
///   when set, and as auto with qkv_format thd; seq_length always (with thd the derived packed length);
/// - parallel: every ParallelConfig field; data_parallel_size, hierarchical_context_parallel_sizes, te_version and
///   virtual_pipeline_model_parallel_size only when set; cp_comm_type as one value, or a list with one per layer;
/// - cluster written out in full, so the file does not depend on a preset's values: preset (when the scenario has
///   one: it names the cluster and the GPU's "assumed: preset ..." provenance; every value below overrides it),
///   nodes, gpus_per_node, gpu (peaks, memory, efficiencies, both efficiency tables when non-empty, launch
///   overhead, slowdown, FP8 peak, GEMM efficiency: values a calibration file set are written as plain values),
///   nvlink, network, message_latency_us, nics_per_node (when ≥ 1; 0 = one NIC per GPU is the default), fabric,
///   and topology when it has vertices;
/// - training; oracle (seed, dtype, input_distribution, heads, and inject when set); expect when present.
/// Units are the file's, not the struct's: bytes → GB (memory_GB, framework_overhead_GB), bytes/s → GB/s
/// (*_bandwidth_GB_per_s), FLOP/s → TFLOP/s (peak_*_TFLOP_per_s), seconds → µs (*_latency_us,
/// kernel_launch_overhead_us). Each converted value is the double that the loader's conversion (×1e9, ×1e12,
/// ÷1e6) maps back to exactly the stored value (the shortest such text), and every number is written in its
/// shortest form that reads back to the same double, so load_scenario_text(to_yaml(s)) holds the same values
/// and to_yaml of it gives the same text again (a fixed point). Strings are quoted and escaped by yaml-cpp's
/// emitter where YAML needs it.
/// Not written (the loader has no key that sets them): source_path, locations, the calibration file's path and
/// its provenance text in gpu.calibration (a reloaded scenario says "assumed: ..." again).
/// Values the loader would reject (e.g. an oracle.seed above INT64_MAX in a Scenario built in code) are written
/// as they are; loading the text then raises the loader's InputError.
std::string to_yaml(const Scenario& scenario);

}  // namespace hcpsim
