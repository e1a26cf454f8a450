# spotps_link_startup_load_order(TARGET): every executable linking TARGET
# gets a load order in which the dynamic loader binds LibTorch's dependency
# closure faster: the C/C++ runtime first, then the libraries whose start-up
# relocations walk the longest (cmake/startup_heavy_libraries.sh explains
# the cost). The same libraries are loaded either way, so only the order of
# the scope changes; measured on the `small` join run it cuts the process's
# exec phase by ~0.1 s of ~0.5-0.6 s (README "Start-up load order").
#
# The options go before the objects on the link line (LINK_OPTIONS), so
# these DT_NEEDED entries precede LibTorch's. -DSPOTPS_STARTUP_LOAD_ORDER=OFF
# links as plain CMake would.
option(SPOTPS_STARTUP_LOAD_ORDER "Link LibTorch's costliest dependencies first" ON)
set(SPOTPS_STARTUP_HEAVY_LIBRARIES 8 CACHE STRING
  "How many of LibTorch's dependencies to link first (cmake/StartupLoadOrder.cmake)")

function(spotps_link_startup_load_order target)
  if(NOT SPOTPS_STARTUP_LOAD_ORDER)
    return()
  endif()
  find_library(SPOTPS_TORCH_CPU_LIBRARY torch_cpu REQUIRED)
  execute_process(
    COMMAND sh ${CMAKE_SOURCE_DIR}/cmake/startup_heavy_libraries.sh
      ${SPOTPS_TORCH_CPU_LIBRARY} ${SPOTPS_STARTUP_HEAVY_LIBRARIES}
    OUTPUT_VARIABLE heavy
    RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    message(WARNING "startup_heavy_libraries.sh failed (${result}); default load order")
    return()
  endif()
  string(REPLACE "\n" ";" heavy "${heavy}")
  list(LENGTH heavy n)
  message(STATUS "Start-up load order: ${n} libraries linked first (C/C++ runtime, then the heaviest)")
  target_link_options(${target} INTERFACE
    "LINKER:--push-state,--no-as-needed"
    ${heavy}
    "LINKER:--pop-state")
endfunction()
