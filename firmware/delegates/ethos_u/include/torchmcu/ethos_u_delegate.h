/*
 * The Ethos-U delegate of the firmware: the "EthosUBackend" backend that runs a Vela command
 * stream on the NPU through the driver (torchmcu/ethos_u_driver.h). The runtime stays board
 * independent: the board/runner code initialises the NPU and binds it here before method init.
 */
#ifndef TORCHMCU_ETHOS_U_DELEGATE_H
#define TORCHMCU_ETHOS_U_DELEGATE_H

#include "torchmcu/ethos_u_blob.h"
#include "torchmcu/ethos_u_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend (registered in tm_all_kernels by the generated registry). */
extern const tm_backend tm_ethos_u_backend;

/*
 * Binds the NPU every EthosUBackend delegate runs on, and the board's fast scratch memory
 * (Vela region 2, used with Dedicated_Sram memory modes; NULL, 0 when the board has none).
 * Without a bound device, method init rejects EthosUBackend delegates.
 */
void tm_ethos_u_delegate_bind(tm_ethosu_device *device, void *fast_scratch, size_t fast_scratch_size);

/* Board helper: initialises the NPU at `base` (memory-mapped registers) in a static device and
 * binds it (no fast scratch). */
tm_status tm_ethos_u_delegate_init_board(uintptr_t base, uint32_t timeout_polls);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_ETHOS_U_DELEGATE_H */
