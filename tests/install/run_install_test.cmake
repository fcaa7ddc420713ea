# ctest -R install.find_package: installs the current build to a fresh prefix, checks the installed
# headers are self-contained, then configures, builds and runs tests/install/consumer (the library,
# the xtensor interop header through tapegrad::xtensor, and an op written against the installed
# kernel headers) against the installed package only.
#
#   cmake -DSRC=<consumer source> -DBIN=<tapegrad build dir> -DWORK=<scratch dir>
#         [-DGENERATOR=Ninja] [-DCXX=<compiler>] -P run_install_test.cmake
foreach(var SRC BIN WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK}/prefix)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# 1. Install.
run_step("cmake --install" ${CMAKE_COMMAND} --install ${BIN} --prefix ${prefix})
foreach(f include/tapegrad/autograd/tapegrad.h include/tapegrad/nn/nn.h lib/libtapegrad.a
          lib/cmake/tapegrad/tapegradConfig.cmake lib/cmake/tapegrad/tapegradConfigVersion.cmake
          lib/cmake/tapegrad/tapegradTargets.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "not installed: ${prefix}/${f}")
  endif()
endforeach()
foreach(f dispatch.h elementwise.h gemm.h reduce.h view.h)
  if(NOT EXISTS ${prefix}/include/tapegrad/autograd/kernels/${f})
    message(FATAL_ERROR "op kernel header not installed: autograd/kernels/${f}")
  endif()
endforeach()
foreach(f fast_math.h parallel_for.h)
  if(EXISTS ${prefix}/include/tapegrad/autograd/kernels/${f})
    message(FATAL_ERROR "internal header installed: autograd/kernels/${f}")
  endif()
endforeach()

# 2. Every #include "..." of an installed header resolves inside the installed include tree (so no
#    public header depends on an internal one or on a header-only dependency).
file(GLOB_RECURSE headers ${prefix}/include/tapegrad/*.h)
list(LENGTH headers n_headers)
if(n_headers LESS 20)
  message(FATAL_ERROR "only ${n_headers} headers installed")
endif()
foreach(h ${headers})
  file(STRINGS ${h} includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  get_filename_component(hdir ${h} DIRECTORY)
  foreach(line ${includes})
    if(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(inc ${CMAKE_MATCH_1})
      if(NOT EXISTS ${prefix}/include/tapegrad/${inc} AND NOT EXISTS ${hdir}/${inc})
        message(FATAL_ERROR "${h} includes \"${inc}\", which is not installed")
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*<xtensor/" AND h MATCHES "/autograd/xtensor\\.h$")
      # the opt-in interop header: the one public header that includes a third-party library
    elseif(line MATCHES "#[ \t]*include[ \t]*<(xtensor|xsimd|xtl|tbb|oneapi|zip|nlohmann)[/.>]")
      message(FATAL_ERROR "${h} includes a private dependency: ${line}")
    endif()
  endforeach()
endforeach()

# 3. Configure and build the consumer against the installed package only.
set(config_args -S ${SRC} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
                -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if(GENERATOR)
  list(APPEND config_args -G ${GENERATOR})
endif()
if(CXX)
  list(APPEND config_args -DCMAKE_CXX_COMPILER=${CXX})
endif()
run_step("configuring the consumer" ${CMAKE_COMMAND} ${config_args})
file(STRINGS ${WORK}/build/CMakeCache.txt found_dir REGEX "^tapegrad_DIR:")
if(NOT found_dir MATCHES "=${prefix}/")
  message(FATAL_ERROR "the consumer found tapegrad outside the install prefix: ${found_dir}")
endif()
run_step("building the consumer" ${CMAKE_COMMAND} --build ${WORK}/build)

# 4. Run it: three steps, each with a finite loss (main.cpp itself also fails if it does not drop).
run_step("running the consumer" ${WORK}/build/consumer)
string(REGEX MATCHALL "step [0-9]+ loss [0-9]+\\.[0-9]+" losses "${step_output}")
list(LENGTH losses n_losses)
if(NOT n_losses EQUAL 3)
  message(FATAL_ERROR "expected 3 finite losses from the consumer, got:\n${step_output}")
endif()
message(STATUS "consumer output:\n${step_output}")
run_step("running the xtensor interop consumer" ${WORK}/build/xtensor_interop)
if(NOT step_output MATCHES "xtensor interop ok")
  message(FATAL_ERROR "the xtensor interop consumer printed:\n${step_output}")
endif()
run_step("running the out-of-tree op consumer" ${WORK}/build/custom_op)
if(NOT step_output MATCHES "custom op ok")
  message(FATAL_ERROR "the out-of-tree op consumer printed:\n${step_output}")
endif()
message(STATUS "${step_output}")
file(REMOVE_RECURSE ${WORK})
