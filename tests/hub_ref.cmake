# test_hub_ref (tests/test_hub_ref.cc) checks tools/models/hub_ref.cc, a source of the qkv tool.
target_sources(test_hub_ref PRIVATE ${PROJECT_SOURCE_DIR}/tools/models/hub_ref.cc)
