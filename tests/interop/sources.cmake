list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/interop_fuzz_regression_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_import_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_log_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shell_words_test.cpp
)
