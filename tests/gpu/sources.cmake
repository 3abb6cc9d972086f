# CPU tests of the GPU backend's host-side logic (hcpsim_gpu_plan); device tests are in hcpsim_gpu_tests.
list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/execution_plan_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_replay_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stream_race_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/measured_trace_test.cpp
)
