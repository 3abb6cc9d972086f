#include <vector>

#include "catch_compat.hpp"
#include "hcpsim/config/cp_variant_config.hpp"
#include "hcpsim/config/scenario_adapters.hpp"

using namespace hcpsim;

TEST_CASE("config: every comm type a scenario names has a config row under the core row's name",
          "[config][cp_variant]") {
  const std::vector<CpCommType> want{CpCommType::p2p, CpCommType::a2a, CpCommType::all_gather, CpCommType::a2a_p2p};
  REQUIRE(scenario_cp_comm_types() == want);
  for (CpCommType t : want) {
    REQUIRE(cp_variant_config(t).name == cp_variant(t).name);
    REQUIRE(find_cp_variant_config(to_string(t)) == &cp_variant_config(t));
  }
  REQUIRE(cp_variant_config(CpCommType::a2a_p2p).min_te_version == std::array<int, 3>{1, 12, 0});
  REQUIRE(cp_variant_config(CpCommType::p2p).attention_bias);
  REQUIRE(cp_variant_config(CpCommType::a2a).sliding_window);
  REQUIRE(cp_variant_config(CpCommType::p2p).a2a_size_key.empty());
}

TEST_CASE("config: the adapters give each row's layout of a scenario", "[config][cp_variant]") {
  Scenario s;
  s.model.seq_length = 8192;
  s.parallel.context_parallel_size = 8;
  s.parallel.cp_comm_type = {CpCommType::a2a_p2p};
  s.parallel.hierarchical_context_parallel_sizes = std::vector<int64_t>{4, 2};
  const CpLayout hier = cp_layout_for(s, CpCommType::a2a_p2p);
  REQUIRE(hier.a2a_size() == 4);
  REQUIRE(hier.p2p_size() == 2);
  REQUIRE(cp_layout_for(s, CpCommType::a2a).a2a_size() == 8);
  REQUIRE(cp_layout_for(s, CpCommType::p2p).p2p_size() == 8);
  REQUIRE(cp_layout_for(s, CpCommType::all_gather).a2a_size() == 1);
  s.parallel.hierarchical_context_parallel_sizes.reset();
  REQUIRE_THROWS_AS(cp_layout_for(s, CpCommType::a2a_p2p), InputError);
}
