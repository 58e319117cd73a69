/*
 * urma_types.h - URMA data types.
 *
 * Part of the ABI-exact URMA header set bundled with the mlcachedirect
 * `urma-sys` crate. Written from the measured ABI facts in
 * urma-sys/tests/data/urma_abi_{x86_64,aarch64}.json (openEuler UMDK
 * liburma.so.0, LP64 / GCC / glibc): every type listed there has the same name,
 * tag, field names, size, field offsets and bitfield positions here, on x86_64
 * and on aarch64. Bitfields are LSB first (GCC, both architectures); flag unions are `{ struct {...} bs; value; }`.
 * Checked by `cargo test -p urma-sys` (C probe + Rust bindings vs the JSON).
 *
 * Consumers include <ub/umdk/urma/urma_api.h>.
 */
#ifndef URMA_TYPES_H
#define URMA_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#ifdef __cplusplus
#include <atomic>
#else
#include <stdatomic.h>
#endif

#include "urma_opcode.h"

/*
 * uint8_t/uint64_t bitfields and anonymous unions are GCC/C11 extensions in
 * ISO C99; mark them so that -pedantic builds stay quiet. The layout is the
 * one GCC (and clang) give on x86_64 and aarch64.
 */
#if defined(__GNUC__) || defined(__clang__)
#define URMA_EXTENSION __extension__
#define URMA_PACKED __attribute__((packed))
#else
#define URMA_EXTENSION
#define URMA_PACKED
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define URMA_API_VERSION 9
#define MAX_PORT_CNT 8
#define URMA_MAX_JETTY_IN_JETTY_GRP 32
#define URMA_MAX_NAME 64
#define URMA_MAX_PATH 4096
#define URMA_EID_SIZE 16
#define URMA_MAX_PRIORITY_CNT 16
#define URMA_IPV4_MAP_IPV6_PREFIX 0x0000ffff
#define URMA_MAX_EID_CNT 1024
#define URMA_CC_IDX_TABLE_SIZE 80
#define URMA_OPT_REVERSED_NUM 4
#define URMA_EID_STR_LEN 39
#define URMA_SEG_TOKEN_ID_INVALID 0xFFFFFFFFU
#define URMA_MAX_DEV_NAME 64
#define URMA_GUID_SIZE 16
#define URMA_IP_ADDR_BYTES 16
#define URMA_MAC_BYTES 6

/* bits of urma_jfs_opt_t / urma_jfr_opt_t / urma_jfc_opt_t opt masks */
#define URMA_JFS_SQE_BASE_ADDR_MASK 0x1
#define URMA_JFS_ID_MASK (0x1 << 1)
#define URMA_JFS_DB_ADDR_MASK (0x1 << 2)
#define URMA_JFS_DB_STATUS_MASK (0x1 << 3)
#define URMA_JFS_PI_MASK (0x1 << 4)
#define URMA_JFS_PI_TYPE_MASK (0x1 << 5)
#define URMA_JFS_CI_MASK (0x1 << 6)

#define URMA_JFR_RQE_BASE_ADDR_MASK 0x1
#define URMA_JFR_ID_MASK (0x1 << 1)
#define URMA_JFR_DB_ADDR_MASK (0x1 << 2)
#define URMA_JFR_DB_STATUS_MASK (0x1 << 3)
#define URMA_JFR_PI_MASK (0x1 << 4)
#define URMA_JFR_PI_TYPE_MASK (0x1 << 5)
#define URMA_JFR_CI_MASK (0x1 << 6)

#define URMA_JFC_CQE_BASE_ADDR_MASK 0x1
#define URMA_JFC_ID_MASK (0x1 << 1)
#define URMA_JFC_DB_ADDR_MASK (0x1 << 2)
#define URMA_JFC_DB_STATUS_MASK (0x1 << 3)
#define URMA_JFC_PI_MASK (0x1 << 4)
#define URMA_JFC_PI_TYPE_MASK (0x1 << 5)
#define URMA_JFC_CI_MASK (0x1 << 6)

#define UR_NAME_MAX_LEN 256
#define JFR_NAME_MAX_LEN 256
#define URMA_MAX_SEGS_PER_UR_OPT 64

/* ======================================================================== */
/* Forward declarations                                                      */
/* ======================================================================== */

struct urma_provider_ops; /* provider-private, opaque */
struct urma_sysfs_dev;    /* provider-private, opaque */
struct urma_ops;          /* provider-private, opaque */

typedef struct urma_target_seg urma_target_seg_t;
typedef struct urma_target_jetty urma_target_jetty_t;
typedef struct urma_jetty_grp urma_jetty_grp_t;
typedef struct urma_jetty urma_jetty_t;

/* ======================================================================== */
/* Basic types                                                              */
/* ======================================================================== */

typedef struct urma_init_attr {
    uint64_t token;  /* reserved */
    uint32_t uasid;  /* 0 = allocated by the kernel */
} urma_init_attr_t;

