/* standinverbs.c - a stand-in libibverbs for the device-free unit test (test_verbs): every call
   tfrdv_verbs.h makes, in process memory, so that several tfrdv_verbs instances in ONE process
   talk to each other over "queue pairs" without RDMA hardware or kernel support. One device
   "standin0", one active InfiniBand port (so the GID choice is index 0 and no sysfs is read).
   RDMA WRITE (WITH IMMEDIATE) checks the remote rkey and bounds like hardware, copies the bytes at
   post time and consumes one of the target's posted receives; a missing target QP gives
   IBV_WC_RETRY_EXC_ERR (what hardware reports for a dead peer), no posted receive
   IBV_WC_RNR_RETRY_EXC_ERR, a bad rkey IBV_WC_REM_ACCESS_ERR (and the target QP goes to ERR,
   its posted receives complete with IBV_WC_WR_FLUSH_ERR); an error moves the QP to ERR and
   later posts complete with IBV_WC_WR_FLUSH_ERR. The completion channel is an eventfd, so
   tfrdv_verbs_fd/epoll work unchanged. Introspection for tests: standin_live_mrs() and
   standin_live_qps() count registrations and queue pairs not yet destroyed. Fault for tests:
   after standin_bad_rkeys(1), devices opened give every registration a wrong rkey (the one the
   fabric checks stays right), so writes to what their owner advertises fail with
   IBV_WC_REM_ACCESS_ERR, as a NIC does for a corrupt rkey.
   Loaded with tfrdv_verbs_config.library = "<dir>/libstandinverbs.so".
   Build: cc -shared -fPIC -o libstandinverbs.so standinverbs.c -lpthread */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#undef ibv_reg_mr
#undef ibv_query_port

typedef struct scq {
    struct ibv_cq cq; /* first: the library hands out &cq */
    pthread_mutex_t mu;
    struct ibv_wc* wc;
    int cap, head, n, armed;
} scq;
typedef struct sqp {
    struct ibv_qp qp; /* first */
    struct sqp* next;
    uint32_t dest;
    uint64_t* rq; /* posted receive wr_ids (ring) */
    uint32_t rcap, rhead, rn;
} sqp;
typedef struct smr {
    struct ibv_mr mr; /* first */
    struct smr* next;
    int access;
    uint32_t key;     /* the rkey the fabric accepts (mr.rkey differs on a bad-rkey device) */
} smr;
typedef struct sctx {
    struct ibv_context c; /* first */
    int bad_rkeys;
} sctx;
typedef struct sev {
    struct sev* next;
    struct ibv_cq* cq;
} sev;
typedef struct sch {
    struct ibv_comp_channel ch; /* first */
    pthread_mutex_t mu;
    sev *head, *tail;
} sch;

static pthread_mutex_t g = PTHREAD_MUTEX_INITIALIZER; /* the QP and MR registries */
static sqp* qps;
static smr* mrs;
static uint32_t next_qpn = 0x100, next_key = 0x1000;
static long live_mrs, live_qps;
static int bad_rkeys; /* devices opened now advertise wrong rkeys */
static struct ibv_device dev0;

void standin_bad_rkeys(int on) {
    pthread_mutex_lock(&g);
    bad_rkeys = on;
    pthread_mutex_unlock(&g);
}

long standin_live_mrs(void) {
    long n;
    pthread_mutex_lock(&g);
    n = live_mrs;
    pthread_mutex_unlock(&g);
    return n;
}
long standin_live_qps(void) {
    long n;
    pthread_mutex_lock(&g);
    n = live_qps;
    pthread_mutex_unlock(&g);
    return n;
}

struct ibv_device** ibv_get_device_list(int* n) {
    struct ibv_device** l = (struct ibv_device**)calloc(2, sizeof *l);
    if (!l) return 0;
    strcpy(dev0.name, "standin0");
    l[0] = &dev0;
    if (n) *n = 1;
    return l;
}
void ibv_free_device_list(struct ibv_device** l) { free(l); }
const char* ibv_get_device_name(struct ibv_device* d) { return d->name; }

