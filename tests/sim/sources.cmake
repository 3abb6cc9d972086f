list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/event_queue_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/topology_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cost_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/time_breakdown_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/collective_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/simulator_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_writer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/network_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/symmetry_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/simulation_cost_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention_simulation_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thd_cost_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_flow_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/engine_deps_test.cpp
)
