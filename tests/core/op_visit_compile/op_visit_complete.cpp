// Compiled by the op_visit_* CTest checks (tests/CMakeLists.txt), never linked: a visitor with one handler per op
// kind compiles. The two sibling files break it in one way each and must fail with visit_op's message.
#include "hcpsim/core/op_visit.hpp"

namespace hcpsim {

int kind_number(const Op& op) {
  return visit_op(op.payload, Overload{
                                  [](const AllocOp&) { return 0; },
                                  [](const FreeOp&) { return 1; },
                                  [](const AllToAllOp&) { return 2; },
                                  [](const SendRecvOp&) { return 3; },
                                  [](const AttnFwdBlockOp&) { return 4; },
                                  [](const AttnBwdBlockOp&) { return 5; },
                                  [](const LseMergeOp&) { return 6; },
                                  [](const OutCorrectionOp&) { return 7; },
                                  [](const CopyOp&) { return 8; },
                                  [](const AllGatherOp&) { return 9; },
                                  [](const ReduceScatterOp&) { return 10; },
                                  [](const GemmOp&) { return 11; },
#ifndef HCPSIM_DROP_ONE_KIND
                                  [](const ElementwiseOp&) { return 12; },
#endif
#ifdef HCPSIM_GENERIC_HANDLER
                                  [](const auto&) { return -1; },
#endif
                              });
}

}  // namespace hcpsim
