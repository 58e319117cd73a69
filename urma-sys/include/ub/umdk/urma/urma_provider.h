/*
 * urma_provider.h - the interface between the URMA core (liburma.so.0) and a
 * provider plugin (lib<name>.so in the core's urma/ plugin directory).
 *
 * Part of the ABI-exact URMA header set bundled with the mlcachedirect
 * `urma-sys` crate. Written from the measured facts in
 * urma-sys/tests/data/urma_provider_abi_{x86_64,aarch64}.json: the typedef
 * names, tags, field names and order, sizes and offsets of the provider
 * tables, the prototype of every slot and of the registration functions, and
 * the constants are those of the openEuler UMDK header of the same name, on
 * x86_64 and aarch64 (checked by `cargo test -p urma-sys --test provider_abi`).
 *
 * Only what a provider plugin uses is rendered. The core's kernel-command
 * helpers (urma_cmd_*) and option tables, which the real header also
 * declares, are not. The device-registration structure passed to
 * urma_register_sysfs_dev lives in a header the SDK does not install; its
 * layout per core version is in the Rust module urma_sys::provider::sysfs_dev.
 *
 *   #include <ub/umdk/urma/urma_provider.h>
 */
#ifndef URMA_PROVIDER_H
#define URMA_PROVIDER_H

#include "urma_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* urma_sysfs_dev.flag: the device was made by its provider (urma_register_sysfs_dev),
 * not found under /sys/class/ubcore; the core never prunes it when it rescans. */
#define URMA_SYSFS_DEV_FLAG_DRIVER_CREATED (0x1)

/*
 * Types of the public URMA API that only appear behind pointers in the ops
 * table and that this header set does not render: declared here with their
 * UMDK tags, complete nowhere. A provider that leaves the corresponding slots
 * NULL never needs them.
 */
typedef struct urma_tp_cfg urma_tp_cfg_t;
typedef struct urma_tp_attr urma_tp_attr_t;
typedef struct urma_get_tp_cfg urma_get_tp_cfg_t;
typedef struct urma_tp_info urma_tp_info_t;
typedef struct urma_tp_attr_value urma_tp_attr_value_t;
typedef struct urma_active_tp_cfg urma_active_tp_cfg_t;
typedef struct urma_user_ctl_in urma_user_ctl_in_t;
typedef struct urma_user_ctl_out urma_user_ctl_out_t;
typedef struct urma_notifier urma_notifier_t;
typedef struct urma_notify urma_notify_t;
typedef struct urma_net_addr urma_net_addr_t;

/* Passed by value to modify_tp: one 32-bit word of attribute-select bits
 * (the named bits are not rendered). */
typedef union urma_tp_attr_mask {
    uint32_t value;
} urma_tp_attr_mask_t;

/* Completion callback of the asynchronous advise calls. */
typedef void (*urma_advise_async_cb_func)(urma_status_t advise_result, void *cb_arg);

/* One (vendor, device) pair a provider claims; a table of them ends with an
 * entry whose vendor_id or device_id is 0. */
typedef struct urma_match_entry {
    uint16_t vendor_id;
    uint16_t device_id;
} urma_match_entry_t;

/*
 * Per-context operations: a provider's urma_context_t.ops points to one of
 * these. The core calls slot <x> for the public call urma_<x> after its own
 * argument checks; a NULL slot makes that call fail with URMA_EINVAL (see
 * docs/umdk-core.md for the exceptions). 99 slots after the name, in this
 * order.
 */
