#include "validation_order.hpp"

#include <string>
#include <utility>

#include "hcpsim/core/cp_layout.hpp"
#include "hcpsim/core/error.hpp"

namespace hcpsim {

void check_parallel_order(const Scenario& scenario, std::optional<int64_t> dp) {
  const ParallelConfig& p = scenario.parallel;
  const std::string key = "parallel.order";
  auto fail = [&](const std::string& problem, const std::string& fix) {
    throw InputError(scenario.loc(key), key, problem, fix);
  };
  if (!is_valid_parallel_order(p.order))
    fail("'" + p.order + "' is not a '-'-separated order of tp, cp, ep, dp, pp (each at most once)",
         "use the Megatron default 'tp-cp-ep-dp-pp'");
  if (!parallel_order_ep_next_to_dp(p.order))
    fail("'" + p.order + "': ep and dp must be adjacent (Megatron's RankGenerator raises \"The ep and dp must be "
         "adjacent in order\")",
         "put ep next to dp, e.g. 'tp-cp-ep-dp-pp'");
  std::pair<const char*, int64_t> sizes[] = {{"tp", p.tensor_model_parallel_size},
                                            {"cp", p.context_parallel_size},
                                            {"pp", p.pipeline_model_parallel_size},
                                            {"dp", dp.value_or(1)}};
  for (const auto& [name, size] : sizes)
    if (size != 1 && !parallel_order_names(p.order, name))
      fail("'" + p.order + "' leaves out " + name + ", whose size is " + std::to_string(size) +
               " (Megatron's RankGenerator appends only dimensions of size 1)",
           "name " + std::string(name) + " in the order, e.g. 'tp-cp-ep-dp-pp'");
}

}  // namespace hcpsim