typedef enum urma_mtu {
    URMA_MTU_256 = 1,
    URMA_MTU_512 = 2,
    URMA_MTU_1024 = 3,
    URMA_MTU_2048 = 4,
    URMA_MTU_4096 = 5,
    URMA_MTU_8192 = 6
} urma_mtu_t;

typedef enum urma_port_state {
    URMA_PORT_NOP = 0,
    URMA_PORT_DOWN = 1,
    URMA_PORT_INIT = 2,
    URMA_PORT_ARMED = 3,
    URMA_PORT_ACTIVE = 4,
    URMA_PORT_ACTIVE_DEFER = 5
} urma_port_state_t;

typedef enum urma_speed {
    URMA_SP_10M = 0,
    URMA_SP_100M = 1,
    URMA_SP_1G = 2,
    URMA_SP_2_5G = 3,
    URMA_SP_5G = 4,
    URMA_SP_10G = 5,
    URMA_SP_14G = 6,
    URMA_SP_25G = 7,
    URMA_SP_40G = 8,
    URMA_SP_50G = 9,
    URMA_SP_100G = 10,
    URMA_SP_200G = 11,
    URMA_SP_400G = 12,
    URMA_SP_800G = 13
} urma_speed_t;

typedef enum urma_link_width {
    URMA_LINK_X1 = 0x1,
    URMA_LINK_X2 = 0x2,
    URMA_LINK_X4 = 0x4,
    URMA_LINK_X8 = 0x8,
    URMA_LINK_X16 = 0x10,
    URMA_LINK_X32 = 0x20
} urma_link_width_t;

typedef union urma_eid {
    uint8_t raw[URMA_EID_SIZE]; /* network byte order */
    struct {
        uint64_t reserved; /* 0 for IPv4 */
        uint32_t prefix;   /* 0x0000ffff for IPv4 */
        uint32_t addr;     /* IPv4 address */
    } in4;
    struct {
        uint64_t subnet_prefix;
        uint64_t interface_id;
    } in6;
} urma_eid_t;

typedef struct urma_ref {
#ifdef __cplusplus
    std::atomic_ulong atomic_cnt;
#else
    atomic_ulong atomic_cnt;
#endif
} urma_ref_t;

typedef struct urma_port_attr {
    urma_mtu_t max_mtu;
    urma_port_state_t state;
    urma_link_width_t active_width;
    urma_speed_t active_speed;
    urma_mtu_t active_mtu;
} urma_port_attr_t;

union urma_tp_type_en {
    struct {
        uint32_t rtp : 1;
        uint32_t ctp : 1;
        uint32_t utp : 1;
        uint32_t reserved : 29;
    } bs;
    uint32_t value;
};

struct urma_sl_info {
    uint32_t SL;
    union urma_tp_type_en tp_type;
};

typedef union urma_device_feature {
    struct {
        uint32_t oor : 1;
        uint32_t jfc_per_wr : 1;
        uint32_t stride_op : 1;
        uint32_t load_store_op : 1;
        uint32_t non_pin : 1;
        uint32_t pmem : 1;
        uint32_t jfc_inline : 1;
        uint32_t spray_en : 1;
        uint32_t selective_retrans : 1;
        uint32_t live_migrate : 1;
        uint32_t dca : 1;
        uint32_t jetty_grp : 1;
        uint32_t error_suspend : 1;
        uint32_t outorder_comp : 1;
        uint32_t mn : 1;
        uint32_t clan : 1;
        uint32_t muti_seg_per_token_id : 1;
        uint32_t ipourma_en : 1;
        uint32_t ctp_en : 1;
        uint32_t uboe : 1;
        uint32_t reserved : 12;
    } bs;
    uint32_t value;
} urma_device_feature_t;

typedef union urma_atomic_feature {
    struct {
        uint32_t cas : 1;
        uint32_t swap : 1;
        uint32_t fetch_and_add : 1;
        uint32_t fetch_and_sub : 1;
        uint32_t fetch_and_and : 1;
        uint32_t fetch_and_or : 1;
        uint32_t fetch_and_xor : 1;
        uint32_t reserved : 25;
    } bs;
    uint32_t value;
} urma_atomic_feature_t;

typedef union urma_order_type_cap {
    struct {
        uint32_t ot : 1;
        uint32_t oi : 1;
        uint32_t ol : 1;
        uint32_t no : 1;
        uint32_t reserved : 28;
    } bs;
    uint32_t value;
} urma_order_type_cap_t;

typedef union urma_tp_type_cap {
    struct {
        uint32_t rtp : 1;
        uint32_t ctp : 1;
        uint32_t utp : 1;
        uint32_t reserved : 29;
    } bs;
    uint32_t value;
} urma_tp_type_cap_t;

typedef union urma_tp_feature {
    struct {
        uint32_t rm_multi_path : 1;
        uint32_t rc_multi_path : 1;
        uint32_t reserved : 30;
    } bs;
    uint32_t value;
} urma_tp_feature_t;

