# Selective build of the kernels: which kernels an image compiles and registers.
#   TORCHMCU_OPS_YAML  a selected_operators.yaml (ExecuTorch layout; torchmcu export writes one,
#                      `torchmcu ops merge` joins several). Empty: every kernel of the table.
# tm_selective_kernels(<table.json> <out sources var> <out registry .c path var> [<out backend
# targets var>]) reads the kernel table (operator -> entry point -> translation unit, the sources
# relative to the calling directory; cmake/ops.cmake generates it from the registry), resolves
# the selection (through `python -m torchmcu.selective`, so the yaml is interpreted in one
# place), and generates the registry `tm_all_kernels` holding exactly the selected kernels and
# the selected delegate backends among those registered with tm_register_backend (the libraries
# to link come back in the fourth variable). Only the translation units
# of selected kernels (and the table's common sources) are returned for compiling, and
# TM_KERNEL_VARIANT_DEFINES holds the defines of the kernel variants the selection leaves out.
set(TORCHMCU_OPS_YAML "" CACHE FILEPATH "selected_operators.yaml: compile and register only its kernels")

# _tm_selective_query(<out var> <what> <args...>): `python -m torchmcu.selective --yaml <the
# selection's yaml> <args...>` (the yaml interpreted in one place), its output in <out var>; a
# failure stops the configure naming <what>. Called inside tm_selective_kernels, whose _yaml it
# reads.
function(_tm_selective_query out what)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -m torchmcu.selective --yaml "${_yaml}" ${ARGN}
    RESULT_VARIABLE _rc OUTPUT_VARIABLE _output ERROR_VARIABLE _err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "resolving ${what} failed (${Python3_EXECUTABLE} -m torchmcu.selective):\n"
                        "${_err}")
  endif()
  set(${out} "${_output}" PARENT_SCOPE)
endfunction()

