/* test_tcp_conformance.c - the transport conformance suite (tests/conformance.h) against
   tfrdv_tcp.h: two tfrdv_tcp objects in this process, a server (attached to S) and a
   client-only one (C fetches through it). Twice: on 127.0.0.1 with the I/O threads, and on a
   Unix socket driven by the harness's poll hook (num_threads -1, tfrdv_tcp_poll). Built by
   tests/tcp/tcp.mk. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include "tt.h"
#include "conformance.h"

static char tmpdir[64];
typedef struct tcp_pair {
    tfrdv_tcp *server, *client;
} tcp_pair;

static int tcp_make(conf_world* w, tfrdv_status* st) {
    tcp_pair* p = (tcp_pair*)calloc(1, sizeof *p);
    int polled = w->t->poll != 0;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    char addr[128];
    if (!p) return 0;
    w->state = p;
    if (polled) snprintf(addr, sizeof addr, "unix:%s/s%lld.sock", tmpdir, (long long)tfrdv_now_ns());
    else snprintf(addr, sizeof addr, "127.0.0.1:0");
    tc.hooks = w->hooks;
    tc.num_threads = polled ? -1 : 0;
    tc.listen_address = addr;
    if (tfrdv_tcp_create(&tc, &p->server, st) != TFRDV_OK) return 0;
    tc.listen_address = 0;
    if (tfrdv_tcp_create(&tc, &p->client, st) != TFRDV_OK) return 0;
    mc.hooks = w->hooks;
    mc.worker_name = w->server_name;
    mc.incarnation = w->server_incarnation;
    mc.transport = tfrdv_tcp_transport(p->server);
    if (tfrdv_mgr_create(&mc, &w->server, st) != TFRDV_OK || tfrdv_tcp_attach(p->server, w->server, st) != TFRDV_OK) return 0;
    mc.worker_name = w->client_name;
    mc.incarnation = 0;
    mc.transport = tfrdv_tcp_transport(p->client);
    mc.call_timeout_ns = w->call_timeout_ns;
    if (tfrdv_mgr_create(&mc, &w->client, st) != TFRDV_OK) return 0;
    return tfrdv_tcp_set_worker(p->client, w->server_name, tfrdv_tcp_address(p->server), st) == TFRDV_OK;
}
static void tcp_destroy(conf_world* w) {
    tcp_pair* p = (tcp_pair*)w->state;
    if (!p) return;
    if (p->client) tfrdv_tcp_destroy(p->client);
    if (p->server) tfrdv_tcp_destroy(p->server);
    free(p);
    w->state = 0;
}
static void tcp_poll(conf_world* w) {
    tcp_pair* p = (tcp_pair*)w->state;
    if (p && p->server) tfrdv_tcp_poll(p->server, 1000000);
    if (p && p->client) tfrdv_tcp_poll(p->client, 1000000);
}

int main(int argc, char** argv) {
    conf_transport t = conf_transport_init("tcp", tcp_make, tcp_destroy);
    conf_transport tp = conf_transport_init("tcp (unix socket, tfrdv_tcp_poll)", tcp_make, tcp_destroy);
    TT_MAIN_BEGIN(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tfrdv_conf_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("mkdtemp failed\n");
        return 1;
    }
    /* WIRE FORMAT, Delivery: a refused or unacknowledged value goes back to the table */
    t.flags = CONF_GIVES_BACK | CONF_WAIT | CONF_PEER_INCARNATION | CONF_DRAINS;
    tp.flags = t.flags;
    tp.poll = tcp_poll;
    conf_run(&t);
    conf_run(&tp);
    rmdir(tmpdir);
    return TT_MAIN_END();
}
