# The sources of the bahdanau CLI but its main.cpp, one file per subcommand (see main.cpp):
# examples/CMakeLists.txt builds the program from them and main.cpp; tests/fuzz/CMakeLists.txt
# links them into the cli fuzz target, which calls tg::cli::bahdanau_main itself.
set(TG_BAHDANAU_CLI_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/cli.cpp
    ${CMAKE_CURRENT_LIST_DIR}/common.cpp
    ${CMAKE_CURRENT_LIST_DIR}/data_args.cpp
    ${CMAKE_CURRENT_LIST_DIR}/decode_args.cpp
    ${CMAKE_CURRENT_LIST_DIR}/train.cpp
    ${CMAKE_CURRENT_LIST_DIR}/translate.cpp
    ${CMAKE_CURRENT_LIST_DIR}/eval.cpp
    ${CMAKE_CURRENT_LIST_DIR}/bleu.cpp
    ${CMAKE_CURRENT_LIST_DIR}/split.cpp
    ${CMAKE_CURRENT_LIST_DIR}/plot.cpp
    ${CMAKE_CURRENT_LIST_DIR}/experiment.cpp
    ${CMAKE_CURRENT_LIST_DIR}/average.cpp
    ${CMAKE_CURRENT_LIST_DIR}/gradcheck.cpp)
