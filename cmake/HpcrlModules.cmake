# hpcrl_module(NAME [TORCH] [DEPS m...] [LIBS t...])
#   Builds src/NAME/**/*.cpp into static library hpcrl_NAME (an interface target
#   while the folder has no sources). TORCH modules link LibTorch and share one
#   precompiled torch header, which is what keeps 2-core builds tolerable.
# hpcrl_test(NAME SOURCES f... [DEPS m...] [LABELS l...] [MPI np...])
#   One GoogleTest executable per area. Without MPI it is registered test by test
#   (gtest_discover_tests); with MPI it runs once per listed rank count under
#   mpirun --oversubscribe, with tests/support/mpi_gtest_main.cpp as main.
include(GoogleTest)
set(HPCRL_ALL_MODULES "" CACHE INTERNAL "")

add_library(hpcrl_torch_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
target_link_libraries(hpcrl_torch_pch PUBLIC ${TORCH_LIBRARIES})
target_precompile_headers(hpcrl_torch_pch PRIVATE <torch/torch.h>)

function(hpcrl_module name)
  cmake_parse_arguments(M "TORCH" "" "DEPS;LIBS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  set(deps "")
  foreach(d IN LISTS M_DEPS)
    list(APPEND deps hpcrl_${d})
  endforeach()
  if(srcs)
    add_library(hpcrl_${name} STATIC ${srcs})
    target_include_directories(hpcrl_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(hpcrl_${name} PUBLIC ${deps} ${M_LIBS} Threads::Threads)
    if(M_TORCH)
      target_link_libraries(hpcrl_${name} PUBLIC ${TORCH_LIBRARIES})
      target_precompile_headers(hpcrl_${name} REUSE_FROM hpcrl_torch_pch)
    endif()
  else()
    add_library(hpcrl_${name} INTERFACE)
    target_include_directories(hpcrl_${name} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(hpcrl_${name} INTERFACE ${deps} ${M_LIBS})
    if(M_TORCH)
      target_link_libraries(hpcrl_${name} INTERFACE ${TORCH_LIBRARIES})
    endif()
  endif()
  set(HPCRL_ALL_MODULES ${HPCRL_ALL_MODULES} hpcrl_${name} CACHE INTERNAL "")
endfunction()

set(HPCRL_MPI_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
    OMPI_MCA_mpi_yield_when_idle=1
    OMPI_MCA_rmaps_base_oversubscribe=1)

function(hpcrl_test name)
  cmake_parse_arguments(T "TORCH_PCH" "TIMEOUT" "SOURCES;DEPS;LABELS;MPI" ${ARGN})
  set(deps "")
  foreach(d IN LISTS T_DEPS)
    list(APPEND deps hpcrl_${d})
  endforeach()
  if(T_MPI)
    add_executable(${name} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/support/mpi_gtest_main.cpp)
    target_link_libraries(${name} PRIVATE ${deps} GTest::gtest MPI::MPI_CXX)
  else()
    add_executable(${name} ${T_SOURCES})
    target_link_libraries(${name} PRIVATE ${deps} GTest::gtest GTest::gtest_main)
  endif()
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/src)
  # Test code is compiled, not run, for most of its time on 2 cores: -O1 without debug
  # information builds a test file in about 60 % of the time of the library's -O2 -g1
  # (12.7 s against 20.3 s for forward_backward_test.cpp). It still reuses the torch
  # precompiled header: GCC accepts one built with -O2 -g1 at -O1 (both define
  # __OPTIMIZE__) and without -g; at -O0 it would not.
  target_compile_options(${name} PRIVATE -O1 -g0)
  target_compile_definitions(${name} PRIVATE
    HPCRL_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    HPCRL_DATA_DIR="${PROJECT_SOURCE_DIR}/data"
    HPCRL_BINARY="$<TARGET_FILE:hpcrl>")
  if(T_TORCH_PCH)
    target_precompile_headers(${name} REUSE_FROM hpcrl_torch_pch)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(T_MPI)
    foreach(np IN LISTS T_MPI)
      add_test(NAME ${name}_np${np}
               COMMAND ${MPIEXEC_EXECUTABLE} -np ${np} --oversubscribe $<TARGET_FILE:${name}>
               WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      set_tests_properties(${name}_np${np} PROPERTIES LABELS "mpi;${T_LABELS}"
                           ENVIRONMENT "${HPCRL_MPI_ENV}" TIMEOUT ${T_TIMEOUT} PROCESSORS ${np})
    endforeach()
  else()
    gtest_discover_tests(${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                         PROPERTIES LABELS "${T_LABELS}" ENVIRONMENT "${HPCRL_MPI_ENV}" TIMEOUT ${T_TIMEOUT}
                         DISCOVERY_MODE PRE_TEST)
  endif()
endfunction()

# Version string baked into `hpcrl version`: project version + git commit.
function(hpcrl_version_info target)
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT commit)
    set(commit unknown)
  endif()
  target_compile_definitions(${target} PRIVATE
    HPCRL_VERSION="${PROJECT_VERSION}" HPCRL_GIT_COMMIT="${commit}"
    HPCRL_NCCL_BUILT="${HPCRL_HAVE_NCCL}" HPCRL_TORCH_CUDA_BUILT="${HPCRL_TORCH_CUDA}")
endfunction()
