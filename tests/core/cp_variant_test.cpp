#include <string>
#include <vector>

#include "catch_compat.hpp"
#include "test_util.hpp"
#include "hcpsim/core/cp_variant.hpp"
#include "hcpsim/core/schedule_builder.hpp"

using namespace hcpsim;

namespace {

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const CpVariant* v : cp_variants()) out.push_back(v->name);
  return out;
}

}  // namespace

TEST_CASE("core: the CP variant table has TE's four rows in the planner's order", "[core][cp_variant]") {
  REQUIRE(names() == std::vector<std::string>{"p2p", "a2a", "all_gather", "a2a+p2p"});
  for (CpCommType t : {CpCommType::p2p, CpCommType::a2a, CpCommType::all_gather, CpCommType::a2a_p2p}) {
    const CpVariant& v = cp_variant(t);
    REQUIRE(v.name == to_string(t));
    REQUIRE(v.comm_type == t);
    REQUIRE(find_cp_variant(v.name) == &v);
  }
  REQUIRE(find_cp_variant("ring") == nullptr);
  REQUIRE(cp_variant(CpCommType::a2a_p2p).takes_hierarchical_sizes);
  REQUIRE_FALSE(cp_variant(CpCommType::p2p).takes_hierarchical_sizes);
  REQUIRE(cp_variant(CpCommType::p2p).sizes(8, {}) == CpSizes{1, 8});
  REQUIRE(cp_variant(CpCommType::a2a).sizes(8, {}) == CpSizes{8, 1});
  REQUIRE(cp_variant(CpCommType::all_gather).sizes(8, {}) == CpSizes{1, 8});
  REQUIRE(cp_variant(CpCommType::a2a_p2p).sizes(8, {2, 4}) == CpSizes{2, 4});
  REQUIRE(cp_variant(CpCommType::a2a_p2p).layout(8, {2, 4}, 64).a2a_size() == 2);
  // TE's a2a+p2p fallbacks: [1, P] is p2p, [A, 1] is a2a.
  REQUIRE(cp_variant_for_hierarchical_sizes(1, 4).name == "p2p");
  REQUIRE(cp_variant_for_hierarchical_sizes(1, 1).name == "p2p");
  REQUIRE(cp_variant_for_hierarchical_sizes(4, 1).name == "a2a");
  REQUIRE(cp_variant_for_hierarchical_sizes(2, 2).name == "a2a+p2p");
  // The planner's sweep: a2a+p2p takes every divisor A, the others one layout (none at CP = 1 but p2p).
  REQUIRE(cp_variant(CpCommType::a2a_p2p).plan_sizes(4) == std::vector<CpSizes>{{1, 4}, {2, 2}, {4, 1}});
  REQUIRE(cp_variant(CpCommType::p2p).plan_sizes(1) == std::vector<CpSizes>{{1, 1}});
  REQUIRE(cp_variant(CpCommType::a2a).plan_sizes(1).empty());
  REQUIRE(cp_variant(CpCommType::a2a).symmetric_a2a_groups);
  REQUIRE_FALSE(cp_variant(CpCommType::p2p).symmetric_a2a_groups);
  REQUIRE_FALSE(cp_variant(CpCommType::all_gather).takes_faults);
}

TEST_CASE("core: a layout publishes its a2a groups as symmetry classes", "[core][cp_variant]") {
  const CpLayout layout(4, 3, 48);
  const CpSymmetryClasses c = layout.symmetry_classes();
  REQUIRE(c.classes.size() == 3);
  REQUIRE(c.class_size() == 4);
  REQUIRE(c.representatives() == std::vector<int64_t>{0, 4, 8});
  for (int64_t g = 0; g < layout.cp_size(); ++g) {
    REQUIRE(c.representative(g) == layout.cp_rank(layout.p2p_rank(g), 0));
    REQUIRE(c.position(g) == layout.a2a_rank(g));
    REQUIRE(c.image(g, 2) == layout.cp_rank(layout.p2p_rank(g), 2));
  }
  REQUIRE(c.classes[1] == layout.a2a_group(1));
}

TEST_CASE("core: build_schedule goes through the table's rows", "[core][cp_variant]") {
  const AttentionShape shape = test::attention_shape(1, 32, 8, 4, 8, 8, true);
  for (CpCommType t : {CpCommType::p2p, CpCommType::a2a, CpCommType::all_gather, CpCommType::a2a_p2p}) {
    const CpVariant& v = cp_variant(t);
    const CpLayout layout = v.layout(4, {2, 2}, shape.seq_length);
    const Schedule a = build_schedule(t, layout, shape);
    const Schedule b = build_variant_schedule(v, layout, shape);
    REQUIRE(a.cp_comm_type == t);
    REQUIRE(a.ranks.size() == b.ranks.size());
    for (size_t g = 0; g < a.ranks.size(); ++g) {
      REQUIRE(a.ranks[g].ops.size() == b.ranks[g].ops.size());
      for (size_t i = 0; i < a.ranks[g].ops.size(); ++i) REQUIRE(a.ranks[g].ops[i].label == b.ranks[g].ops[i].label);
    }
    test::check_schedule(a);
  }
}

TEST_CASE("core: a registered row is found by name and removed again", "[core][cp_variant]") {
  CpVariant row = cp_variant(CpCommType::p2p);
  row.name = "p2p_copy";
  {
    const ScopedCpVariant scoped(row);
    REQUIRE(find_cp_variant("p2p_copy") == &scoped.row());
    REQUIRE(names().back() == "p2p_copy");
    REQUIRE(cp_variant_for_hierarchical_sizes(1, 4).name == "p2p");  // the fallbacks stay TE's
  }
  REQUIRE(find_cp_variant("p2p_copy") == nullptr);
  REQUIRE(names().size() == 4);
}
