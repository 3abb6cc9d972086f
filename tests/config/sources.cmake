list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/validation_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scenario_loader_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/key_aliases_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scenario_yaml_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/megatron_defaults_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipeline_split_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_backend_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cp_variant_config_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/input_discipline_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/te_legality_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thd_config_test.cpp
)
