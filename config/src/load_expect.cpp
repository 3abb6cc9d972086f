// The `expect:` section: the goldens a scenario states for validate, verify and simulate.
#include <limits>

#include "scenario_sections.hpp"

namespace hcpsim {

void read_expect(YamlReader& r, const YAML::Node& m, ExpectSpec& e) {
  const std::string P = "expect";
  r.check_map(m, P, {"validate", "verify", "simulate"});
  e.present = true;
  if (m["validate"]) {
    const YAML::Node& v = m["validate"];
    r.check_map(v, P + ".validate", {"exit_code", "error"});
    if (v["exit_code"]) e.validate_exit_code = static_cast<int>(r.get_int(v["exit_code"], P + ".validate.exit_code"));
    if (v["error"]) e.validate_error = r.get_string(v["error"], P + ".validate.error");
  }
  if (m["verify"]) {
    const YAML::Node& v = m["verify"];
    r.check_map(v, P + ".verify", {"result", "max_rel_l2"});
    if (v["result"]) {
      const std::string result = r.get_string(v["result"], P + ".verify.result");
      if (result != "pass" && result != "precision_limited" && result != "fail")
        r.fail(v["result"], P + ".verify.result", "unknown result '" + result + "'",
               "use pass, precision_limited or fail");
      e.verify_result = result;
    }
    if (v["max_rel_l2"]) {
      const std::string key = P + ".verify.max_rel_l2";
      r.check_map(v["max_rel_l2"], key, {"out", "lse", "dq", "dk", "dv"});
      for (auto it = v["max_rel_l2"].begin(); it != v["max_rel_l2"].end(); ++it) {
        const std::string name = it->first.as<std::string>();
        const bool nan = it->second.IsScalar() && it->second.Scalar() == ".nan";
        const double bound = nan ? std::numeric_limits<double>::quiet_NaN() : r.get_double(it->second, key + "." + name);
        // .nan states that the tensor has non-finite entries (its relative L2 error is not a number)
        if (bound < 0)
          r.fail(it->second, key + "." + name, "must be >= 0 or .nan",
                 "give an upper bound on the relative L2 error, or .nan for a tensor with non-finite entries");
        e.verify_max_rel_l2[name] = bound;
      }
    }
  }
  if (m["simulate"]) {
    const YAML::Node& v = m["simulate"];
    const std::string key = P + ".simulate";
    if (!v.IsMap()) r.fail(v, key, "expected a mapping of golden values", "write e.g. 'simulate: {total_ps: 123}'");
    // Field names are checked by the replay, which knows what the simulator reports.
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string name = it->first.as<std::string>();
      r.record(it->first, key + "." + name);
      e.simulate[name] = r.get_int(it->second, key + "." + name);
    }
  }
}

}  // namespace hcpsim