function(tm_selective_kernels table out_sources out_registry)
  set(_dir "${CMAKE_CURRENT_SOURCE_DIR}")
  file(READ "${table}" _json)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${table}")

  # The whole table: operator, symbol and source of each kernel.
  string(JSON _n LENGTH "${_json}" kernels)
  math(EXPR _last "${_n} - 1")
  set(_all_ops "")
  foreach(i RANGE ${_last})
    string(JSON _op GET "${_json}" kernels ${i} operator)
    string(JSON _sym GET "${_json}" kernels ${i} symbol)
    string(JSON _src GET "${_json}" kernels ${i} source)
    string(JSON _prep ERROR_VARIABLE _no_prep GET "${_json}" kernels ${i} prepare)
    if(_no_prep)
      set(_prep "NULL")
    endif()
    set(_prep_${i} "${_prep}")
    list(APPEND _all_ops "${_op}")
    set(_sym_${i} "${_sym}")
    set(_src_${i} "${_src}")
  endforeach()
  set(_common "")
  string(JSON _nc LENGTH "${_json}" common_sources)
  if(_nc GREATER 0)
    math(EXPR _lastc "${_nc} - 1")
    foreach(i RANGE ${_lastc})
      string(JSON _src GET "${_json}" common_sources ${i})
      list(APPEND _common "${_src}")
    endforeach()
  endif()
  set(_headers "")
  string(JSON _nh LENGTH "${_json}" headers)
  math(EXPR _lasth "${_nh} - 1")
  foreach(i RANGE ${_lasth})
    string(JSON _h GET "${_json}" headers ${i})
    string(APPEND _headers "#include \"${_h}\"\n")
  endforeach()

  # Every kernel source of the tree must be in the table, or it would silently never be built.
  file(GLOB_RECURSE _present RELATIVE "${_dir}" CONFIGURE_DEPENDS "${_dir}/*/*.c")
  foreach(_src IN LISTS _present)
    set(_known FALSE)
    if(_src IN_LIST _common)
      set(_known TRUE)
    endif()
    foreach(i RANGE ${_last})
      if(_src STREQUAL _src_${i})
        set(_known TRUE)
      endif()
    endforeach()
    if(NOT _known)
      message(FATAL_ERROR "${_dir}/${_src} is not in ${table}: define its operator in "
                          "host/torchmcu/ops/defs (or list it in torchmcu.ops.generate's common sources) so "
                          "selective builds know when to compile it")
    endif()
  endforeach()

  # The selection.
  if(TORCHMCU_OPS_YAML)
    get_filename_component(_yaml "${TORCHMCU_OPS_YAML}" ABSOLUTE BASE_DIR ${CMAKE_BINARY_DIR})
    if(NOT EXISTS "${_yaml}")
      message(FATAL_ERROR "TORCHMCU_OPS_YAML: ${_yaml} does not exist")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_yaml}")
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
    _tm_selective_query(_selected "the kernels selected by ${_yaml}" --table "${table}")
    set(_what "selected by ${_yaml}")
  else()
    set(_selected "${_all_ops}")
    set(_what "every kernel of the table (no TORCHMCU_OPS_YAML)")
  endif()

  # Registry entries and translation units of the selected kernels, in table order.
  set(_sources "")
  foreach(_src IN LISTS _common)
    list(APPEND _sources "${_dir}/${_src}")
  endforeach()
  set(_entries "")
  set(_count 0)
  foreach(i RANGE ${_last})
    list(GET _all_ops ${i} _op)
    if(NOT _op IN_LIST _selected)
      continue()
    endif()
    if(_op MATCHES "^(.*::[^.]*)\\.(.*)$")
      set(_name "${CMAKE_MATCH_1}")
      set(_overload "${CMAKE_MATCH_2}")
    else()
      set(_name "${_op}")
      set(_overload "")
    endif()
    string(APPEND _entries "    {\"${_name}\", \"${_overload}\", ${_sym_${i}}, ${_prep_${i}}},\n")
    math(EXPR _count "${_count} + 1")
    list(APPEND _sources "${_dir}/${_src_${i}}")
  endforeach()
  list(REMOVE_DUPLICATES _sources)
  if(_count EQUAL 0) # C has no empty arrays: one unused slot, count 0
    set(_entries "    {NULL, NULL, NULL, NULL},\n")
  endif()

  # Delegate backends of the image: of the backends delegate directories offered with
  # tm_register_backend (firmware/delegates/*, before this directory was added), those the yaml
  # selects (build_features 'delegate:<id>', or all with include_all_non_op_selectives), or
  # every one without a yaml. A selected id no directory offers stops here, naming it.
  get_property(_backend_ids GLOBAL PROPERTY TM_BACKEND_IDS)
  if(TORCHMCU_OPS_YAML)
    string(REPLACE ";" "," _offered "${_backend_ids}")
    _tm_selective_query(_backend_ids "the delegates selected by ${_yaml} for ${TORCHMCU_BOARD}"
                        "--delegates=${_offered}") # one word: the list may be empty
  endif()
  # Runtime features (firmware/runtime/src/loader.h): every one without a yaml, else those the
  # yaml selects (torchmcu.selective.oplist.runtime_features); a program using one the image
  # lacks is refused at load, naming it.
  set(_features "delegates;control_flow;string_list_values")
  if(TORCHMCU_OPS_YAML)
    _tm_selective_query(_features "the runtime features selected by ${_yaml}" --runtime-features)
  endif()
  foreach(_f delegates control_flow string_list_values)
    string(TOUPPER "${_f}" _F)
    if(_f IN_LIST _features)
      target_compile_definitions(tm_runtime PRIVATE TM_FEATURE_${_F}=1)
    else()
      target_compile_definitions(tm_runtime PRIVATE TM_FEATURE_${_F}=0)
    endif()
  endforeach()
  # Kernel variants (torchmcu.selective.variants): every one without a yaml, else the defines
  # (TM_VARIANT_...=0) of those the yaml's programs never take; the kernel refuses a call whose
  # path was left out (TM_ERR_UNSUPPORTED at method init) and `torchmcu build` names it first.
  set(_variant_defines "")
  if(TORCHMCU_OPS_YAML)
    _tm_selective_query(_variant_defines "the kernel variants selected by ${_yaml}"
                        --kernel-variants)
  endif()
  set(TM_KERNEL_VARIANT_DEFINES "${_variant_defines}" PARENT_SCOPE)
  list(LENGTH _variant_defines _nleft_out)
  set(_backend_decls "")
  set(_backend_entries "")
  set(_nbackends 0)
  set(_backend_targets "")
  foreach(_id IN LISTS _backend_ids)
    get_property(_bsym GLOBAL PROPERTY TM_BACKEND_SYMBOL_${_id})
    get_property(_btarget GLOBAL PROPERTY TM_BACKEND_TARGET_${_id})
    string(APPEND _backend_decls "extern const tm_backend ${_bsym}; /* ${_id} */\n")
    string(APPEND _backend_entries "    &${_bsym},\n")
    math(EXPR _nbackends "${_nbackends} + 1")
    list(APPEND _backend_targets ${_btarget})
  endforeach()
  if(_nbackends EQUAL 0)
    set(_backend_entries "    NULL,\n")
  endif()
  if(ARGC GREATER 3) # optional fourth argument: the backend libraries to link
    set(${ARGV3} "${_backend_targets}" PARENT_SCOPE)
  endif()

  set(_registry "${CMAKE_CURRENT_BINARY_DIR}/registry_selected.c")
  file(CONFIGURE OUTPUT "${_registry}" @ONLY CONTENT [=[
/* Generated by cmake/selective.cmake from the operator registry's kernels.json: @_what@. */
#include <stddef.h>

@_headers@#include "torchmcu/types.h"

static const tm_kernel_entry kSelectedKernels[] = {
@_entries@};

@_backend_decls@static const tm_backend *const kBackends[] = {
@_backend_entries@};

const tm_kernel_registry tm_all_kernels = {kSelectedKernels, @_count@, kBackends, @_nbackends@};
]=])
  list(LENGTH _sources _nsources)
  message(STATUS "torchmcu kernels: ${_count} registered, ${_nsources} translation units (${_what}); "
                 "delegate backends: ${_nbackends} (${_backend_ids}); runtime features: ${_features}; "
                 "kernel variants left out: ${_nleft_out}")
  set(${out_sources} "${_sources}" PARENT_SCOPE)
  set(${out_registry} "${_registry}" PARENT_SCOPE)
endfunction()

# tm_register_backend(<delegate id> <backend symbol> <library target>): a delegate directory
# offers its backend (`const tm_backend <symbol>` in <target>) to the image's registry. Call it
# before firmware/kernels is added. The generator registers the offered backends the yaml selects
# (every one without a yaml).
function(tm_register_backend id symbol target)
  set_property(GLOBAL APPEND PROPERTY TM_BACKEND_IDS "${id}")
  set_property(GLOBAL PROPERTY TM_BACKEND_SYMBOL_${id} "${symbol}")
  set_property(GLOBAL PROPERTY TM_BACKEND_TARGET_${id} "${target}")
endfunction()