typedef struct urma_device_cap {
    urma_device_feature_t feature;
    uint32_t max_jfc;
    uint32_t max_jfs;
    uint32_t max_jfr;
    uint32_t max_jetty;
    uint32_t max_jetty_grp;
    uint32_t max_jetty_in_jetty_grp;
    uint32_t max_jfc_depth;
    uint32_t max_jfs_depth;
    uint32_t max_jfr_depth;
    uint32_t max_jfs_inline_len;
    uint32_t max_jfs_sge;
    uint32_t max_jfs_rsge;
    uint32_t max_jfr_sge;
    uint64_t max_msg_size;
    uint32_t max_read_size;
    uint32_t max_write_size;
    uint32_t max_cas_size;
    uint32_t max_swap_size;
    uint32_t max_fetch_and_add_size;
    uint32_t max_fetch_and_sub_size;
    uint32_t max_fetch_and_and_size;
    uint32_t max_fetch_and_or_size;
    uint32_t max_fetch_and_xor_size;
    urma_atomic_feature_t atomic_feat;
    uint16_t trans_mode;          /* bitmask of urma_transport_mode_t */
    uint16_t reserved;
    uint16_t congestion_ctrl_alg; /* bitmask of urma_congestion_ctrl_alg_t */
    uint32_t ceq_cnt;
    uint32_t max_tp_in_tpg;
    uint32_t max_eid_cnt;
    uint64_t page_size_cap;
    uint32_t max_oor_cnt;
    uint32_t mn;
    uint32_t max_netaddr_cnt;
    urma_order_type_cap_t rm_order_cap;
    urma_order_type_cap_t rc_order_cap;
    urma_tp_type_cap_t rm_tp_cap;
    urma_tp_type_cap_t rc_tp_cap;
    urma_tp_type_cap_t um_tp_cap;
    urma_tp_feature_t tp_feature;
    struct urma_sl_info priority_info[URMA_MAX_PRIORITY_CNT];
} urma_device_cap_t;

typedef struct urma_guid {
    uint8_t raw[URMA_GUID_SIZE];
} urma_guid_t;

typedef struct urma_device_attr {
    urma_guid_t guid;
    urma_device_cap_t dev_cap;
    uint8_t port_cnt;
    struct urma_port_attr port_attr[MAX_PORT_CNT];
    uint32_t reserved_jetty_id_min;
    uint32_t reserved_jetty_id_max;
} urma_device_attr_t;

typedef struct urma_token {
    uint32_t token;
} urma_token_t;

typedef enum urma_transport_type {
    URMA_TRANSPORT_INVALID = -1,
    URMA_TRANSPORT_UB = 0,
    URMA_TRANSPORT_IB = 1,
    URMA_TRANSPORT_IP = 2,
    URMA_TRANSPORT_SOFTUB = 3,
    URMA_TRANSPORT_HNS_UB = 5,
    URMA_TRANSPORT_MAX = 6
} urma_transport_type_t;

typedef enum urma_transport_mode {
    URMA_TM_RM = 0x1, /* reliable message */
    URMA_TM_RC = 0x1 << 1, /* reliable connection */
    URMA_TM_UM = 0x1 << 2  /* unreliable message */
} urma_transport_mode_t;

typedef enum urma_tp_cc_alg {
    URMA_TP_CC_NONE = 0,
    URMA_TP_CC_DCQCN = 1,
    URMA_TP_CC_CAQM = 2,
    URMA_TP_CC_LDCP = 3,
    URMA_TP_CC_LDCP_L2_HEADER = 4,
    URMA_TP_CC_LDCP_TP_HEADER = 5,
    URMA_TP_CC_DIP = 6,
    URMA_TP_CC_ACC = 7,
    URMA_TP_CC_CUSTOM_1 = 8,
    URMA_TP_CC_CUSTOM_2 = 9,
    URMA_TP_CC_NUM = 10
} urma_tp_cc_alg_t;

typedef enum urma_congestion_ctrl_alg {
    URMA_CC_NONE = 0x1 << URMA_TP_CC_NONE,
    URMA_CC_DCQCN = 0x1 << URMA_TP_CC_DCQCN,
    URMA_CC_CAQM = 0x1 << URMA_TP_CC_CAQM,
    URMA_CC_LDCP = 0x1 << URMA_TP_CC_LDCP,
    URMA_CC_LDCP_L2_HEADER = 0x1 << URMA_TP_CC_LDCP_L2_HEADER,
    URMA_CC_LDCP_TP_HEADER = 0x1 << URMA_TP_CC_LDCP_TP_HEADER,
    URMA_CC_DIP = 0x1 << URMA_TP_CC_DIP,
    URMA_CC_ACC = 0x1 << URMA_TP_CC_ACC,
    URMA_CC_CUSTOM_1 = 0x1 << URMA_TP_CC_CUSTOM_1,
    URMA_CC_CUSTOM_2 = 0x1 << URMA_TP_CC_CUSTOM_2
} urma_congestion_ctrl_alg_t;

