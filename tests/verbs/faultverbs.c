/* faultverbs.c - a fault-injecting libibverbs for the failures Soft-RoCE cannot produce: it
   forwards every call tfrdv_verbs.h makes to the real libibverbs.so.1 and, when told through
   environment variables (read at each call), fails some of them. Loaded instead of the real
   library with tfrdv_verbs_config.library = "/path/libfaultverbs.so"; used only by rxe_test,
   beside the real rxe device.
     TFRDV_FAULT_REG_MR=1      the next ibv_reg_mr fails with ENOMEM (a low RLIMIT_MEMLOCK)
     TFRDV_FAULT_PORT_DOWN=1   every port reports IBV_PORT_DOWN
     TFRDV_FAULT_WC=N          the next successful send-side completion gets status N
                               (12 = IBV_WC_RETRY_EXC_ERR: a dead peer on real hardware)
     TFRDV_FAULT_POST_SEND=1   the next ibv_post_send fails with ENOMEM
     TFRDV_FAULT_BAD_RKEY=1    while set, every registration reports a wrong rkey (the NIC keeps
                               the right one): writes to what its owner advertises fail with a
                               remote access error, as for a corrupt rkey
   Build: cc -shared -fPIC -o libfaultverbs.so faultverbs.c -ldl */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void* real;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void* sym(const char* name) {
    pthread_mutex_lock(&mu);
    if (!real) real = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    pthread_mutex_unlock(&mu);
    return real ? dlsym(real, name) : 0;
}
/* one-shot flags: "1" in the environment, cleared when used */
static int take(const char* var) {
    const char* v;
    int r = 0;
    pthread_mutex_lock(&mu);
    v = getenv(var);
    if (v && *v && strcmp(v, "0") != 0) {
        r = atoi(v) ? atoi(v) : 1;
        unsetenv(var);
    }
    pthread_mutex_unlock(&mu);
    return r;
}
#define FWD(ret, name, params, args)                                        \
    ret name params {                                                        \
        static ret(*f) params;                                               \
        if (!f) *(void**)&f = sym(#name);                                    \
        return f args;                                                       \
    }

FWD(struct ibv_device**, ibv_get_device_list, (int* n), (n))
FWD(void, ibv_free_device_list, (struct ibv_device** l), (l))
FWD(const char*, ibv_get_device_name, (struct ibv_device* d), (d))
FWD(int, ibv_close_device, (struct ibv_context* c), (c))
FWD(int, ibv_query_device, (struct ibv_context* c, struct ibv_device_attr* a), (c, a))
FWD(int, ibv_query_gid, (struct ibv_context* c, uint8_t p, int i, union ibv_gid* g), (c, p, i, g))
FWD(struct ibv_pd*, ibv_alloc_pd, (struct ibv_context* c), (c))
FWD(int, ibv_dealloc_pd, (struct ibv_pd* p), (p))
FWD(int, ibv_dereg_mr, (struct ibv_mr* m), (m))
FWD(struct ibv_comp_channel*, ibv_create_comp_channel, (struct ibv_context* c), (c))
FWD(int, ibv_destroy_comp_channel, (struct ibv_comp_channel* c), (c))
FWD(struct ibv_cq*, ibv_create_cq, (struct ibv_context* c, int n, void* x, struct ibv_comp_channel* ch, int v), (c, n, x, ch, v))
FWD(int, ibv_destroy_cq, (struct ibv_cq* c), (c))
FWD(int, ibv_get_cq_event, (struct ibv_comp_channel* c, struct ibv_cq** q, void** x), (c, q, x))
FWD(void, ibv_ack_cq_events, (struct ibv_cq* c, unsigned int n), (c, n))
FWD(struct ibv_qp*, ibv_create_qp, (struct ibv_pd* p, struct ibv_qp_init_attr* a), (p, a))
FWD(int, ibv_modify_qp, (struct ibv_qp* q, struct ibv_qp_attr* a, int m), (q, a, m))
FWD(int, ibv_destroy_qp, (struct ibv_qp* q), (q))
FWD(const char*, ibv_wc_status_str, (enum ibv_wc_status s), (s))

#undef ibv_reg_mr
struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t len, int access);
struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t len, int access) {
    static struct ibv_mr* (*f)(struct ibv_pd*, void*, size_t, int);
    const char* bad = getenv("TFRDV_FAULT_BAD_RKEY");
    struct ibv_mr* mr;
    if (!f) *(void**)&f = sym("ibv_reg_mr");
    if (take("TFRDV_FAULT_REG_MR")) {
        errno = ENOMEM;
        return 0;
    }
    mr = f(pd, addr, len, access);
    if (mr && bad && *bad == '1') mr->rkey ^= 0x5a5a00u; /* deregistration goes by handle */
    return mr;
}
#undef ibv_query_port
int ibv_query_port(struct ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* a);
int ibv_query_port(struct ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* a) {
    static int (*f)(struct ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
    const char* down = getenv("TFRDV_FAULT_PORT_DOWN");
    int rc;
    if (!f) *(void**)&f = sym("ibv_query_port");
    rc = f(c, port, a);
    if (rc == 0 && down && *down == '1') ((struct ibv_port_attr*)a)->state = IBV_PORT_DOWN;
    return rc;
}

/* the data path is inline in verbs.h (context->ops): wrap the ops of every opened context */
static int (*real_post_send)(struct ibv_qp*, struct ibv_send_wr*, struct ibv_send_wr**);
static int (*real_poll_cq)(struct ibv_cq*, int, struct ibv_wc*);
static int (*real_query_port_ex)(struct ibv_context*, uint8_t, struct ibv_port_attr*, size_t);
static int fault_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
    if (take("TFRDV_FAULT_POST_SEND")) {
        *bad = wr;
        return ENOMEM;
    }
    return real_post_send(qp, wr, bad);
}
static int fault_poll_cq(struct ibv_cq* cq, int n, struct ibv_wc* wc) {
    int k = real_poll_cq(cq, n, wc), i;
    for (i = 0; i < k; i++) {
        if (!(wc[i].opcode & IBV_WC_RECV) && wc[i].status == IBV_WC_SUCCESS) {
            int st = take("TFRDV_FAULT_WC");
            if (st) wc[i].status = (enum ibv_wc_status)st;
        }
    }
    return k;
}
static int fault_query_port_ex(struct ibv_context* c, uint8_t port, struct ibv_port_attr* a, size_t sz) {
    const char* down = getenv("TFRDV_FAULT_PORT_DOWN");
    int rc = real_query_port_ex(c, port, a, sz);
    if (rc == 0 && down && *down == '1') a->state = IBV_PORT_DOWN;
    return rc;
}
struct ibv_context* ibv_open_device(struct ibv_device* d);
struct ibv_context* ibv_open_device(struct ibv_device* d) {
    static struct ibv_context* (*f)(struct ibv_device*);
    struct ibv_context* c;
    struct verbs_context* vc;
    if (!f) *(void**)&f = sym("ibv_open_device");
    c = f(d);
    if (!c) return c;
    real_post_send = c->ops.post_send;
    real_poll_cq = c->ops.poll_cq;
    c->ops.post_send = fault_post_send;
    c->ops.poll_cq = fault_poll_cq;
    vc = verbs_get_ctx(c);
    if (vc && vc->query_port) {
        real_query_port_ex = vc->query_port;
        vc->query_port = fault_query_port_ex;
    }
    return c;
}
