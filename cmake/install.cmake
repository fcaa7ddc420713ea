# Installs tapegrad as a CMake package:
#
#   cmake --install build --prefix P
#     P/include/tapegrad/{autograd,nn,models}/*.h   public headers ("autograd/tapegrad.h", "nn/nn.h")
#     P/include/tapegrad/autograd/kernels/*.h       the kernels an out-of-tree op calls
#     P/lib/libtapegrad.a
#     P/lib/cmake/tapegrad/tapegrad{Config,ConfigVersion,Targets,Targets-<config>}.cmake
#
# and another project uses it with
#
#   find_package(tapegrad REQUIRED)
#   target_link_libraries(app PRIVATE tapegrad::tapegrad)
#
# Included from the top-level CMakeLists.txt after autograd/, nn/ and models/ have defined the
# target, so the link interface read below is complete.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(TG_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad)  # matches autograd/CMakeLists.txt
set(TG_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tapegrad)

# ---- the exported link interface ---------------------------------------------------------------
# A static library carries its PRIVATE dependencies as $<LINK_ONLY:...> entries, and install(EXPORT)
# writes them verbatim, so every one of them must exist as a target in the consumer. Only those the
# archive needs at link time are kept:
#   - header-only libraries used inside the .cpp files (xtensor, xsimd, xtl, nlohmann_json) are
#     build-tree only: no public header includes them, and the consumer needs nothing of them;
#   - TBB::tbb stays: tapegradConfig.cmake finds it with find_dependency(TBB);
#   - OpenSSL::Crypto stays: tapegradConfig.cmake finds it with find_dependency(OpenSSL);
#   - MPI::MPI_C stays (builds with MPI): tapegradConfig.cmake finds it with find_dependency(MPI);
#   - libzip (PkgConfig::LIBZIP, a target local to this build) becomes tapegrad::zip, which
#     tapegradConfig.cmake creates from pkg-config or, failing that, find_library;
#   - SentencePiece (PkgConfig::SENTENCEPIECE, when the build found it) becomes
#     tapegrad::sentencepiece, which tapegradConfig.cmake creates from pkg-config.
set(_tg_header_only xtensor xsimd xtl nlohmann_json::nlohmann_json)
get_target_property(_tg_interface tapegrad INTERFACE_LINK_LIBRARIES)
if(_tg_interface)
  set(_tg_rewritten "")
  foreach(_tg_item IN LISTS _tg_interface)
    set(_tg_dep "${_tg_item}")
    if(_tg_item MATCHES "^\\$<LINK_ONLY:(.+)>$")
      set(_tg_dep "${CMAKE_MATCH_1}")
    endif()
    if(_tg_item MATCHES "^::@")
      # Directory markers CMake adds around entries linked from another folder (nn/, models/).
      list(APPEND _tg_rewritten "${_tg_item}")
    elseif(_tg_dep IN_LIST _tg_header_only)
      list(APPEND _tg_rewritten "$<BUILD_INTERFACE:${_tg_item}>")
    elseif(_tg_dep STREQUAL "PkgConfig::LIBZIP")
      list(APPEND _tg_rewritten "$<BUILD_INTERFACE:${_tg_item}>" "$<INSTALL_INTERFACE:$<LINK_ONLY:tapegrad::zip>>")
    elseif(_tg_dep STREQUAL "PkgConfig::SENTENCEPIECE")
      list(APPEND _tg_rewritten "$<BUILD_INTERFACE:${_tg_item}>"
           "$<INSTALL_INTERFACE:$<LINK_ONLY:tapegrad::sentencepiece>>")
    else()
      if(NOT _tg_dep STREQUAL "TBB::tbb" AND NOT _tg_dep STREQUAL "OpenSSL::Crypto" AND NOT _tg_dep STREQUAL "MPI::MPI_C" AND NOT _tg_dep MATCHES "^\\$<BUILD_INTERFACE:")
        message(WARNING "cmake/install.cmake: tapegrad links '${_tg_dep}', which the installed package "
                        "does not know how to find; teach tapegradConfig.cmake.in about it.")
      endif()
      list(APPEND _tg_rewritten "${_tg_item}")
    endif()
  endforeach()
  set_property(TARGET tapegrad PROPERTY INTERFACE_LINK_LIBRARIES "${_tg_rewritten}")
endif()

# The headers are C++20 and the archive was compiled as C++20: consumers get the same standard.
target_compile_features(tapegrad PUBLIC cxx_std_20)

# ---- files -------------------------------------------------------------------------------------
install(TARGETS tapegrad EXPORT tapegradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Public headers keep their folder names. Of autograd/kernels/, the kernels an op written outside
# the repository calls are installed; fast_math.h and parallel_for.h include xsimd and TBB directly
# and stay internal (tg::parallel_for in autograd/parallel.h is the public loop).
foreach(_tg_dir autograd nn models)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${_tg_dir}/ DESTINATION ${TG_INSTALL_INCLUDEDIR}/${_tg_dir}
          FILES_MATCHING PATTERN "*.h"
          PATTERN "kernels" EXCLUDE
          REGEX "/models/experiments/support\\.h$" EXCLUDE)  # shared by the experiments' sources only
endforeach()
set(TG_OP_KERNEL_HEADERS dispatch.h elementwise.h gemm.h reduce.h view.h)
list(TRANSFORM TG_OP_KERNEL_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/autograd/kernels/)
install(FILES ${TG_OP_KERNEL_HEADERS} DESTINATION ${TG_INSTALL_INCLUDEDIR}/autograd/kernels)

install(EXPORT tapegradTargets NAMESPACE tapegrad:: FILE tapegradTargets.cmake
        DESTINATION ${TG_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tapegradConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/tapegradConfig.cmake
                              INSTALL_DESTINATION ${TG_INSTALL_CMAKEDIR})
# 0.x: minor versions may break the API, so a request for 0.1 accepts 0.1.* only.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tapegradConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tapegradConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tapegradConfigVersion.cmake
        DESTINATION ${TG_INSTALL_CMAKEDIR})