typedef struct urma_device {
    char name[URMA_MAX_NAME];
    char path[URMA_MAX_PATH];
    urma_transport_type_t type;
    struct urma_provider_ops *ops;
    struct urma_sysfs_dev *sysfs_dev;
} urma_device_t;

typedef enum urma_context_aggr_mode {
    URMA_AGGR_MODE_STANDALONE = 0,
    URMA_AGGR_MODE_ACTIVE_BACKUP = 1,
    URMA_AGGR_MODE_BALANCE = 2
} urma_context_aggr_mode_t;

typedef enum urma_opt_name {
    URMA_OPT_AGGR_MODE = 0
} urma_opt_name_t;

typedef struct urma_context {
    struct urma_device *dev;
    struct urma_ops *ops;
    int dev_fd;
    int async_fd;
    pthread_mutex_t mutex;
    urma_eid_t eid;
    uint32_t eid_index;
    uint32_t uasid;
    struct urma_ref ref;
    urma_context_aggr_mode_t aggr_mode;
} urma_context_t;

typedef struct urma_eid_info {
    urma_eid_t eid;
    uint32_t eid_index;
} urma_eid_info_t;

/* ======================================================================== */
/* Jetty identifiers, JFCE, JFC                                              */
/* ======================================================================== */

typedef struct urma_jetty_id {
    urma_eid_t eid;
    uint32_t uasid;
    uint32_t id;
} urma_jetty_id_t;

typedef urma_jetty_id_t urma_jfc_id_t;
typedef urma_jetty_id_t urma_jfs_id_t;
typedef urma_jetty_id_t urma_jfr_id_t;

typedef struct urma_jfce {
    urma_context_t *urma_ctx;
    int fd;
    struct urma_ref ref;
} urma_jfce_t;

typedef union urma_jfc_flag {
    struct {
        uint32_t lock_free : 1;
        uint32_t jfc_inline : 1;
        uint32_t non_blocking : 1; /* urma_delete_jfc returns URMA_EAGAIN instead of waiting */
        uint32_t has_drv_ext : 1;
        uint32_t reserved : 28;
    } bs;
    uint32_t value;
} urma_jfc_flag_t;

typedef struct urma_jfc_cfg {
    uint32_t depth;
    urma_jfc_flag_t flag;
    uint32_t ceqn;
    urma_jfce_t *jfce;
    uint64_t user_ctx;
} urma_jfc_cfg_t;

typedef enum urma_jfc_attr_mask {
    JFC_MODERATE_COUNT = 0x1,
    JFC_MODERATE_PERIOD = 0x1 << 1
} urma_jfc_attr_mask_t;

typedef struct urma_jfc_attr {
    uint32_t mask; /* urma_jfc_attr_mask_t */
    uint16_t moderate_count;
    uint16_t moderate_period;
} urma_jfc_attr_t;

union urma_jfc_opt_mask {
    URMA_EXTENSION struct {
        uint64_t urma_jfc_cqe_base_addr : 1;
        uint64_t urma_jfc_db_addr : 1;
        uint64_t urma_jfc_id : 1;
        uint64_t urma_jfc_pi : 1;
        uint64_t urma_jfc_pi_type : 1;
        uint64_t urma_jfc_ci : 1;
        uint64_t urma_jfc_db_status : 1;
        uint64_t reserved : 57;
    } bs;
    uint64_t value;
};

typedef struct urma_jfc_opt {
    union urma_jfc_opt_mask jfc_opt_mask;
    bool is_actived;
    uint64_t urma_jfc_cqe_base_addr;
    uint32_t urma_jfc_id;
    uint64_t urma_jfc_db_addr;
    uint8_t urma_jfc_db_status;
    uint16_t urma_jfc_pi;
    uint16_t urma_jfc_pi_type;
    uint16_t urma_jfc_ci;
    uint64_t reserved[URMA_OPT_REVERSED_NUM];
} urma_jfc_opt_t;

typedef struct urma_jfc {
    urma_context_t *urma_ctx;
    urma_jfc_id_t jfc_id;
    urma_jfc_cfg_t jfc_cfg;
    uint64_t handle;
    pthread_mutex_t event_mutex;
    pthread_cond_t event_cond;
    uint32_t comp_events_acked;
    uint32_t async_events_acked;
    urma_jfc_opt_t urma_jfc_opt;
} urma_jfc_t;

/* ======================================================================== */
/* JFS                                                                      */
/* ======================================================================== */

typedef enum urma_order_type {
    URMA_DEF_ORDER = 0,
    URMA_OT = 1,
    URMA_OI = 2,
    URMA_OL = 3,
    URMA_NO = 4
} urma_order_type_t;

