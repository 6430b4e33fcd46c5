/* test_grpc_conformance.c - the transport conformance suite (tests/conformance.h) against
   tfrdv_grpc.h in one process: a server tfrdv_grpc on 127.0.0.1 attached to S, and a client
   tfrdv_grpc for C that knows S's address (tfrdv_grpc_set_worker), as tests/grpc/test_multi.c.
   Built by tests/grpc/grpc.mk when the gRPC C core is there; TSan/LSan reports inside libgrpc
   are suppressed by the files tests/run.sh passes (tests/sanitizer.supp.*). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define TFRDV_IMPLEMENTATION
#define TFRDV_GRPC_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_grpc.h"
#include "tt.h"
#include "conformance.h"

typedef struct grpc_pair {
    tfrdv_grpc *server, *client;
} grpc_pair;

static int grpc_make(conf_world* w, tfrdv_status* st) {
    grpc_pair* p = (grpc_pair*)calloc(1, sizeof *p);
    tfrdv_grpc_config gc = tfrdv_grpc_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    char addr[64];
    if (!p) return 0;
    w->state = p;
    gc.hooks = w->hooks;
    gc.listen_address = "127.0.0.1:0";
    if (tfrdv_grpc_create(&gc, &p->server, st) != TFRDV_OK) return 0;
    gc.listen_address = 0;
    if (tfrdv_grpc_create(&gc, &p->client, st) != TFRDV_OK) return 0;
    mc.hooks = w->hooks;
    mc.worker_name = w->server_name;
    mc.incarnation = w->server_incarnation;
    mc.transport = tfrdv_grpc_transport(p->server);
    if (tfrdv_mgr_create(&mc, &w->server, st) != TFRDV_OK || tfrdv_grpc_attach(p->server, w->server, st) != TFRDV_OK) return 0;
    mc.worker_name = w->client_name;
    mc.incarnation = 0;
    mc.transport = tfrdv_grpc_transport(p->client);
    mc.call_timeout_ns = w->call_timeout_ns;
    if (tfrdv_mgr_create(&mc, &w->client, st) != TFRDV_OK || tfrdv_grpc_attach(p->client, w->client, st) != TFRDV_OK) return 0;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", tfrdv_grpc_port(p->server));
    return tfrdv_grpc_set_worker(p->client, w->server_name, addr, st) == TFRDV_OK;
}
static void grpc_destroy(conf_world* w) {
    grpc_pair* p = (grpc_pair*)w->state;
    if (!p) return;
    if (p->client) tfrdv_grpc_destroy(p->client);
    if (p->server) tfrdv_grpc_destroy(p->server);
    free(p);
    w->state = 0;
}

int main(int argc, char** argv) {
    conf_transport t = conf_transport_init("grpc", grpc_make, grpc_destroy);
    TT_MAIN_BEGIN(argc, argv);
    /* delivery receipts (on by default between tfrdv peers): a reply that reaches a client which
       already gave up goes back to the server's table */
    t.flags = CONF_WAIT | CONF_GIVES_BACK | CONF_PEER_INCARNATION | CONF_DRAINS | CONF_UNORDERED; /* one RPC per receive */
    conf_run(&t);
    return TT_MAIN_END();
}
