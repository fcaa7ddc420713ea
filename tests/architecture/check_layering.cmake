# ctest -R architecture.layering: the dependency rules of docs/architecture.md, checked on the source
# tree. Dependencies point one way (autograd <- nn <- models <- examples), and nn/, models/ and
# examples/ use only the public API: no include of autograd/kernels/, no tg::kernels:: or tg::detail::
# name, no mutable access to a TensorImpl.
#
#   cmake -DROOT=<source dir> -P check_layering.cmake
#
# scripts/include_graph.py uses this file's conventions (the .h and .cpp files under a folder, the
# include pattern below) to find the include cycles between units of autograd/ and the kernels that
# include tensor.h or tape.h; its --check is to join this test once issue 41 has removed them.
cmake_minimum_required(VERSION 3.22)
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "check_layering.cmake: -DROOT=<source dir> is required")
endif()

# Folder -> the top-level folders its files may include from.
set(allowed_autograd autograd)
set(allowed_nn autograd nn)
set(allowed_models autograd nn models)
set(allowed_examples autograd nn models examples)

set(problems "")
foreach(folder autograd nn models examples)
  file(GLOB_RECURSE files ${ROOT}/${folder}/*.h ${ROOT}/${folder}/*.cpp)
  foreach(f ${files})
    file(RELATIVE_PATH rel ${ROOT} ${f})
    file(STRINGS ${f} lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([a-z_]+)/")
        set(target ${CMAKE_MATCH_1})
        if(target MATCHES "^(autograd|nn|models|examples)$" AND NOT target IN_LIST allowed_${folder})
          list(APPEND problems "${rel}:${n}: ${folder}/ may not include ${target}/: ${line}")
        endif()
      endif()
      if(NOT folder STREQUAL "autograd")
        if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"autograd/kernels/")
          list(APPEND problems "${rel}:${n}: autograd/kernels/ is for ops, not for ${folder}/: ${line}")
        endif()
        string(REGEX REPLACE "//.*$" "" code "${line}")
        if(code MATCHES "(^|[^A-Za-z_])(kernels|detail)::")
          list(APPEND problems "${rel}:${n}: engine internals (${CMAKE_MATCH_2}::) used in ${folder}/: ${line}")
        endif()
        if(code MATCHES "TensorImpl[ \t]*&")
          list(APPEND problems "${rel}:${n}: mutable TensorImpl access in ${folder}/: ${line}")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

if(problems)
  list(JOIN problems "\n" text)
  message(FATAL_ERROR "layering violations (see docs/architecture.md):\n${text}")
endif()
message(STATUS "layering: autograd <- nn <- models <- examples, public API only above autograd/")
