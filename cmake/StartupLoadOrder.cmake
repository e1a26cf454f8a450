# spotps_link_startup_load_order(TARGET): every executable linking TARGET
# gets a load order in which the dynamic loader binds LibTorch's dependency
# closure faster: the C/C++ runtime first, then the libraries whose start-up
# relocations walk the longest (cmake/startup_heavy_libraries.sh explains
# the cost). The same libraries are loaded either way, so only the order of
# the scope changes; measured on the `small` join run it cuts the process's
# exec phase by ~0.1 s of ~0.5-0.6 s (docs/architecture.md, "The trainer").
#
# The options go before the objects on the link line (LINK_OPTIONS), so
# these DT_NEEDED entries precede LibTorch's. -DSPOTPS_STARTUP_LOAD_ORDER=OFF
# links as plain CMake would.
option(SPOTPS_STARTUP_LOAD_ORDER "Link LibTorch's costliest dependencies first" ON)
set(SPOTPS_STARTUP_HEAVY_LIBRARIES 8 CACHE STRING
  "How many of LibTorch's dependencies to link first (cmake/StartupLoadOrder.cmake)")

# Sets OUT to the script's list of libraries, or to nothing if it failed.
# The script reads ~340 libraries (~5 s), so its answer is cached and the
# script runs again only when LibTorch, the count or the script changes, or
# a library in the answer is gone (a package upgrade renamed it).
function(spotps_startup_heavy_libraries out)
  set(script ${CMAKE_SOURCE_DIR}/cmake/startup_heavy_libraries.sh)
  file(TIMESTAMP ${SPOTPS_TORCH_CPU_LIBRARY} torch_time)
  file(MD5 ${script} script_md5)
  set(key "${SPOTPS_TORCH_CPU_LIBRARY} ${torch_time} ${SPOTPS_STARTUP_HEAVY_LIBRARIES} ${script_md5}")
  set(stale FALSE)
  foreach(lib IN LISTS SPOTPS_STARTUP_HEAVY_ANSWER)
    if(NOT EXISTS ${lib})
      set(stale TRUE)
    endif()
  endforeach()
  if(NOT stale AND SPOTPS_STARTUP_HEAVY_ANSWER AND key STREQUAL "${SPOTPS_STARTUP_HEAVY_KEY}")
    set(${out} "${SPOTPS_STARTUP_HEAVY_ANSWER}" PARENT_SCOPE)
    return()
  endif()
  execute_process(
    COMMAND sh ${script} ${SPOTPS_TORCH_CPU_LIBRARY} ${SPOTPS_STARTUP_HEAVY_LIBRARIES}
    OUTPUT_VARIABLE heavy
    RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT result EQUAL 0)
    message(WARNING "startup_heavy_libraries.sh failed (${result}); default load order")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  string(REPLACE "\n" ";" heavy "${heavy}")
  set(SPOTPS_STARTUP_HEAVY_KEY "${key}" CACHE INTERNAL "")
  set(SPOTPS_STARTUP_HEAVY_ANSWER "${heavy}" CACHE INTERNAL "")
  set(${out} "${heavy}" PARENT_SCOPE)
endfunction()

function(spotps_link_startup_load_order target)
  if(NOT SPOTPS_STARTUP_LOAD_ORDER)
    return()
  endif()
  find_library(SPOTPS_TORCH_CPU_LIBRARY torch_cpu REQUIRED)
  spotps_startup_heavy_libraries(heavy)
  if(NOT heavy)
    return()
  endif()
  list(LENGTH heavy n)
  message(STATUS "Start-up load order: ${n} libraries linked first (C/C++ runtime, then the heaviest)")
  target_link_options(${target} INTERFACE
    "LINKER:--push-state,--no-as-needed"
    ${heavy}
    "LINKER:--pop-state")
endfunction()
