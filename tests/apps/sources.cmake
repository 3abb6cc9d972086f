list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/replay_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/validate_json_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/verify_verdict_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/step_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/collective_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/import_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/check_log_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plausible_input_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/output_input_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/legality_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/compare_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/admission_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_input_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thd_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/report_json_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chart_svg_test.cpp
  # The chart writers are tested directly on hand-made results (they live in the hcpsim executable).
  ${PROJECT_SOURCE_DIR}/apps/hcpsim/report/svg_chart.cpp
  ${PROJECT_SOURCE_DIR}/apps/hcpsim/report/plan_chart.cpp
  ${PROJECT_SOURCE_DIR}/apps/hcpsim/report/timeline_chart.cpp
)
list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/plan_search_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/progress_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/progress_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_cli_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/huge_pages_test.cpp
  ${PROJECT_SOURCE_DIR}/apps/hcpsim/progress.cpp
  ${PROJECT_SOURCE_DIR}/apps/hcpsim/huge_pages.cpp
)
