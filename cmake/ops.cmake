include_guard(GLOBAL)
# The C tables of the operator registry (host/torchmcu/ops), generated at configure time and kept
# by no one: kernels.json (operator -> entry point -> translation unit, for cmake/selective.cmake),
# op_args.h (argument positions), kernel_entries.h (the kernels' declarations) and control_ops.inc
# (the runtime's loop kernels).
#
# tm_generate_op_tables(<out var>) writes them into ${CMAKE_BINARY_DIR}/generated with
# `${Python3_EXECUTABLE} -m torchmcu.ops.generate --out <dir>` (PYTHONPATH=<tree>/host: the
# registry of the tree being built, whatever torchmcu the Python has installed; it needs numpy)
# and sets <out var> to that directory. The generator runs again only when a file it read (a
# definition module, the generator, a kernel source with a scratch function) is newer than its
# last run, or a definition module is added; it rewrites only the files whose text changed, so
# unchanged tables recompile nothing. Called from several directories, it runs once per
# configure.
set(TM_OPS_TABLES kernels.json op_args.h kernel_entries.h control_ops.inc)

function(tm_generate_op_tables out_var)
  set(_out "${CMAKE_BINARY_DIR}/generated")
  set(${out_var} "${_out}" PARENT_SCOPE)
  get_property(_done GLOBAL PROPERTY TM_OPS_TABLES_GENERATED)
  if(_done)
    return()
  endif()
  set_property(GLOBAL PROPERTY TM_OPS_TABLES_GENERATED TRUE)

  # A copy in the tree (as checked in before the tables were generated) would shadow the
  # generated one on an include path or in a reader's default: refuse it.
  foreach(_stale firmware/kernels/kernels.json firmware/kernels/op_args.h firmware/kernels/kernel_entries.h
                 firmware/runtime/src/control_ops.inc)
    if(EXISTS "${PROJECT_SOURCE_DIR}/${_stale}")
      message(FATAL_ERROR "${PROJECT_SOURCE_DIR}/${_stale}: the build generates this file "
                          "(cmake/ops.cmake) and a copy in the tree would shadow it: delete it")
    endif()
  endforeach()

  set(_host "${PROJECT_SOURCE_DIR}/host")
  set(_stamp "${_out}/.generated")
  set(_inputs_file "${_out}/.inputs")
  # A new definition module is an input the last run did not read: the glob notices it.
  file(GLOB _defs CONFIGURE_DEPENDS "${_host}/torchmcu/ops/defs/*.py")
  set(_inputs "")
  if(EXISTS "${_inputs_file}")
    file(STRINGS "${_inputs_file}" _inputs)
  endif()
  set(_run FALSE)
  if(NOT EXISTS "${_stamp}")
    set(_run TRUE)
  endif()
  foreach(_f IN LISTS _inputs _defs)
    if(_run)
      break()
    endif()
    if(NOT _f IN_LIST _inputs OR NOT EXISTS "${_f}" OR "${_f}" IS_NEWER_THAN "${_stamp}")
      set(_run TRUE)
    endif()
  endforeach()
  foreach(_t IN LISTS TM_OPS_TABLES)
    if(NOT EXISTS "${_out}/${_t}")
      set(_run TRUE)
    endif()
  endforeach()

  if(_run)
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
    execute_process(
      COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${_host}" ${Python3_EXECUTABLE} -m torchmcu.ops.generate
              --out "${_out}" --inputs "${_inputs_file}"
      RESULT_VARIABLE _rc OUTPUT_VARIABLE _said ERROR_VARIABLE _err)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "generating the operator tables failed (${Python3_EXECUTABLE} -m "
                          "torchmcu.ops.generate with PYTHONPATH=${_host}; it needs Python >= 3.11 with "
                          "numpy, -DPython3_EXECUTABLE=<python> picks one):\n${_err}")
    endif()
    file(TOUCH "${_stamp}")
    file(STRINGS "${_inputs_file}" _inputs)
    string(STRIP "${_said}" _said)
    if(_said)
      string(REPLACE "\n" ", " _said "${_said}")
      message(STATUS "torchmcu operator tables: ${_said}")
    endif()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_inputs})
endfunction()
