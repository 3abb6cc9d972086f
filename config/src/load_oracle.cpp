// The `oracle:` section: how the reference oracles generate inputs, at which precision, and which fault injector
// (fault_injection.hpp) they run with.
#include <algorithm>
#include <string>

#include "hcpsim/core/fault_injection.hpp"
#include "scenario_sections.hpp"

namespace hcpsim {

void read_oracle(YamlReader& r, const YAML::Node& m, OracleSpec& o) {
  const std::string P = "oracle";
  r.check_map(m, P, kOracleKeys);
  if (m["seed"]) {
    const int64_t seed = r.get_int(m["seed"], P + ".seed");
    if (seed < 0) r.fail(m["seed"], P + ".seed", "must be >= 0", "use a non-negative integer seed");
    o.seed = static_cast<uint64_t>(seed);
  }
  if (m["dtype"]) o.dtype = r.get_enum<Dtype>(m["dtype"], P + ".dtype", parse_dtype, "fp64, fp32, bf16, fp16");
  if (m["input_distribution"]) {
    o.input_distribution = r.get_string(m["input_distribution"], P + ".input_distribution");
    if (o.input_distribution != "clamped_normal" && o.input_distribution != "normal" &&
        o.input_distribution != "uniform" && o.input_distribution != "adversarial")
      r.fail(m["input_distribution"], P + ".input_distribution", "unknown distribution '" + o.input_distribution + "'",
             "use one of: clamped_normal, normal, uniform, adversarial");
  }
  if (m["heads"]) {
    if (!m["heads"].IsScalar() || m["heads"].IsNull())  // null, a list or a map: say what it takes
      r.fail(m["heads"], P + ".heads", "expected 'all' or a positive number of q-heads",
             "write 'heads: all' or e.g. 'heads: 4' (the first 4 q-heads of each a2a member)");
    o.heads = r.get_string(m["heads"], P + ".heads");
    const bool digits = !o.heads.empty() && o.heads.size() < 10 &&
                        std::all_of(o.heads.begin(), o.heads.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (o.heads != "all" && (!digits || std::stoll(o.heads) < 1))
      r.fail(m["heads"], P + ".heads", "expected 'all' or a positive number of q-heads, got '" + o.heads + "'",
             "write 'heads: all' or e.g. 'heads: 4' (the first 4 q-heads of each a2a member)");
  }
  if (m["inject"]) {
    const std::string name = r.get_string(m["inject"], P + ".inject");
    if (!parse_fault_kind(name)) {
      std::string list;
      for (FaultKind k : all_fault_kinds()) list += (list.empty() ? "" : ", ") + to_string(k);
      r.fail(m["inject"], P + ".inject", "unknown fault injector '" + name + "'", "use one of: " + list);
    }
    o.inject = name;
  }
}

}  // namespace hcpsim
