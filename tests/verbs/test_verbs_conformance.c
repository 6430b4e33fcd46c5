/* test_verbs_conformance.c - the transport conformance suite (tests/conformance.h) against
   tfrdv_verbs.h on the stand-in libibverbs (tests/verbs/standinverbs.c, built beside this binary
   as libstandinverbs.so): two tfrdv_verbs objects in this process, the server's attached to S,
   the client's to C, connected over the 127.0.0.1 bootstrap, each with its progress thread
   (tfrdv_verbs_connect blocks until the server's progress answers). Built by
   tests/verbs/verbs.mk when libibverbs-dev is there; otherwise it prints one [SKIP] line. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "tt.h"
#ifndef TT_HAVE_IBV
int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    (void)tt_cur, (void)tt_skip_why;
    tt_skipped++;
    printf("[SKIP] conformance: verbs (libibverbs-dev is not installed: apt-get install libibverbs-dev)\n");
    return TT_MAIN_END();
}
#else
#define TFRDV_VERBS_IMPLEMENTATION
#include "tfrdv_verbs.h"
#include "conformance.h"

static char standin[1024];
typedef struct verbs_pair {
    tfrdv_verbs *server, *client;
} verbs_pair;

static int verbs_make(conf_world* w, tfrdv_status* st) {
    verbs_pair* p = (verbs_pair*)calloc(1, sizeof *p);
    tfrdv_verbs_config vc = tfrdv_verbs_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    if (!p) return 0;
    w->state = p;
    vc.hooks = w->hooks;
    vc.library = standin;
    vc.listen_address = "127.0.0.1:0";
    vc.worker_name = w->server_name;
    if (tfrdv_verbs_create(&vc, &p->server, st) != TFRDV_OK) return 0;
    vc.worker_name = w->client_name;
    if (tfrdv_verbs_create(&vc, &p->client, st) != TFRDV_OK) return 0;
    mc.hooks = w->hooks;
    mc.worker_name = w->server_name;
    mc.incarnation = w->server_incarnation;
    mc.transport = tfrdv_verbs_transport(p->server);
    if (tfrdv_mgr_create(&mc, &w->server, st) != TFRDV_OK || tfrdv_verbs_attach(p->server, w->server, st) != TFRDV_OK) return 0;
    mc.worker_name = w->client_name;
    mc.incarnation = 0;
    mc.transport = tfrdv_verbs_transport(p->client);
    mc.call_timeout_ns = w->call_timeout_ns;
    if (tfrdv_mgr_create(&mc, &w->client, st) != TFRDV_OK || tfrdv_verbs_attach(p->client, w->client, st) != TFRDV_OK) return 0;
    return tfrdv_verbs_connect(p->client, w->server_name, "127.0.0.1", tfrdv_verbs_port(p->server), st) == TFRDV_OK;
}
static void verbs_destroy(conf_world* w) {
    verbs_pair* p = (verbs_pair*)w->state;
    if (!p) return;
    if (p->client) tfrdv_verbs_destroy(p->client);
    if (p->server) tfrdv_verbs_destroy(p->server);
    free(p);
    w->state = 0;
}

int main(int argc, char** argv) {
    conf_transport t = conf_transport_init("verbs (stand-in libibverbs)", verbs_make, verbs_destroy);
    const char* slash = strrchr(argv[0], '/');
    TT_MAIN_BEGIN(argc, argv);
    snprintf(standin, sizeof standin, "%.*s/libstandinverbs.so", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    signal(SIGPIPE, SIG_IGN);
    /* the sender keeps each answer until the receiver takes it (its next request on the slot:
       tfrdv_mgr_serve_delivered) or refuses it (CANCEL: tfrdv_mgr_serve_return): a receive that
       gave up meanwhile leaves its value in the table, and a drain waits for the verdict; the
       peer's incarnation comes with its bootstrap info */
    t.flags = CONF_WAIT | CONF_GIVES_BACK | CONF_DRAINS | CONF_PEER_INCARNATION;
    conf_run(&t);
    return TT_MAIN_END();
}
#endif
