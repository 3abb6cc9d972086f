list(APPEND HCPSIM_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cp_layout_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_builder_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_invariants_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/hazards_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fnv_hash_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/semantics_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cp_variant_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lowering_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/program_walker_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thd_schedule_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thd_layout_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op_storage_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/parallel_for_test.cpp
)
