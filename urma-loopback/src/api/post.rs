//! The post calls: send and receive work requests to JFS, JFR and jetty.

use super::*;

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_post_jfs_wr(
    jfs: *mut u::urma_jfs_t,
    wr: *mut u::urma_jfs_wr_t,
    bad_wr: *mut *mut u::urma_jfs_wr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jfs_wr");
        }
        reg::with_jfs(jfs, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jfs_wr: invalid jfs");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_send_chain(&j.sq, wr, bad_wr) }
        })
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_post_jetty_send_wr(
    jetty: *mut u::urma_jetty_t,
    wr: *mut u::urma_jfs_wr_t,
    bad_wr: *mut *mut u::urma_jfs_wr_t,
) -> u::urma_status_t {
    guard(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jetty_send_wr");
        }
        reg::with_jetty(jetty, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jetty_send_wr: invalid jetty");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_send_chain(&j.sq, wr, bad_wr) }
        })
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_post_jetty_recv_wr(
    jetty: *mut u::urma_jetty_t,
    wr: *mut u::urma_jfr_wr_t,
    bad_wr: *mut *mut u::urma_jfr_wr_t,
) -> u::urma_status_t {
    entry_hot(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jetty_recv_wr");
        }
        reg::with_jetty(jetty, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jetty_recv_wr: invalid jetty");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_recv_chain(&j.rq, wr, bad_wr) }
        })
    })
}

#[cfg_attr(not(feature = "plugin"), no_mangle)]
pub unsafe extern "C" fn urma_post_jfr_wr(
    jfr: *mut u::urma_jfr_t,
    wr: *mut u::urma_jfr_wr_t,
    bad_wr: *mut *mut u::urma_jfr_wr_t,
) -> u::urma_status_t {
    entry_hot(u::URMA_FAIL, || {
        if wr.is_null() || bad_wr.is_null() {
            return einval("urma_post_jfr_wr");
        }
        reg::with_jfr(jfr, |j| {
            let Some(j) = j else {
                // SAFETY: bad_wr is non-NULL.
                unsafe { *bad_wr = wr };
                return einval("urma_post_jfr_wr: invalid jfr");
            };
            // SAFETY: wr chain and bad_wr from the caller.
            unsafe { datapath::post_recv_chain(&j.rq, wr, bad_wr) }
        })
    })
}