typedef union urma_jfs_flag {
    struct {
        uint32_t lock_free : 1;
        uint32_t error_suspend : 1;
        uint32_t outorder_comp : 1;
        uint32_t order_type : 8; /* urma_order_type_t */
        uint32_t multi_path : 1;
        uint32_t ctp_rc_mul_path_mode : 1;
        uint32_t non_blocking : 1;
        uint32_t has_drv_ext : 1;
        uint32_t reserved : 17;
    } bs;
    uint32_t value;
} urma_jfs_flag_t;

union urma_jfs_opt_mask {
    URMA_EXTENSION struct {
        uint64_t urma_jfs_cqe_base_addr : 1;
        uint64_t urma_jfs_db_addr : 1;
        uint64_t urma_jfs_id : 1;
        uint64_t urma_jfs_pi : 1;
        uint64_t urma_jfs_pi_type : 1;
        uint64_t urma_jfs_ci : 1;
        uint64_t urma_jfs_db_status : 1;
        uint64_t reserved : 57;
    } bs;
    uint64_t value;
};

typedef struct urma_jfs_opt {
    union urma_jfs_opt_mask jfs_opt_mask;
    bool is_actived;
    uint64_t urma_jfs_sqe_base_addr;
    uint32_t urma_jfs_id;
    uint64_t urma_jfs_db_addr;
    uint8_t urma_jfs_db_status;
    uint16_t urma_jfs_pi;
    uint16_t urma_jfs_pi_type;
    uint16_t urma_jfs_ci;
    uint64_t reserved[URMA_OPT_REVERSED_NUM];
} urma_jfs_opt_t;

typedef struct urma_jfs_cfg {
    uint32_t depth;
    urma_jfs_flag_t flag;
    urma_transport_mode_t trans_mode;
    uint8_t priority;
    uint8_t max_sge;
    uint8_t max_rsge;
    uint32_t max_inline_data;
    uint8_t rnr_retry;
    uint8_t err_timeout;
    urma_jfc_t *jfc;
    uint64_t user_ctx;
} urma_jfs_cfg_t;

typedef struct urma_jfs {
    urma_context_t *urma_ctx;
    urma_jfs_id_t jfs_id;
    urma_jfs_cfg_t jfs_cfg;
    uint64_t handle;
    pthread_mutex_t event_mutex;
    pthread_cond_t event_cond;
    uint32_t async_events_acked;
    urma_jfs_opt_t urma_jfs_opt;
} urma_jfs_t;

typedef enum urma_jfs_attr_mask {
    JFS_STATE = 0x1
} urma_jfs_attr_mask_t;

typedef struct urma_jfs_attr {
    uint32_t mask; /* urma_jfs_attr_mask_t */
    urma_jfs_state_t state;
} urma_jfs_attr_t;

/* ======================================================================== */
/* JFR                                                                      */
/* ======================================================================== */

typedef union urma_jfr_flag {
    struct {
        uint32_t token_policy : 3; /* URMA_TOKEN_* */
        uint32_t tag_matching : 1;
        uint32_t lock_free : 1;
        uint32_t order_type : 8;   /* urma_order_type_t */
        uint32_t has_drv_ext : 1;
        uint32_t non_blocking : 1;
        uint32_t reserved : 17;
    } bs;
    uint32_t value;
} urma_jfr_flag_t;

union urma_jfr_opt_mask {
    URMA_EXTENSION struct {
        uint64_t urma_jfr_cqe_base_addr : 1;
        uint64_t urma_jfr_db_addr : 1;
        uint64_t urma_jfr_id : 1;
        uint64_t urma_jfr_pi : 1;
        uint64_t urma_jfr_pi_type : 1;
        uint64_t urma_jfr_ci : 1;
        uint64_t urma_jfr_db_status : 1;
        uint64_t reserved : 57;
    } bs;
    uint64_t value;
};

typedef struct urma_jfr_opt {
    union urma_jfr_opt_mask jfr_opt_mask;
    bool is_actived;
    uint64_t urma_jfr_rqe_base_addr;
    uint32_t urma_jfr_id;
    uint64_t urma_jfr_db_addr;
    uint8_t urma_jfr_db_status;
    uint16_t urma_jfr_pi;
    uint16_t urma_jfr_pi_type;
    uint16_t urma_jfr_ci;
    uint64_t reserved[URMA_OPT_REVERSED_NUM];
} urma_jfr_opt_t;

typedef struct urma_jfr_cfg {
    uint32_t id;
    uint32_t depth;
    urma_jfr_flag_t flag;
    urma_transport_mode_t trans_mode;
    uint8_t max_sge;
    uint8_t min_rnr_timer;
    urma_jfc_t *jfc;
    urma_token_t token_value;
    uint64_t user_ctx;
} urma_jfr_cfg_t;

