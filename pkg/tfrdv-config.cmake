# tfrdv-config.cmake - installed by `make install` to <prefix>/share/cmake/tfrdv, found by
# find_package(tfrdv CONFIG). Defines tfrdv::tfrdv: the include directory of the four headers and
# Threads::Threads. Define TFRDV_IMPLEMENTATION in one file of yours. tfrdv_tcp.h needs nothing
# more; tfrdv_grpc.h needs gRPC's C core (pkg_check_modules(grpc IMPORTED_TARGET grpc), link
# PkgConfig::grpc); tfrdv_verbs.h needs libibverbs-dev's headers (the library is dlopen'ed: link
# ${CMAKE_DL_LIBS} where libc lacks dlopen). Relocatable: paths are relative to this file.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
get_filename_component(_tfrdv_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET tfrdv::tfrdv)
  add_library(tfrdv::tfrdv INTERFACE IMPORTED)
  set_target_properties(tfrdv::tfrdv PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_tfrdv_prefix}/include"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
unset(_tfrdv_prefix)