/* a completion into cq; wakes the channel when armed (cq->mu not held) */
static void push(struct ibv_cq* c, const struct ibv_wc* w) {
    scq* q = (scq*)c;
    int wake = 0;
    pthread_mutex_lock(&q->mu);
    if (q->n < q->cap) q->wc[(q->head + q->n++) % q->cap] = *w;
    if (q->armed && c->channel) {
        q->armed = 0;
        wake = 1;
    }
    pthread_mutex_unlock(&q->mu);
    if (wake) {
        sch* ch = (sch*)c->channel;
        sev* e = (sev*)calloc(1, sizeof *e);
        uint64_t one = 1;
        if (!e) return;
        e->cq = c;
        pthread_mutex_lock(&ch->mu);
        if (ch->tail) ch->tail->next = e;
        else ch->head = e;
        ch->tail = e;
        pthread_mutex_unlock(&ch->mu);
        if (write(ch->ch.fd, &one, sizeof one) < 0) {}
    }
}
static int poll_cq(struct ibv_cq* c, int n, struct ibv_wc* wc) {
    scq* q = (scq*)c;
    int k = 0;
    pthread_mutex_lock(&q->mu);
    while (k < n && q->n > 0) {
        wc[k++] = q->wc[q->head];
        q->head = (q->head + 1) % q->cap;
        q->n--;
    }
    pthread_mutex_unlock(&q->mu);
    return k;
}
static int notify_cq(struct ibv_cq* c, int solicited) {
    scq* q = (scq*)c;
    (void)solicited;
    pthread_mutex_lock(&q->mu);
    q->armed = 1;
    pthread_mutex_unlock(&q->mu);
    return 0;
}
static sqp* find_qp(uint32_t qpn) {
    sqp* q;
    for (q = qps; q; q = q->next)
        if (q->qp.qp_num == qpn) return q;
    return 0;
}
static smr* find_rkey(uint32_t rkey) {
    smr* m;
    for (m = mrs; m; m = m->next)
        if (m->key == rkey) return m;
    return 0;
}
static int post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad) {
    sqp* q = (sqp*)qp;
    pthread_mutex_lock(&g);
    for (; wr; wr = wr->next) {
        if (q->rn == q->rcap) {
            pthread_mutex_unlock(&g);
            *bad = wr;
            return ENOMEM;
        }
        q->rq[(q->rhead + q->rn++) % q->rcap] = wr->wr_id;
    }
    pthread_mutex_unlock(&g);
    return 0;
}
static int post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad) {
    sqp* q = (sqp*)qp;
    for (; wr; wr = wr->next) {
        struct ibv_wc s, r;
        int have_r = 0;
        size_t len = wr->num_sge ? wr->sg_list[0].length : 0;
        memset(&s, 0, sizeof s);
        memset(&r, 0, sizeof r);
        s.wr_id = wr->wr_id;
        s.opcode = IBV_WC_RDMA_WRITE;
        s.qp_num = qp->qp_num;
        s.status = IBV_WC_SUCCESS;
        pthread_mutex_lock(&g);
        if (qp->state == IBV_QPS_ERR) {
            s.status = IBV_WC_WR_FLUSH_ERR;
        } else if (qp->state != IBV_QPS_RTS || (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)) {
            pthread_mutex_unlock(&g);
            *bad = wr;
            return EINVAL;
        } else {
            sqp* peer = find_qp(q->dest);
            smr* m = len ? find_rkey(wr->wr.rdma.rkey) : 0;
            if (!peer || (peer->qp.state != IBV_QPS_RTR && peer->qp.state != IBV_QPS_RTS)) {
                s.status = IBV_WC_RETRY_EXC_ERR;
            } else if (len && (!m || !(m->access & IBV_ACCESS_REMOTE_WRITE) ||
                               wr->wr.rdma.remote_addr < (uint64_t)(uintptr_t)m->mr.addr ||
                               wr->wr.rdma.remote_addr + len > (uint64_t)(uintptr_t)m->mr.addr + m->mr.length)) {
                s.status = IBV_WC_REM_ACCESS_ERR;
                peer->qp.state = IBV_QPS_ERR;
                while (peer->rn > 0) { /* the responder's posted receives are flushed */
                    r.wr_id = peer->rq[peer->rhead];
                    peer->rhead = (peer->rhead + 1) % peer->rcap;
                    peer->rn--;
                    r.status = IBV_WC_WR_FLUSH_ERR;
                    r.opcode = IBV_WC_RECV;
                    r.qp_num = peer->qp.qp_num;
                    push(peer->qp.recv_cq, &r);
                }
            } else if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM && peer->rn == 0) {
                s.status = IBV_WC_RNR_RETRY_EXC_ERR;
            } else {
                if (len) memcpy((void*)(uintptr_t)wr->wr.rdma.remote_addr, (void*)(uintptr_t)wr->sg_list[0].addr, len);
                if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
                    r.wr_id = peer->rq[peer->rhead];
                    peer->rhead = (peer->rhead + 1) % peer->rcap;
                    peer->rn--;
                    r.status = IBV_WC_SUCCESS;
                    r.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
                    r.wc_flags = IBV_WC_WITH_IMM;
                    r.imm_data = wr->imm_data;
                    r.byte_len = (uint32_t)len;
                    r.qp_num = peer->qp.qp_num;
                    have_r = 1;
                    /* pushed under g: the peer QP (and its CQ) cannot be destroyed meanwhile */
                    push(peer->qp.recv_cq, &r);
                }
            }
            if (s.status != IBV_WC_SUCCESS) qp->state = IBV_QPS_ERR;
        }
        pthread_mutex_unlock(&g);
        (void)have_r;
        if ((wr->send_flags & IBV_SEND_SIGNALED) || s.status != IBV_WC_SUCCESS) push(qp->send_cq, &s);
    }
    return 0;
}