typedef struct urma_jfr {
    urma_context_t *urma_ctx;
    urma_jfr_id_t jfr_id;
    urma_jfr_cfg_t jfr_cfg;
    uint64_t handle;
    pthread_mutex_t event_mutex;
    pthread_cond_t event_cond;
    uint32_t async_events_acked;
    urma_jfr_opt_t urma_jfr_opt;
} urma_jfr_t;

typedef enum urma_jfr_attr_mask {
    JFR_RX_THRESHOLD = 0x1,
    JFR_STATE = 0x1 << 1
} urma_jfr_attr_mask_t;

typedef struct urma_jfr_attr {
    uint32_t mask; /* urma_jfr_attr_mask_t */
    uint32_t rx_threshold;
    urma_jfr_state_t state;
} urma_jfr_attr_t;

/* ======================================================================== */
/* Remote objects (import)                                                   */
/* ======================================================================== */

typedef union urma_import_jetty_flag {
    struct {
        uint32_t token_policy : 3;
        uint32_t order_type : 8;
        uint32_t share_tp : 1;
        uint32_t has_drv_ext : 1;
        uint32_t has_user_info : 1;
        uint32_t reserved : 18;
    } bs;
    uint32_t value;
} urma_import_jetty_flag_t;

typedef enum urma_tp_type {
    URMA_RTP = 0,
    URMA_CTP = 1,
    URMA_UTP = 2
} urma_tp_type_t;

typedef struct urma_rjfr {
    urma_jfr_id_t jfr_id;
    urma_transport_mode_t trans_mode;
    urma_import_jetty_flag_t flag;
    urma_tp_type_t tp_type;
} urma_rjfr_t;

typedef struct urma_tp {
    uint32_t tpn;
} urma_tp_t;

typedef enum urma_jetty_grp_policy {
    URMA_JETTY_GRP_POLICY_RR = 0,
    URMA_JETTY_GRP_POLICY_HASH_HINT = 1
} urma_jetty_grp_policy_t;

typedef enum urma_target_type {
    URMA_JFR = 0,
    URMA_JETTY = 1,
    URMA_JETTY_GROUP = 2
} urma_target_type_t;

typedef struct urma_rjetty {
    urma_jetty_id_t jetty_id;
    urma_transport_mode_t trans_mode;
    urma_jetty_grp_policy_t policy;
    urma_target_type_t type;
    urma_import_jetty_flag_t flag;
    urma_tp_type_t tp_type;
} urma_rjetty_t;

struct urma_target_jetty {
    urma_context_t *urma_ctx;
    urma_jetty_id_t id;
    uint64_t handle;
    urma_transport_mode_t trans_mode;
    urma_tp_t tp;
    urma_target_type_t type;
    urma_import_jetty_flag_t flag;
    urma_jetty_grp_policy_t policy;
    urma_tp_type_t tp_type;
};

/* ======================================================================== */
/* Jetty and jetty group                                                     */
/* ======================================================================== */

typedef union urma_jetty_flag {
    struct {
        uint32_t share_jfr : 1; /* URMA_NO_SHARE_JFR / URMA_SHARE_JFR */
        uint32_t non_blocking : 1;
        uint32_t has_drv_ext : 1;
        uint32_t has_user_info : 1;
        uint32_t reserved : 28;
    } bs;
    uint32_t value;
} urma_jetty_flag_t;

typedef struct urma_jetty_cfg {
    uint32_t id;
    urma_jetty_flag_t flag;
    urma_jfs_cfg_t jfs_cfg;
    URMA_EXTENSION union {
        struct {
            urma_jfr_t *jfr;
            urma_jfc_t *jfc;
        } shared;                /* flag.bs.share_jfr == 1 */
        urma_jfr_cfg_t *jfr_cfg; /* flag.bs.share_jfr == 0 */
    };
    urma_jetty_grp_t *jetty_grp;
    uint64_t user_ctx;
} urma_jetty_cfg_t;

typedef struct urma_jetty_attr {
    uint32_t mask; /* urma_jetty_attr_mask_t */
    uint32_t rx_threshold;
    urma_jetty_state_t state;
} urma_jetty_attr_t;

typedef enum urma_jetty_attr_mask {
    JETTY_RX_THRESHOLD = 0x1,
    JETTY_STATE = 0x1 << 1
} urma_jetty_attr_mask_t;

typedef struct urma_jetty_opt {
    bool is_actived;
    urma_jfs_opt_t jfs_opt;
    uint64_t reserved[URMA_OPT_REVERSED_NUM];
} urma_jetty_opt_t;

struct urma_jetty {
    urma_context_t *urma_ctx;
    urma_jetty_id_t jetty_id;
    urma_target_jetty_t *remote_jetty;
    urma_jetty_cfg_t jetty_cfg;
    uint64_t handle;
    pthread_mutex_t event_mutex;
    pthread_cond_t event_cond;
    uint32_t async_events_acked;
    urma_jetty_opt_t urma_jetty_opt;
};