typedef struct urma_ops {
    const char *name;

    /* JFC */
    urma_jfc_t *(*create_jfc)(urma_context_t *ctx, urma_jfc_cfg_t *cfg);
    urma_status_t (*modify_jfc)(urma_jfc_t *jfc, urma_jfc_attr_t *attr);
    urma_status_t (*delete_jfc)(urma_jfc_t *jfc);
    urma_status_t (*delete_jfc_batch)(urma_jfc_t **jfc_arr, int jfc_num, urma_jfc_t **bad_jfc);
    urma_status_t (*alloc_jfc)(urma_context_t *ctx, urma_jfc_cfg_t *cfg, urma_jfc_t **jfc);
    urma_status_t (*set_jfc_opt)(urma_jfc_t *jfc, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*active_jfc)(urma_jfc_t *jfc);
    urma_status_t (*get_jfc_opt)(urma_jfc_t *jfc, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*deactive_jfc)(urma_jfc_t *jfc);
    urma_status_t (*free_jfc)(urma_jfc_t *jfc);

    /* JFS */
    urma_jfs_t *(*create_jfs)(urma_context_t *ctx, urma_jfs_cfg_t *cfg);
    urma_status_t (*modify_jfs)(urma_jfs_t *jfs, urma_jfs_attr_t *attr);
    urma_status_t (*query_jfs)(urma_jfs_t *jfs, urma_jfs_cfg_t *cfg, urma_jfs_attr_t *attr);
    int (*flush_jfs)(urma_jfs_t *jfs, int cr_cnt, urma_cr_t *cr);
    urma_status_t (*delete_jfs)(urma_jfs_t *jfs);
    urma_status_t (*delete_jfs_batch)(urma_jfs_t **jfs_arr, int jfs_num, urma_jfs_t **bad_jfs);
    urma_status_t (*alloc_jfs)(urma_context_t *ctx, urma_jfs_cfg_t *cfg, urma_jfs_t **jfs);
    urma_status_t (*set_jfs_opt)(urma_jfs_t *jfs, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*active_jfs)(urma_jfs_t *jfs);
    urma_status_t (*get_jfs_opt)(urma_jfs_t *jfs, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*deactive_jfs)(urma_jfs_t *jfs);
    urma_status_t (*free_jfs)(urma_jfs_t *jfs);

    /* JFR */
    urma_jfr_t *(*create_jfr)(urma_context_t *ctx, urma_jfr_cfg_t *cfg);
    urma_status_t (*modify_jfr)(urma_jfr_t *jfr, urma_jfr_attr_t *attr);
    urma_status_t (*query_jfr)(urma_jfr_t *jfr, urma_jfr_cfg_t *cfg, urma_jfr_attr_t *attr);
    urma_status_t (*delete_jfr)(urma_jfr_t *jfr);
    urma_status_t (*delete_jfr_batch)(urma_jfr_t **jfr_arr, int jfr_num, urma_jfr_t **bad_jfr);
    urma_target_jetty_t *(*import_jfr)(urma_context_t *ctx, urma_rjfr_t *rjfr, urma_token_t *token);
    urma_status_t (*unimport_jfr)(urma_target_jetty_t *tjfr);
    urma_status_t (*advise_jfr)(urma_jfs_t *jfs, urma_target_jetty_t *tjfr);
    urma_status_t (*unadvise_jfr)(urma_jfs_t *jfs, urma_target_jetty_t *tjfr);
    urma_status_t (*advise_jfr_async)(urma_jfs_t *jfs, urma_target_jetty_t *tjfr,
                                      urma_advise_async_cb_func cb, void *cb_arg);
    urma_status_t (*alloc_jfr)(urma_context_t *ctx, urma_jfr_cfg_t *cfg, urma_jfr_t **jfr);
    urma_status_t (*set_jfr_opt)(urma_jfr_t *jfr, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*active_jfr)(urma_jfr_t *jfr);
    urma_status_t (*get_jfr_opt)(urma_jfr_t *jfr, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*deactive_jfr)(urma_jfr_t *jfr);
    urma_status_t (*free_jfr)(urma_jfr_t *jfr);

    /* Jetty */
    urma_jetty_t *(*create_jetty)(urma_context_t *ctx, urma_jetty_cfg_t *cfg);
    urma_status_t (*modify_jetty)(urma_jetty_t *jetty, urma_jetty_attr_t *attr);
    urma_status_t (*query_jetty)(urma_jetty_t *jetty, urma_jetty_cfg_t *cfg, urma_jetty_attr_t *attr);
    int (*flush_jetty)(urma_jetty_t *jetty, int cr_cnt, urma_cr_t *cr);
    urma_status_t (*delete_jetty)(urma_jetty_t *jetty);
    urma_status_t (*delete_jetty_batch)(urma_jetty_t **jetty_arr, int jetty_num, urma_jetty_t **bad_jetty);
    urma_target_jetty_t *(*import_jetty)(urma_context_t *ctx, urma_rjetty_t *rjetty, urma_token_t *token);
    urma_status_t (*unimport_jetty)(urma_target_jetty_t *tjetty);
    urma_status_t (*advise_jetty)(urma_jetty_t *jetty, urma_target_jetty_t *tjetty);
    urma_status_t (*unadvise_jetty)(urma_jetty_t *jetty, urma_target_jetty_t *tjetty);
    urma_status_t (*advise_jetty_async)(urma_jetty_t *jetty, urma_target_jetty_t *tjetty,
                                        urma_advise_async_cb_func cb, void *cb_arg);
    urma_status_t (*bind_jetty)(urma_jetty_t *jetty, urma_target_jetty_t *tjetty);
    urma_status_t (*unbind_jetty)(urma_jetty_t *jetty);
    urma_status_t (*alloc_jetty)(urma_context_t *ctx, urma_jetty_cfg_t *cfg, urma_jetty_t **jetty);
    urma_status_t (*set_jetty_opt)(urma_jetty_t *jetty, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*active_jetty)(urma_jetty_t *jetty);
    urma_status_t (*get_jetty_opt)(urma_jetty_t *jetty, uint64_t opt, void *buf, uint32_t len);
    urma_status_t (*deactive_jetty)(urma_jetty_t *jetty);
    urma_status_t (*free_jetty)(urma_jetty_t *jetty);
    urma_jetty_grp_t *(*create_jetty_grp)(urma_context_t *ctx, urma_jetty_grp_cfg_t *cfg);
    urma_status_t (*delete_jetty_grp)(urma_jetty_grp_t *jetty_grp);

    /* JFCE */
    urma_jfce_t *(*create_jfce)(urma_context_t *ctx);
    urma_status_t (*delete_jfce)(urma_jfce_t *jfce);

    /* Transport paths; get_tpn returns the TPN (>= 0) or < 0 */
    int (*get_tpn)(urma_jetty_t *jetty);
    int (*modify_tp)(urma_context_t *ctx, uint32_t tpn, urma_tp_cfg_t *cfg, urma_tp_attr_t *attr,
                     urma_tp_attr_mask_t mask);
    urma_status_t (*get_tp_list)(urma_context_t *ctx, urma_get_tp_cfg_t *cfg, uint32_t *tp_cnt,
                                 urma_tp_info_t *tp_list);
    urma_status_t (*set_tp_attr)(const urma_context_t *ctx, const uint64_t tp_handle,
                                 const uint8_t tp_attr_cnt, const uint32_t tp_attr_bitmap,
                                 const urma_tp_attr_value_t *tp_attr);
    urma_status_t (*get_tp_attr)(const urma_context_t *ctx, const uint64_t tp_handle,
                                 uint8_t *tp_attr_cnt, uint32_t *tp_attr_bitmap,
                                 urma_tp_attr_value_t *tp_attr);
    urma_target_jetty_t *(*import_jetty_ex)(urma_context_t *ctx, urma_rjetty_t *rjetty, urma_token_t *token,
                                            urma_active_tp_cfg_t *tp_cfg);
    urma_target_jetty_t *(*import_jfr_ex)(urma_context_t *ctx, urma_rjfr_t *rjfr, urma_token_t *token,
                                          urma_active_tp_cfg_t *tp_cfg);
    urma_status_t (*bind_jetty_ex)(urma_jetty_t *jetty, urma_target_jetty_t *tjetty,
                                   urma_active_tp_cfg_t *tp_cfg);

    /* Token ids and segments */
    urma_token_id_t *(*alloc_token_id)(urma_context_t *ctx);
    urma_token_id_t *(*alloc_token_id_ex)(urma_context_t *ctx, urma_token_id_flag_t flag);
    urma_status_t (*free_token_id)(urma_token_id_t *token_id);
    urma_target_seg_t *(*register_seg)(urma_context_t *ctx, urma_seg_cfg_t *cfg);
    urma_status_t (*unregister_seg)(urma_target_seg_t *tseg);
    urma_target_seg_t *(*import_seg)(urma_context_t *ctx, urma_seg_t *seg, urma_token_t *token,
                                     uint64_t addr, urma_import_seg_flag_t flag);
    urma_status_t (*unimport_seg)(urma_target_seg_t *tseg);

    /* Asynchronous events */
    urma_status_t (*get_async_event)(urma_context_t *ctx, urma_async_event_t *event);
    void (*ack_async_event)(urma_async_event_t *event);

    /* Provider-defined control */
    int (*user_ctl)(urma_context_t *ctx, urma_user_ctl_in_t *in, urma_user_ctl_out_t *out);

    /* Data path */
    urma_status_t (*post_jfs_wr)(urma_jfs_t *jfs, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad_wr);
    urma_status_t (*post_jfr_wr)(urma_jfr_t *jfr, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad_wr);
    urma_status_t (*post_jetty_send_wr)(urma_jetty_t *jetty, urma_jfs_wr_t *wr, urma_jfs_wr_t **bad_wr);
    urma_status_t (*post_jetty_recv_wr)(urma_jetty_t *jetty, urma_jfr_wr_t *wr, urma_jfr_wr_t **bad_wr);
    int (*poll_jfc)(urma_jfc_t *jfc, int cr_cnt, urma_cr_t *cr);
    urma_status_t (*rearm_jfc)(urma_jfc_t *jfc, bool solicited_only);
    int (*wait_jfc)(urma_jfce_t *jfce, uint32_t jfc_cnt, int time_out, urma_jfc_t *jfc[]);
    void (*ack_jfc)(urma_jfc_t *jfc[], uint32_t nevents[], uint32_t jfc_cnt);

    /* Asynchronous import and bind, notifiers */
    urma_target_jetty_t *(*import_jetty_async)(urma_notifier_t *notifier, const urma_rjetty_t *rjetty,
                                               const urma_token_t *token, uint64_t user_ctx, int timeout);
    urma_status_t (*unimport_jetty_async)(urma_target_jetty_t *tjetty);
    urma_status_t (*bind_jetty_async)(urma_notifier_t *notifier, urma_jetty_t *jetty,
                                      urma_target_jetty_t *tjetty, uint64_t user_ctx, int timeout);
    urma_status_t (*unbind_jetty_async)(urma_jetty_t *jetty);
    urma_notifier_t *(*create_notifier)(urma_context_t *ctx);
    urma_status_t (*delete_notifier)(urma_notifier_t *notifier);
    int (*wait_notify)(urma_notifier_t *notifier, uint32_t cnt, urma_notify_t *notify, int timeout);
    void (*ack_notify)(uint32_t cnt, urma_notify_t *notify);

    /* Addresses */
    urma_status_t (*get_eid_by_ip)(const urma_context_t *ctx, const urma_net_addr_t *net_addr,
                                   urma_eid_t *eid);
    urma_status_t (*get_ip_by_eid)(const urma_context_t *ctx, const urma_eid_t *eid,
                                   urma_net_addr_t *net_addr);
    urma_status_t (*get_smac)(const urma_context_t *ctx, uint8_t *mac);
    urma_status_t (*get_dmac)(const urma_context_t *ctx, const urma_net_addr_t *net_addr, uint8_t *mac);
} urma_ops_t;

