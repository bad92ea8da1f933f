# Toolchain file for bare-metal Arm Cortex-M with the GNU Arm toolchain (arm-none-eabi-gcc).
# CPU flags (-mcpu, -mfloat-abi) come from the board (boards/<name>/board.json), not from here,
# so one toolchain file serves every board. Pass it as an absolute path (CMakePresets.json does).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
# Compiler checks link a static library instead of an executable: there is no startup code yet.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(TORCHMCU_GCC_PREFIX "arm-none-eabi-" CACHE STRING "Prefix of the cross tools")
find_program(CMAKE_C_COMPILER ${TORCHMCU_GCC_PREFIX}gcc REQUIRED)
find_program(CMAKE_ASM_COMPILER ${TORCHMCU_GCC_PREFIX}gcc REQUIRED)
find_program(CMAKE_OBJCOPY ${TORCHMCU_GCC_PREFIX}objcopy REQUIRED)
find_program(CMAKE_SIZE ${TORCHMCU_GCC_PREFIX}size REQUIRED)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_EXECUTABLE_SUFFIX_C ".elf")
