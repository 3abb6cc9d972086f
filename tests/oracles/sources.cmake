list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/inputs_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reference_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_executor_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/verify_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/head_selection_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision_verdict_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dump_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dump_regression_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rank_file_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/toy_cp_variant_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thd_verify_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/backward_split_test.cpp
)
