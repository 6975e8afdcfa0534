# hpcrl_module(NAME [TORCH] [DEPS m...] [LIBS t...])
#   Builds src/NAME/**/*.cpp into static library hpcrl_NAME (an interface target
#   while the folder has no sources). TORCH modules link LibTorch and share one
#   precompiled torch header (for the sources that include torch), which is
#   what keeps 2-core builds tolerable.
# hpcrl_test(NAME SOURCES f... [DEPS m...] [LABELS l...] [MPI np...])
#   One GoogleTest executable per area. Without MPI it is registered test by test
#   (gtest_discover_tests); with MPI it runs once per listed rank count under
#   mpirun --oversubscribe, with tests/support/mpi_gtest_main.cpp as main.
include(GoogleTest)
set(HPCRL_ALL_MODULES "" CACHE INTERNAL "")

# The precompiled header holds the parts of LibTorch the code uses (tensors and
# their factories, grad mode, nn::Module, custom autograd functions), not
# <torch/torch.h>: GCC reads the whole header into every object that uses it,
# and the full one (584 MB) costs 10.3 s per object before a line of the
# object's own code; this one 5.9 s. Sources include what they use
# (<torch/utils.h> for tensors, NoGradGuard and manual_seed).
add_library(hpcrl_torch_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
target_link_libraries(hpcrl_torch_pch PUBLIC ${TORCH_LIBRARIES})
target_precompile_headers(hpcrl_torch_pch PRIVATE
  <torch/utils.h> <torch/nn/module.h> <torch/csrc/autograd/custom_function.h>)

# hpcrl_includes_torch(FILE OUT): whether FILE includes a LibTorch header
# (torch/, ATen/, c10/), directly or through the project's own headers.
# Sources that do not skip the precompiled header, which would otherwise add
# its 5.9 s to a parser that builds in under a second. The answer is taken at
# configure time; a source that starts including torch later still builds
# (slower, without the header) until CMake configures again.
function(hpcrl_includes_torch file out)
  get_property(known GLOBAL PROPERTY "hpcrl_torch:${file}" SET)
  if(known)
    get_property(answer GLOBAL PROPERTY "hpcrl_torch:${file}")
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "hpcrl_torch:${file}" OFF)  # an include cycle ends here
  set(answer OFF)
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(here ${file} DIRECTORY)
  foreach(line IN LISTS lines)
    if(line MATCHES "[<\"](torch|ATen|c10)/")
      set(answer ON)
      break()
    endif()
    if(NOT line MATCHES "[<\"]([^>\"]+)[>\"]")
      continue()
    endif()
    set(name ${CMAKE_MATCH_1})
    foreach(dir ${here} ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
      if(EXISTS ${dir}/${name} AND NOT IS_DIRECTORY ${dir}/${name})
        hpcrl_includes_torch(${dir}/${name} nested)
        if(nested)
          set(answer ON)
        endif()
        break()
      endif()
    endforeach()
    if(answer)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "hpcrl_torch:${file}" ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

# hpcrl_use_torch_pch(TARGET SOURCES...): the shared precompiled header for
# TARGET's sources that include torch; the others build without it.
function(hpcrl_use_torch_pch target)
  target_precompile_headers(${target} REUSE_FROM hpcrl_torch_pch)
  foreach(src IN LISTS ARGN)
    get_filename_component(path ${src} ABSOLUTE)
    hpcrl_includes_torch(${path} uses)
    if(NOT uses)
      set_source_files_properties(${path} TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()

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
      hpcrl_use_torch_pch(hpcrl_${name} ${srcs})
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
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;DEPS;LABELS;MPI" ${ARGN})
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
  hpcrl_use_torch_pch(${name} ${T_SOURCES})
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