struct ibv_context* ibv_open_device(struct ibv_device* d) {
    sctx* x = (sctx*)calloc(1, sizeof *x);
    struct ibv_context* c = x ? &x->c : 0;
    if (!c) return 0;
    pthread_mutex_lock(&g);
    x->bad_rkeys = bad_rkeys;
    pthread_mutex_unlock(&g);
    c->device = d;
    c->ops.poll_cq = poll_cq;
    c->ops.req_notify_cq = notify_cq;
    c->ops.post_send = post_send;
    c->ops.post_recv = post_recv;
    c->abi_compat = 0; /* not a verbs_context: the inline helpers use the exported symbols */
    return c;
}
int ibv_close_device(struct ibv_context* c) {
    free(c);
    return 0;
}
int ibv_query_device(struct ibv_context* c, struct ibv_device_attr* a) {
    (void)c;
    memset(a, 0, sizeof *a);
    a->phys_port_cnt = 1;
    a->max_qp_wr = 16384;
    a->max_cqe = 65536;
    return 0;
}
int ibv_query_port(struct ibv_context* c, uint8_t p, struct _compat_ibv_port_attr* a) {
    struct ibv_port_attr* pa = (struct ibv_port_attr*)a;
    (void)c;
    if (p != 1) return EINVAL;
    memset(pa, 0, sizeof *pa);
    pa->state = IBV_PORT_ACTIVE;
    pa->max_mtu = IBV_MTU_4096;
    pa->active_mtu = IBV_MTU_4096;
    pa->link_layer = IBV_LINK_LAYER_INFINIBAND;
    pa->gid_tbl_len = 1;
    pa->lid = 1;
    pa->max_msg_sz = 1u << 30;
    return 0;
}
int ibv_query_gid(struct ibv_context* c, uint8_t p, int i, union ibv_gid* gid) {
    (void)c;
    (void)p;
    if (i != 0) return EINVAL;
    memset(gid, 0, sizeof *gid);
    gid->raw[0] = 0xfe;
    gid->raw[1] = 0x80;
    gid->raw[15] = 1;
    return 0;
}
struct ibv_pd* ibv_alloc_pd(struct ibv_context* c) {
    struct ibv_pd* pd = (struct ibv_pd*)calloc(1, sizeof *pd);
    if (pd) pd->context = c;
    return pd;
}
int ibv_dealloc_pd(struct ibv_pd* pd) {
    free(pd);
    return 0;
}
struct ibv_mr* ibv_reg_mr(struct ibv_pd* pd, void* addr, size_t len, int access) {
    smr* m = (smr*)calloc(1, sizeof *m);
    if (!m) {
        errno = ENOMEM;
        return 0;
    }
    m->mr.pd = pd;
    m->mr.context = pd->context;
    m->mr.addr = addr;
    m->mr.length = len;
    m->access = access;
    pthread_mutex_lock(&g);
    m->key = m->mr.lkey = m->mr.rkey = next_key++;
    if (((sctx*)pd->context)->bad_rkeys) m->mr.rkey ^= 0x5a5a00u;
    m->next = mrs;
    mrs = m;
    live_mrs++;
    pthread_mutex_unlock(&g);
    return &m->mr;
}
struct ibv_mr* ibv_reg_mr_iova2(struct ibv_pd* pd, void* addr, size_t len, uint64_t iova, unsigned int access) {
    (void)iova;
    return ibv_reg_mr(pd, addr, len, (int)access);
}
int ibv_dereg_mr(struct ibv_mr* mr) {
    smr** pp;
    pthread_mutex_lock(&g);
    for (pp = &mrs; *pp; pp = &(*pp)->next)
        if (&(*pp)->mr == mr) {
            *pp = (*pp)->next;
            live_mrs--;
            break;
        }
    pthread_mutex_unlock(&g);
    free(mr);
    return 0;
}
struct ibv_comp_channel* ibv_create_comp_channel(struct ibv_context* c) {
    sch* ch = (sch*)calloc(1, sizeof *ch);
    if (!ch) return 0;
    ch->ch.context = c;
    ch->ch.fd = eventfd(0, EFD_SEMAPHORE);
    pthread_mutex_init(&ch->mu, 0);
    return &ch->ch;
}
int ibv_destroy_comp_channel(struct ibv_comp_channel* c) {
    sch* ch = (sch*)c;
    while (ch->head) {
        sev* e = ch->head;
        ch->head = e->next;
        free(e);
    }
    close(c->fd);
    pthread_mutex_destroy(&ch->mu);
    free(ch);
    return 0;
}
int ibv_get_cq_event(struct ibv_comp_channel* c, struct ibv_cq** cq, void** ctx) {
    sch* ch = (sch*)c;
    uint64_t x;
    sev* e;
    if (read(c->fd, &x, sizeof x) != (ssize_t)sizeof x) return -1; /* EAGAIN on a non-blocking fd */
    pthread_mutex_lock(&ch->mu);
    e = ch->head;
    if (e) {
        ch->head = e->next;
        if (!ch->head) ch->tail = 0;
    }
    pthread_mutex_unlock(&ch->mu);
    if (!e) return -1;
    *cq = e->cq;
    *ctx = e->cq->cq_context;
    free(e);
    return 0;
}
void ibv_ack_cq_events(struct ibv_cq* cq, unsigned int n) {
    (void)cq;
    (void)n;
}
struct ibv_cq* ibv_create_cq(struct ibv_context* c, int cqe, void* ctx, struct ibv_comp_channel* ch, int vec) {
    scq* q = (scq*)calloc(1, sizeof *q);
    (void)vec;
    if (!q) return 0;
    q->cap = cqe > 0 ? cqe : 1;
    q->wc = (struct ibv_wc*)calloc((size_t)q->cap, sizeof *q->wc);
    if (!q->wc) {
        free(q);
        return 0;
    }
    q->cq.context = c;
    q->cq.cq_context = ctx;
    q->cq.channel = ch;
    q->cq.cqe = cqe;
    pthread_mutex_init(&q->mu, 0);
    return &q->cq;
}
int ibv_destroy_cq(struct ibv_cq* c) {
    scq* q = (scq*)c;
    if (c->channel) { /* drop its pending events (real libibverbs: they must be acked first) */
        sch* ch = (sch*)c->channel;
        sev** pp;
        pthread_mutex_lock(&ch->mu);
        ch->tail = 0;
        for (pp = &ch->head; *pp;) {
            if ((*pp)->cq == c) {
                sev* e = *pp;
                uint64_t x;
                *pp = e->next;
                free(e);
                if (read(ch->ch.fd, &x, sizeof x) < 0) {}
            } else {
                ch->tail = *pp;
                pp = &(*pp)->next;
            }
        }
        pthread_mutex_unlock(&ch->mu);
    }
    pthread_mutex_destroy(&q->mu);
    free(q->wc);
    free(q);
    return 0;
}
struct ibv_qp* ibv_create_qp(struct ibv_pd* pd, struct ibv_qp_init_attr* a) {
    sqp* q = (sqp*)calloc(1, sizeof *q);
    if (!q) return 0;
    q->rcap = a->cap.max_recv_wr ? a->cap.max_recv_wr : 1;
    q->rq = (uint64_t*)calloc(q->rcap, sizeof *q->rq);
    if (!q->rq) {
        free(q);
        return 0;
    }
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = a->send_cq;
    q->qp.recv_cq = a->recv_cq;
    q->qp.qp_type = a->qp_type;
    q->qp.state = IBV_QPS_RESET;
    pthread_mutex_lock(&g);
    q->qp.qp_num = next_qpn++;
    q->next = qps;
    qps = q;
    live_qps++;
    pthread_mutex_unlock(&g);
    return &q->qp;
}
int ibv_modify_qp(struct ibv_qp* qp, struct ibv_qp_attr* a, int mask) {
    sqp* q = (sqp*)qp;
    pthread_mutex_lock(&g);
    if (mask & IBV_QP_DEST_QPN) q->dest = a->dest_qp_num;
    if (mask & IBV_QP_STATE) qp->state = a->qp_state;
    pthread_mutex_unlock(&g);
    return 0;
}
int ibv_destroy_qp(struct ibv_qp* qp) {
    sqp** pp;
    sqp* q = (sqp*)qp;
    pthread_mutex_lock(&g);
    for (pp = &qps; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            live_qps--;
            break;
        }
    pthread_mutex_unlock(&g);
    free(q->rq);
    free(q);
    return 0;
}
const char* ibv_wc_status_str(enum ibv_wc_status s) {
    switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "error";
    }
}
