/* verbs_test.h - shared by the verbs tests (test_verbs.c on the stand-in libibverbs, rxe_test.c
   on Soft-RoCE): a worker (transport + manager, one incarnation) and keys between tasks of
   /job:w/replica:0. Include after tfrdv_verbs.h and tt.h. */
#ifndef TFRDV_VERBS_TEST_H
#define TFRDV_VERBS_TEST_H

#define WORKER(n) "/job:w/replica:0/task:" #n
#define INC 0x1234u

typedef struct worker {
    tfrdv_verbs* v;
    tfrdv_mgr* m;
    char name[64];
} worker;
typedef struct wopts { /* zero: the defaults */
    int64_t call_timeout_ns, peer_timeout_ns, connect_timeout_ns, reconnect_backoff_ns;
    int ctrl_slots, max_requests, listen_port; /* listen on 127.0.0.1:listen_port (-1: no listener) */
    int no_thread;       /* the test drives tfrdv_verbs_poll itself */
    const char* library; /* e.g. the stand-in libibverbs */
    tfrdv_allocator alloc, mgr_alloc; /* the transport's and the manager's hooks.allocator */
    tfrdv_logger logger;              /* the transport's hooks.logger */
    const tfrdv_worker* workers;      /* the transport's worker table */
    size_t num_workers;
} wopts;

static int mk_worker(worker* w, int task, const wopts* o, tfrdv_status* st) {
    tfrdv_verbs_config vc = tfrdv_verbs_config_init();
    tfrdv_mgr_config mc = tfrdv_mgr_config_init();
    char listen[32];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "/job:w/replica:0/task:%d", task);
    vc.worker_name = w->name;
    if (o) vc.hooks.allocator = o->alloc;
    if (o) vc.hooks.logger = o->logger;
    vc.num_threads = o && o->no_thread ? -1 : 0;
    vc.library = o ? o->library : 0;
    vc.workers = o ? o->workers : 0;
    vc.num_workers = o ? o->num_workers : 0;
    snprintf(listen, sizeof listen, "127.0.0.1:%d", o ? o->listen_port : 0);
    vc.listen_address = o && o->listen_port < 0 ? 0 : listen;
    vc.connect_timeout_ns = o ? o->connect_timeout_ns : 0;
    vc.reconnect_backoff_ns = o ? o->reconnect_backoff_ns : 0;
    vc.ctrl_slots = o ? o->ctrl_slots : 0;
    vc.max_requests = o ? o->max_requests : 0;
    vc.peer_timeout_ns = o && o->peer_timeout_ns ? o->peer_timeout_ns : 0;
    if (vc.peer_timeout_ns) vc.keepalive_ns = vc.peer_timeout_ns / 4;
    if (tfrdv_verbs_create(&vc, &w->v, st) != TFRDV_OK) return 0;
    mc.worker_name = w->name;
    if (o) mc.hooks.allocator = o->mgr_alloc;
    mc.incarnation = INC;
    mc.transport = tfrdv_verbs_transport(w->v);
    mc.call_timeout_ns = o ? o->call_timeout_ns : 0;
    if (tfrdv_mgr_create(&mc, &w->m, st) != TFRDV_OK) return 0;
    return tfrdv_verbs_attach(w->v, w->m, st) == TFRDV_OK;
}
static void rm_worker(worker* w) {
    if (w->m) tfrdv_mgr_destroy(w->m);
    if (w->v) tfrdv_verbs_destroy(w->v);
    memset(w, 0, sizeof *w);
}
static uint64_t key_inc = INC; /* the source incarnation mk_key writes */
static void mk_key(tfrdv_parsed_key* k, char* buf, size_t cap, int src, int dst, const char* edge) {
    char s[64], d[64];
    tfrdv_frame_iter fi = {0, 0};
    snprintf(s, sizeof s, "/job:w/replica:0/task:%d/device:CPU:0", src);
    snprintf(d, sizeof d, "/job:w/replica:0/task:%d/device:CPU:0", dst);
    if (tfrdv_key_create(s, key_inc, d, edge, fi, buf, cap, 0, 0) != TFRDV_OK || tfrdv_key_parse(buf, strlen(buf), k, 0) != TFRDV_OK)
        printf("bad key %s\n", edge);
}
#endif
