# Reads boards/${TORCHMCU_BOARD}/board.json (the same file host/torchmcu/boards.py reads) and sets
# the CPU flags for every target of the firmware build. Variables set here:
#   TM_BOARD_DIR, TM_BOARD_JSON, TM_BOARD_CPU, TM_BOARD_OUTPUT (semihosting|uart), TM_BOARD_UART_BASE
# and tm_board_get(<out> <json path...>) for other fields.
set(TM_BOARD_DIR ${CMAKE_SOURCE_DIR}/boards/${TORCHMCU_BOARD})
if(NOT EXISTS ${TM_BOARD_DIR}/board.json)
  file(GLOB _known RELATIVE ${CMAKE_SOURCE_DIR}/boards ${CMAKE_SOURCE_DIR}/boards/*/board.json)
  list(TRANSFORM _known REPLACE "/board.json$" "")
  message(FATAL_ERROR "unknown board '${TORCHMCU_BOARD}' (no boards/${TORCHMCU_BOARD}/board.json); "
                      "known boards: ${_known}")
endif()
file(READ ${TM_BOARD_DIR}/board.json TM_BOARD_JSON)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TM_BOARD_DIR}/board.json)

function(tm_board_get out)
  string(JSON _value ERROR_VARIABLE _error GET "${TM_BOARD_JSON}" ${ARGN})
  if(_error)
    message(FATAL_ERROR "boards/${TORCHMCU_BOARD}/board.json: ${_error}")
  endif()
  set(${out} "${_value}" PARENT_SCOPE)
endfunction()

tm_board_get(TM_BOARD_CPU cpu)
set(TORCHMCU_OUTPUT "" CACHE STRING "Console of the firmware: semihosting or uart (default: the board's)")
if(TORCHMCU_OUTPUT)
  set(TM_BOARD_OUTPUT ${TORCHMCU_OUTPUT})
else()
  tm_board_get(TM_BOARD_OUTPUT output)
endif()
if(NOT TM_BOARD_OUTPUT MATCHES "^(semihosting|uart)$")
  message(FATAL_ERROR "console output '${TM_BOARD_OUTPUT}' is not semihosting or uart")
endif()
tm_board_get(TM_BOARD_UART_BASE uart base)

string(JSON _nflags LENGTH "${TM_BOARD_JSON}" cpu_flags)
set(TM_BOARD_CPU_FLAGS "")
math(EXPR _last "${_nflags} - 1")
foreach(i RANGE ${_last})
  string(JSON _flag GET "${TM_BOARD_JSON}" cpu_flags ${i})
  list(APPEND TM_BOARD_CPU_FLAGS ${_flag})
endforeach()

# Every object of the image (runtime, kernels, runner) is built for the board's CPU.
add_compile_options(${TM_BOARD_CPU_FLAGS} -ffunction-sections -fdata-sections -fno-common)
add_link_options(${TM_BOARD_CPU_FLAGS})
message(STATUS "torchmcu: firmware for ${TORCHMCU_BOARD}: ${TM_BOARD_CPU} (${TM_BOARD_CPU_FLAGS}), "
               "console ${TM_BOARD_OUTPUT}")
