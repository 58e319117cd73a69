/*
 * liburma_link_stub.c - link-only import stub for liburma.so.0.
 *
 * urma-sys builds this into $OUT_DIR/link/liburma.so (SONAME liburma.so.0)
 * when no real liburma is installed, so that `-lurma` resolves and every
 * binary gets `NEEDED liburma.so.0` - exactly like linking against UMDK.
 * There is deliberately NO liburma.so.0 file next to it, so the dynamic
 * loader never picks this stub: at run time the real library (UMDK) or the
 * mlcachedirect software loopback (urma-loopback) must be found as
 * liburma.so.0 on the loader path. Same idea as CUDA's lib64/stubs.
 *
 * The symbols only have to exist; they are declared without prototypes that
 * match the API on purpose (nothing ever calls them successfully). If one is
 * ever run, it prints what happened and aborts.
 */
#include <stdio.h>
#include <stdlib.h>

static void urma_link_stub_abort(const char *name)
{
    fprintf(stderr,
        "%s: liburma link stub called: this library is for linking only; put a real "
        "liburma.so.0 (UMDK or the mlcachedirect loopback) on the loader path\n",
        name);
    fflush(stderr);
    abort();
}

#define URMA_LINK_STUB(name)                  \
    void name(void);                          \
    void name(void) { urma_link_stub_abort(#name); }

/* The 49 functions of the URMA ABI fact tables (tests/data/urma_abi_*.json "functions"). */
URMA_LINK_STUB(urma_post_jfs_wr)
URMA_LINK_STUB(urma_post_jetty_send_wr)
URMA_LINK_STUB(urma_post_jetty_recv_wr)
URMA_LINK_STUB(urma_post_jfr_wr)
URMA_LINK_STUB(urma_init)
URMA_LINK_STUB(urma_uninit)
URMA_LINK_STUB(urma_get_device_list)
URMA_LINK_STUB(urma_free_device_list)
URMA_LINK_STUB(urma_get_device_by_name)
URMA_LINK_STUB(urma_get_eid_list)
URMA_LINK_STUB(urma_free_eid_list)
URMA_LINK_STUB(urma_query_device)
URMA_LINK_STUB(urma_create_context)
URMA_LINK_STUB(urma_delete_context)
URMA_LINK_STUB(urma_create_jfce)
URMA_LINK_STUB(urma_delete_jfce)
URMA_LINK_STUB(urma_create_jfc)
URMA_LINK_STUB(urma_delete_jfc)
URMA_LINK_STUB(urma_create_jfs)
URMA_LINK_STUB(urma_delete_jfs)
URMA_LINK_STUB(urma_create_jfr)
URMA_LINK_STUB(urma_delete_jfr)
URMA_LINK_STUB(urma_create_jetty)
URMA_LINK_STUB(urma_delete_jetty)
URMA_LINK_STUB(urma_import_jetty)
URMA_LINK_STUB(urma_unimport_jetty)
URMA_LINK_STUB(urma_import_jfr)
URMA_LINK_STUB(urma_unimport_jfr)
URMA_LINK_STUB(urma_advise_jfr)
URMA_LINK_STUB(urma_unadvise_jfr)
URMA_LINK_STUB(urma_advise_jetty)
URMA_LINK_STUB(urma_unadvise_jetty)
URMA_LINK_STUB(urma_bind_jetty)
URMA_LINK_STUB(urma_unbind_jetty)
URMA_LINK_STUB(urma_register_seg)
URMA_LINK_STUB(urma_unregister_seg)
URMA_LINK_STUB(urma_import_seg)
URMA_LINK_STUB(urma_unimport_seg)
URMA_LINK_STUB(urma_alloc_token_id)
URMA_LINK_STUB(urma_free_token_id)
URMA_LINK_STUB(urma_poll_jfc)
URMA_LINK_STUB(urma_wait_jfc)
URMA_LINK_STUB(urma_ack_jfc)
URMA_LINK_STUB(urma_rearm_jfc)
URMA_LINK_STUB(urma_get_async_event)
URMA_LINK_STUB(urma_ack_async_event)
URMA_LINK_STUB(urma_query_jetty)
URMA_LINK_STUB(urma_query_jfs)
URMA_LINK_STUB(urma_register_log_func)

/* The registration functions of the provider interface (urma_provider.h), so that a provider
 * plugin linked with -lurma gets NEEDED liburma.so.0 as it does against UMDK. */
URMA_LINK_STUB(urma_register_provider_ops)
URMA_LINK_STUB(urma_unregister_provider_ops)
URMA_LINK_STUB(urma_register_sysfs_dev)
