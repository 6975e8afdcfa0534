# Third-party dependencies. Debian packages by default (scripts/install-deps.sh);
# a CUDA LibTorch is picked with -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)').
find_package(Torch REQUIRED)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# GiNaC (and its CLN): symbolic answer equivalence in the verifiable reward
# (src/reward/math_*.cpp, docs/rewards.md §4).
pkg_check_modules(GINAC REQUIRED IMPORTED_TARGET ginac)
find_package(Threads REQUIRED)
# For the one file that instantiates at::parallel_for (include/hpcrl/parallel/host_threads.h).
find_package(OpenMP REQUIRED COMPONENTS CXX)
if(HPCRL_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# A pip LibTorch ships its own, newer {fmt} headers in its include directory;
# spdlog must compile against the {fmt} it was built with, so that one is put
# first on the include path (through a directory holding only a link to it).
set(_torch_ships_fmt no)
if(TARGET fmt::fmt)
  get_target_property(_fmt_include fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  list(GET _fmt_include 0 _fmt_include)
  foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
    if(EXISTS ${_dir}/fmt/core.h AND NOT _dir STREQUAL _fmt_include)
      set(_torch_ships_fmt yes)
    endif()
  endforeach()
endif()
if(_torch_ships_fmt)
  set(_fmt_shim ${CMAKE_BINARY_DIR}/fmt-shim)
  file(MAKE_DIRECTORY ${_fmt_shim})
  file(CREATE_LINK ${_fmt_include}/fmt ${_fmt_shim}/fmt SYMBOLIC)
  include_directories(BEFORE SYSTEM ${_fmt_shim})
  message(STATUS "LibTorch ships {fmt}; spdlog's {fmt} from ${_fmt_include} comes first")
endif()

# A pip LibTorch exports some libstdc++ symbols of its own (std::filesystem
# among them) that crash when called from our code. Listing libstdc++ first
# among the needed libraries makes the dynamic linker take libstdc++'s.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT APPLE)
  add_link_options(LINKER:--push-state,--no-as-needed,-l:libstdc++.so.6,--pop-state)
endif()

# Torch's imported targets carry -D_GLIBCXX_USE_CXX11_ABI; everything we build
# must agree with it, so take the flags from TORCH_CXX_FLAGS once here.
if(TORCH_CXX_FLAGS)
  separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  add_compile_options(${_torch_flags})
endif()

# Is this LibTorch built with CUDA? (Debian's is not.)
set(HPCRL_TORCH_CUDA no)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CUDA_FOUND)
  set(HPCRL_TORCH_CUDA yes)
endif()

# NCCL: compiled whenever the CUDA Toolkit ships nccl.h + libnccl, even without a
# CUDA LibTorch, so the NCCL backend keeps compiling on GPU-less CI machines.
set(HPCRL_HAVE_NCCL no)
set(HPCRL_NCCL_LIBS "")
option(HPCRL_WITH_NCCL "Build the NCCL communicator when the CUDA Toolkit and NCCL are found" ON)
if(HPCRL_WITH_NCCL)
  if(NOT DEFINED ENV{CUDA_HOME} AND EXISTS /usr/local/cuda)
    set(ENV{CUDA_HOME} /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include $ENV{NCCL_HOME}/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{CUDA_HOME}/lib64 $ENV{NCCL_HOME}/lib)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(HPCRL_HAVE_NCCL yes)
    add_library(hpcrl_nccl INTERFACE)
    target_include_directories(hpcrl_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(hpcrl_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
    target_compile_definitions(hpcrl_nccl INTERFACE HPCRL_WITH_NCCL=1)
    set(HPCRL_NCCL_LIBS hpcrl_nccl)
  endif()
endif()
if(HPCRL_TORCH_CUDA)
  add_compile_definitions(HPCRL_TORCH_CUDA=1)
endif()
