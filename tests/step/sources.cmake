list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/training_step_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/calibration_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/partial_recompute_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/step_trace_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp8_recipe_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer_symmetry_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mixed_step_test.cpp
)