typedef union urma_jetty_grp_flag {
    struct {
        uint32_t token_policy : 3;
        uint32_t reserved : 29;
    } bs;
    uint32_t value;
} urma_jetty_grp_flag_t;

typedef struct urma_jetty_grp_cfg {
    char name[URMA_MAX_NAME];
    urma_jetty_grp_flag_t flag;
    urma_token_t token_value;
    uint32_t id;
    urma_jetty_grp_policy_t policy;
    uint64_t user_ctx;
} urma_jetty_grp_cfg_t;

struct urma_jetty_grp {
    urma_context_t *urma_ctx;
    urma_jetty_id_t jetty_grp_id;
    urma_jetty_grp_cfg_t cfg;
    uint32_t jetty_cnt;
    urma_jetty_t **jetty_list;
    pthread_mutex_t list_mutex;
    uint64_t handle;
    pthread_mutex_t event_mutex;
    pthread_cond_t event_cond;
    uint32_t async_events_acked;
};

typedef enum urma_notify_type {
    URMA_IMPORT_JETTY_NOTIFY = 0,
    URMA_BIND_JETTY_NOTIFY = 1
} urma_notify_type_t;

typedef enum urma_tp_state {
    URMA_TP_STATE_RESET = 0,
    URMA_TP_STATE_PASSIVE = 1,
    URMA_TP_STATE_ACTIVE = 2,
    URMA_TP_STATE_BRAKE = 3,
    URMA_TP_STATE_ERROR = 4
} urma_tp_state_t;

/* ======================================================================== */
/* Segments and token ids                                                    */
/* ======================================================================== */

typedef struct urma_ubva {
    urma_eid_t eid;
    uint32_t uasid;
    uint64_t va;
} URMA_PACKED urma_ubva_t;

typedef union urma_reg_seg_flag {
    struct {
        uint32_t token_policy : 3; /* URMA_TOKEN_* */
        uint32_t cacheable : 1;    /* URMA_NON_CACHEABLE / URMA_CACHEABLE */
        uint32_t dsva : 1;
        uint32_t access : 6;       /* URMA_ACCESS_* bits */
        uint32_t non_pin : 1;
        uint32_t user_iova : 1;
        uint32_t token_id_valid : 1;
        uint32_t reserved : 18;
    } bs;
    uint32_t value;
} urma_reg_seg_flag_t;

typedef union urma_seg_attr {
    struct {
        uint32_t token_policy : 3;
        uint32_t cacheable : 1;
        uint32_t dsva : 1;
        uint32_t access : 6;
        uint32_t non_pin : 1;
        uint32_t user_iova : 1;
        uint32_t user_token_id : 1;
        uint32_t has_user_info : 1;
        uint32_t reserved : 17;
    } bs;
    uint32_t value;
} urma_seg_attr_t;

typedef union urma_import_seg_flag {
    struct {
        uint32_t cacheable : 1;
        uint32_t access : 6;
        uint32_t mapping : 1; /* URMA_SEG_NOMAP / URMA_SEG_MAPPED */
        uint32_t reserved : 24;
    } bs;
    uint32_t value;
} urma_import_seg_flag_t;

typedef union urma_token_id_flag {
    struct {
        uint32_t multi_seg : 1;
        uint32_t reserved : 31;
    } bs;
    uint32_t value;
} urma_token_id_flag_t;

typedef struct urma_token_id {
    urma_context_t *urma_ctx;
    uint32_t token_id;
    uint64_t handle;
    urma_ref_t ref;
    urma_token_id_flag_t flag;
} urma_token_id_t;

typedef struct urma_seg_cfg {
    uint64_t va;
    uint64_t len;
    urma_token_id_t *token_id;
    urma_token_t token_value;
    urma_reg_seg_flag_t flag;
    uint64_t user_ctx;
    uint64_t iova;
} urma_seg_cfg_t;

typedef struct urma_seg {
    urma_ubva_t ubva;
    uint64_t len;
    urma_seg_attr_t attr;
    uint32_t token_id;
} urma_seg_t;

struct urma_target_seg {
    urma_seg_t seg;
    uint64_t user_ctx;
    uint64_t mva;
    urma_context_t *urma_ctx;
    urma_token_id_t *token_id;
    uint64_t handle;
};

typedef struct urma_user_target_seg {
    urma_seg_attr_t attr;
    uint32_t token_id;
    urma_token_t token_value;
} urma_user_tseg_t;

/* ======================================================================== */
/* Work requests                                                             */
/* ======================================================================== */

typedef struct urma_sge {
    uint64_t addr;
    uint32_t len;
    urma_target_seg_t *tseg;       /* local: registered seg; remote: imported seg */
    urma_user_tseg_t *user_tseg;
} urma_sge_t;

typedef struct urma_sg {
    urma_sge_t *sge;
    uint32_t num_sge;
} urma_sg_t;

