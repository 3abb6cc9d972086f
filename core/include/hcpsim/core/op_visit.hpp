#pragma once
/// The one way an executor dispatches on an op's kind: visit_op with an Overload of one handler per op kind.
/// Every executor (the CPU oracle, the GPU device executor and its host replay, the simulator's engine and cost
/// model, the hazard checker) visits ops through it, so adding an alternative to OpPayload is a compile error in
/// each of them until it says what the new kind means there. A generic handler (`[](const auto&)`) would hide a
/// missing kind and is rejected at compile time.

#include <type_traits>
#include <utility>
#include <variant>

#include "hcpsim/core/schedule.hpp"

namespace hcpsim {

/// An overload set of lambdas: Overload{[](const AllocOp&) {...}, [](const FreeOp&) {...}, ...}.
template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

namespace op_visit_detail {

/// A type no handler of an op kind accepts: a visitor callable with it has a generic handler.
struct NotAnOpKind {};

template <class Visitor, class Variant>
struct HandlesEvery;
template <class Visitor, class... Kinds>
struct HandlesEvery<Visitor, std::variant<Kinds...>>
    : std::bool_constant<(std::is_invocable_v<Visitor, const Kinds&> && ...)> {};

}  // namespace op_visit_detail

/// Calls the handler of `visitor` for the kind `payload` holds and returns its result (every handler returns the
/// same type). Compile-time errors, not run-time ones: a visitor without a handler for some OpPayload alternative,
/// and a visitor with a generic handler.
template <class Visitor>
decltype(auto) visit_op(const OpPayload& payload, Visitor&& visitor) {
  using V = std::remove_reference_t<Visitor>;
  static_assert(op_visit_detail::HandlesEvery<V, OpPayload>::value,
                "visit_op: the visitor lacks a handler for some op kind (every OpPayload alternative needs one)");
  static_assert(!std::is_invocable_v<V, const op_visit_detail::NotAnOpKind&>,
                "visit_op: a generic handler hides op kinds; write one handler per kind");
  return std::visit(std::forward<Visitor>(visitor), payload);
}

}  // namespace hcpsim
