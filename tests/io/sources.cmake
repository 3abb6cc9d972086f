list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/output_file_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/csv_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chrome_trace_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/measured_ops_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/yaml_text_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/provenance_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/xml_test.cpp
)