/* Provider attributes; the core stores them but reads neither. */
typedef struct urma_provider_attr {
    uint32_t version;
    urma_transport_type_t transport_type;
} urma_provider_attr_t;

/*
 * What a provider registers with urma_register_provider_ops. name must not be
 * NULL: a device whose driver name equals it (or whose vendor/device pair is
 * in match_table) belongs to this provider. init runs at every urma_init and
 * must return URMA_SUCCESS for the provider to stay registered; uninit runs
 * at urma_uninit. query_device is never called by the core; get_uasid is
 * obsolete.
 */
typedef struct urma_provider_ops {
    const char *name;
    urma_provider_attr_t attr;
    urma_match_entry_t *match_table;
    urma_status_t (*init)(urma_init_attr_t *conf);
    urma_status_t (*uninit)(void);
    urma_status_t (*query_device)(urma_device_t *dev, urma_device_attr_t *dev_attr);
    urma_context_t *(*create_context)(urma_device_t *dev, uint32_t eid_index, int dev_fd);
    urma_status_t (*delete_context)(urma_context_t *ctx);
    urma_status_t (*get_uasid)(uint32_t *uasid);
} urma_provider_ops_t;

/*
 * Registration, exported by the core. The ops table is kept by pointer (it
 * must outlive the registration); both return 0 on success, < 0 on failure.
 * A plugin registers from its ELF constructor and unregisters from its
 * destructor.
 */
int urma_register_provider_ops(urma_provider_ops_t *provider_ops);
int urma_unregister_provider_ops(urma_provider_ops_t *provider_ops);

/*
 * Adds a device a provider made itself to the core's device list: 0 on
 * success, -1 if no registered provider claims it or a device of that name
 * exists. The structure (and the urma_device_t it points to) must come from
 * malloc/calloc: the core keeps both and frees them at urma_uninit. There is
 * no call to remove a device.
 */
int urma_register_sysfs_dev(struct urma_sysfs_dev *dev);

#ifdef __cplusplus
}
#endif

#endif /* URMA_PROVIDER_H */
