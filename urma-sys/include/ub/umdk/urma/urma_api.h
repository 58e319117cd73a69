/*
 * urma_api.h - URMA user-space API (the subset used by MLCacheDirect).
 *
 * Part of the ABI-exact URMA header set bundled with the mlcachedirect
 * `urma-sys` crate, written from the measured ABI facts in
 * urma-sys/tests/data/urma_abi_{x86_64,aarch64}.json. The 49 prototypes
 * below are those of the real openEuler UMDK urma_api.h (checked with __builtin_types_compatible_p by
 * `cargo test -p urma-sys`). The library is liburma.so.0 (-lurma).
 *
 *   #include <ub/umdk/urma/urma_api.h>
 */
#ifndef URMA_API_H
#define URMA_API_H

#include "urma_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- initialisation and devices ------------------------------------------ */
urma_status_t urma_init(urma_init_attr_t *conf);
urma_status_t urma_uninit(void);
urma_device_t **urma_get_device_list(int *num_devices);
void urma_free_device_list(urma_device_t **device_list);
urma_device_t *urma_get_device_by_name(char *dev_name);
urma_eid_info_t *urma_get_eid_list(urma_device_t *dev, uint32_t *cnt);
void urma_free_eid_list(urma_eid_info_t *eid_list);
urma_status_t urma_query_device(urma_device_t *dev, urma_device_attr_t *dev_attr);

/* ---- context -------------------------------------------------------------- */
urma_context_t *urma_create_context(urma_device_t *dev, uint32_t eid_index);
urma_status_t urma_delete_context(urma_context_t *ctx);

/* ---- completion event channel and completion queues ---------------------- */
urma_jfce_t *urma_create_jfce(urma_context_t *ctx);
urma_status_t urma_delete_jfce(urma_jfce_t *jfce);
urma_jfc_t *urma_create_jfc(urma_context_t *ctx, urma_jfc_cfg_t *jfc_cfg);
urma_status_t urma_delete_jfc(urma_jfc_t *jfc);

/* ---- send / receive queues and jetties ------------------------------------ */
urma_jfs_t *urma_create_jfs(urma_context_t *ctx, urma_jfs_cfg_t *jfs_cfg);
urma_status_t urma_delete_jfs(urma_jfs_t *jfs);
urma_status_t urma_query_jfs(urma_jfs_t *jfs, urma_jfs_cfg_t *cfg, urma_jfs_attr_t *attr);
urma_jfr_t *urma_create_jfr(urma_context_t *ctx, urma_jfr_cfg_t *jfr_cfg);
urma_status_t urma_delete_jfr(urma_jfr_t *jfr);
urma_jetty_t *urma_create_jetty(urma_context_t *ctx, urma_jetty_cfg_t *jetty_cfg);
urma_status_t urma_delete_jetty(urma_jetty_t *jetty);
urma_status_t urma_query_jetty(urma_jetty_t *jetty, urma_jetty_cfg_t *cfg, urma_jetty_attr_t *attr);

/* ---- remote jetties / JFRs ------------------------------------------------ */
urma_target_jetty_t *urma_import_jetty(urma_context_t *ctx, urma_rjetty_t *rjetty,
    urma_token_t *token_value);
urma_status_t urma_unimport_jetty(urma_target_jetty_t *tjetty);
urma_target_jetty_t *urma_import_jfr(urma_context_t *ctx, urma_rjfr_t *rjfr, urma_token_t *token_value);
urma_status_t urma_unimport_jfr(urma_target_jetty_t *target_jfr);
urma_status_t urma_advise_jfr(urma_jfs_t *jfs, urma_target_jetty_t *tjfr);
urma_status_t urma_unadvise_jfr(urma_jfs_t *jfs, urma_target_jetty_t *tjfr);
urma_status_t urma_advise_jetty(urma_jetty_t *jetty, urma_target_jetty_t *tjetty);
urma_status_t urma_unadvise_jetty(urma_jetty_t *jetty, urma_target_jetty_t *tjetty);
urma_status_t urma_bind_jetty(urma_jetty_t *jetty, urma_target_jetty_t *tjetty);
urma_status_t urma_unbind_jetty(urma_jetty_t *jetty);

/* ---- segments ------------------------------------------------------------- */
urma_token_id_t *urma_alloc_token_id(urma_context_t *ctx);
urma_status_t urma_free_token_id(urma_token_id_t *token_id);
urma_target_seg_t *urma_register_seg(urma_context_t *ctx, urma_seg_cfg_t *seg_cfg);
urma_status_t urma_unregister_seg(urma_target_seg_t *target_seg);
urma_target_seg_t *urma_import_seg(urma_context_t *ctx, urma_seg_t *seg, urma_token_t *token_value,
    uint64_t addr, urma_import_seg_flag_t flag);
urma_status_t urma_unimport_seg(urma_target_seg_t *tseg);

/* ---- data path ------------------------------------------------------------ */
urma_status_t urma_post_jfs_wr(urma_jfs_t *jfs, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad_wr);
urma_status_t urma_post_jfr_wr(urma_jfr_t *jfr, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad_wr);
urma_status_t urma_post_jetty_send_wr(urma_jetty_t *jetty, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad_wr);
urma_status_t urma_post_jetty_recv_wr(urma_jetty_t *jetty, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad_wr);

/* Returns the number of CRs written (0..cr_cnt), or < 0 on error. */
int urma_poll_jfc(urma_jfc_t *jfc, int cr_cnt, urma_cr_t *cr);
urma_status_t urma_rearm_jfc(urma_jfc_t *jfc, bool solicited_only);
/* Returns the number of JFCs stored in jfc[], 0 on timeout, -1 on error. */
int urma_wait_jfc(urma_jfce_t *jfce, uint32_t jfc_cnt, int time_out, urma_jfc_t *jfc[]);
void urma_ack_jfc(urma_jfc_t *jfc[], uint32_t nevents[], uint32_t jfc_cnt);

/* ---- asynchronous events and logging -------------------------------------- */
urma_status_t urma_get_async_event(urma_context_t *ctx, urma_async_event_t *event);
void urma_ack_async_event(urma_async_event_t *event);
urma_status_t urma_register_log_func(urma_log_cb_t func);

#ifdef __cplusplus
}
#endif

#endif /* URMA_API_H */