typedef union urma_jfs_wr_flag {
    struct {
        uint32_t place_order : 2;      /* urma_place_order_t */
        uint32_t comp_order : 1;
        uint32_t fence : 1;
        uint32_t solicited_enable : 1;
        uint32_t complete_enable : 1;  /* bit 5, 0x20 */
        uint32_t inline_flag : 1;      /* bit 6, 0x40 */
        uint32_t db_bypass : 1;
        uint32_t udf : 1;
        uint32_t has_drv_ext : 1;
        uint32_t reserved : 22;
    } bs;
    uint32_t value;
} urma_jfs_wr_flag_t;

typedef struct urma_rw_wr {
    urma_sg_t src;
    urma_sg_t dst;
    uint8_t target_hint;
    uint64_t notify_data; /* immediate for URMA_OPC_WRITE_IMM */
} urma_rw_wr_t;

typedef struct urma_send_wr {
    urma_sg_t src;
    uint8_t target_hint;
    uint64_t imm_data; /* immediate for URMA_OPC_SEND_IMM */
    urma_target_seg_t *tseg;
} urma_send_wr_t;

typedef struct urma_cas_wr {
    urma_sge_t *dst;
    urma_sge_t *src;
    URMA_EXTENSION union {
        uint64_t cmp_data;
        uint64_t cmp_addr;
    };
    URMA_EXTENSION union {
        uint64_t swap_data;
        uint64_t swap_addr;
    };
} urma_cas_wr_t;

typedef struct urma_faa_wr {
    urma_sge_t *dst;
    urma_sge_t *src;
    URMA_EXTENSION union {
        uint64_t operand;
        uint64_t operand_addr;
    };
} urma_faa_wr_t;

typedef struct urma_jfs_wr {
    urma_opcode_t opcode;
    urma_jfs_wr_flag_t flag;
    urma_target_jetty_t *tjetty;
    uint64_t user_ctx;
    URMA_EXTENSION union {
        urma_rw_wr_t rw;
        urma_send_wr_t send;
        urma_cas_wr_t cas;
        urma_faa_wr_t faa;
    };
    struct urma_jfs_wr *next;
} urma_jfs_wr_t;

typedef struct urma_jfr_wr {
    urma_sg_t src;
    uint64_t user_ctx;
    struct urma_jfr_wr *next;
} urma_jfr_wr_t;

/* ======================================================================== */
/* Completion records                                                        */
/* ======================================================================== */

typedef union urma_cr_flag {
    URMA_EXTENSION struct {
        uint8_t s_r : 1;            /* 0: send side, 1: receive side */
        uint8_t jetty : 1;          /* local_id is a jetty (1) or a JFS/JFR (0) */
        uint8_t suspend_done : 1;
        uint8_t flush_err_done : 1;
        uint8_t reserved : 4;
    } bs;
    uint8_t value;
} urma_cr_flag_t;

typedef struct urma_cr_token {
    uint32_t token_id;
    urma_token_t token_value;
} urma_cr_token_t;

typedef struct urma_cr {
    urma_cr_status_t status;
    uint64_t user_ctx;
    urma_cr_opcode_t opcode; /* receive side only */
    urma_cr_flag_t flag;
    uint32_t completion_len;
    uint32_t local_id;
    urma_jetty_id_t remote_id; /* receive side only */
    URMA_EXTENSION union {
        uint64_t imm_data;               /* receive side only */
        urma_cr_token_t invalid_token;   /* SEND_WITH_INV */
    };
    uint32_t tpn;
    uintptr_t user_data;
} urma_cr_t;

/* ======================================================================== */
/* Asynchronous events and logging                                           */
/* ======================================================================== */

typedef struct urma_async_event {
    const urma_context_t *urma_ctx;
    union {
        urma_jfc_t *jfc;
        urma_jfs_t *jfs;
        urma_jfr_t *jfr;
        urma_jetty_t *jetty;
        urma_jetty_grp_t *jetty_grp;
        uint32_t port_id;
        uint32_t eid_idx;
    } element;
    urma_async_event_type_t event_type;
    void *priv;
} urma_async_event_t;

typedef enum urma_vlog_level {
    URMA_VLOG_LEVEL_EMERG = 0,
    URMA_VLOG_LEVEL_ALERT = 1,
    URMA_VLOG_LEVEL_CRIT = 2,
    URMA_VLOG_LEVEL_ERR = 3,
    URMA_VLOG_LEVEL_WARNING = 4,
    URMA_VLOG_LEVEL_NOTICE = 5,
    URMA_VLOG_LEVEL_INFO = 6,
    URMA_VLOG_LEVEL_DEBUG = 7,
    URMA_VLOG_LEVEL_MAX = 8
} urma_vlog_level_t;

/* Log callback for urma_register_log_func(): level is a urma_vlog_level_t. */
typedef void (*urma_log_cb_t)(int level, char *message);

#ifdef __cplusplus
}
#endif

#endif /* URMA_TYPES_H */
