/* test_conformance.c - the transport conformance suite (tests/conformance.h) against the
   in-process loopback (tfrdv_loopback) and the thread-queue transport of
   examples/custom_transport.c (the template a transport author copies). The companions run it in
   tests/tcp/test_tcp_conformance.c, tests/grpc/test_grpc_conformance.c and
   tests/verbs/test_verbs_conformance.c. */
#define CUSTOM_TRANSPORT_NO_MAIN
#include "examples/custom_transport.c" /* TFRDV_IMPLEMENTATION, tfrdv.h and the qt transport */
#include "tt.h"
#include "conformance.h"

/* ---- the loopback: both managers registered on one tfrdv_loopback ---- */
static int lb_make(conf_world* w, tfrdv_status* st) {
    tfrdv_loopback* lb = 0;
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    if (tfrdv_loopback_create(&w->hooks, &lb, st) != TFRDV_OK) return 0;
    w->state = lb;
    mc.hooks = w->hooks;
    mc.transport = tfrdv_loopback_transport(lb);
    mc.worker_name = w->server_name;
    mc.incarnation = w->server_incarnation;
    if (tfrdv_mgr_create(&mc, &w->server, st) != TFRDV_OK || tfrdv_loopback_register(lb, w->server_name, w->server, st) != TFRDV_OK)
        return 0;
    mc.worker_name = w->client_name;
    mc.incarnation = 0;
    mc.call_timeout_ns = w->call_timeout_ns;
    if (tfrdv_mgr_create(&mc, &w->client, st) != TFRDV_OK || tfrdv_loopback_register(lb, w->client_name, w->client, st) != TFRDV_OK)
        return 0;
    return 1;
}
static void lb_destroy(conf_world* w) {
    if (w->state) tfrdv_loopback_destroy((tfrdv_loopback*)w->state);
}

/* ---- examples/custom_transport.c's qt: S served by the queue's thread, C fetching through it ---- */
static int qt_make(conf_world* w, tfrdv_status* st) {
    qt* t = 0;
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    mc.hooks = w->hooks;
    mc.worker_name = w->server_name;
    mc.incarnation = w->server_incarnation;
    if (tfrdv_mgr_create(&mc, &w->server, st) != TFRDV_OK || qt_create(w->server, &t, st) != TFRDV_OK) return 0;
    w->state = t;
    mc.worker_name = w->client_name;
    mc.incarnation = 0;
    mc.transport = qt_transport(t);
    mc.call_timeout_ns = w->call_timeout_ns;
    return tfrdv_mgr_create(&mc, &w->client, st) == TFRDV_OK;
}
static void qt_destroy_hook(conf_world* w) {
    if (w->state) qt_destroy((qt*)w->state);
}

int main(int argc, char** argv) {
    conf_transport lb = conf_transport_init("loopback", lb_make, lb_destroy);
    conf_transport ex = conf_transport_init("custom_transport.c", qt_make, qt_destroy_hook);
    TT_MAIN_BEGIN(argc, argv);
    lb.flags = CONF_GIVES_BACK | CONF_PEER_INCARNATION | CONF_DRAINS;
    /* qt_destroy waits for every answer in progress, including the one whose callback would call
       it: the example does not promise a destroy from inside a receive callback */
    ex.flags = CONF_GIVES_BACK | CONF_NO_DESTROY_IN_CALLBACK | CONF_DRAINS;
    conf_run(&lb);
    conf_run(&ex);
    return TT_MAIN_END();
}
