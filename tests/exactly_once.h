/* exactly_once.h - the exactly-once workload shared by the gRPC (test_multi.c) and verbs
   (test_verbs.c) suites: include it after tt.h and tfrdv.h (POSIX threads). */
#ifndef TFRDV_TESTS_EXACTLY_ONCE_H
#define TFRDV_TESTS_EXACTLY_ONCE_H
/* ---- exactly once under racing timeouts and cancels: values sent = received + still buffered.
   EO_T consumer threads on the receiving worker each fetch EO_F values of their own key; every
   fetch is a plain receive (60%), a receive with a short timeout (20%, 1 us..2 ms) or a receive
   whose cancellation manager is cancelled at once or up to 1.5 ms later (20%). A producer on the
   serving worker sends the EO_F values of every key meanwhile. At the end, after the transports
   settled, the values still buffered on the serving worker are counted (tfrdv_pending) and
   drained: every value sent must have been received exactly once or be buffered, intact. ---- */
#define EO_T 6
#define EO_F 150
#define EO_N (EO_T * EO_F)
typedef struct eo_run {
    tfrdv_rendezvous *client, *server;
    tfrdv_parsed_key* keys; /* EO_T keys, source on the serving worker */
    int seen[EO_N];         /* receptions per value id (atomic) */
    int corrupt, plain_failed, received, cancelled, timed_out;
    uint32_t seed;
    int64_t plain_timeout_ns;
} eo_run;
typedef struct eo_one {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    tfrdv_status st;
    tfrdv_value* v;
} eo_one;
static void eo_free(tfrdv_value* v) { free(v); }
static uint8_t eo_byte(uint64_t id, uint64_t i) { return (uint8_t)(id * 2654435761u + i * 40503u + (id >> 8)); }
static tfrdv_value* eo_val(int id) { /* id in the first 8 bytes; every 3rd one above 1 KiB */
    uint64_t n = id % 3 == 0 ? 3000 : 40, i;
    tfrdv_value* v = (tfrdv_value*)malloc(sizeof *v + 8 + n);
    int64_t* dims = (int64_t*)(v + 1);
    uint8_t* d = (uint8_t*)(dims + 1);
    memset(v, 0, sizeof *v);
    dims[0] = (int64_t)n;
    v->dtype = 4; /* DT_UINT8 */
    v->rank = 1;
    v->dims = dims;
    v->data = d;
    v->size = n;
    v->release = eo_free;
    for (i = 0; i < n; i++) d[i] = eo_byte((uint64_t)id, i);
    memcpy(d, &id, sizeof id);
    return v;
}
/* the value's id, or -1 when it is not one of ours intact */
static int eo_id(const tfrdv_value* v) {
    int id;
    uint64_t i;
    if (!v || v->dtype != 4 || v->rank != 1 || v->size < sizeof id || v->dims[0] != (int64_t)v->size) return -1;
    memcpy(&id, v->data, sizeof id);
    if (id < 0 || id >= EO_N || v->size != (id % 3 == 0 ? 3000u : 40u)) return -1;
    for (i = sizeof id; i < v->size; i++)
        if (((const uint8_t*)v->data)[i] != eo_byte((uint64_t)id, i)) return -1;
    return id;
}
static void eo_take(eo_run* x, tfrdv_value* v) {
    int id = eo_id(v);
    if (id < 0) __atomic_add_fetch(&x->corrupt, 1, __ATOMIC_SEQ_CST);
    else __atomic_add_fetch(&x->seen[id], 1, __ATOMIC_SEQ_CST);
    tfrdv_value_release(v);
}
static void eo_done(void* u, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    eo_one* o = (eo_one*)u;
    (void)sa;
    (void)ra;
    (void)dead;
    pthread_mutex_lock(&o->mu);
    o->done++;
    o->st = *st;
    o->v = v;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
}
static void eo_sleep_us(uint32_t us) {
    struct timespec ts;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)us * 1000;
    if (us) nanosleep(&ts, 0);
}
typedef struct eo_arg { eo_run* x; int t; } eo_arg;
static uint32_t eo_rnd(uint32_t* s) {
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffu;
}
static void* eo_consumer(void* p) {
    eo_arg* a = (eo_arg*)p;
    eo_run* x = a->x;
    uint32_t s = x->seed + (uint32_t)a->t * 7919u;
    int j;
    for (j = 0; j < EO_F; j++) {
        uint32_t mode = eo_rnd(&s) % 10;
        tfrdv_value* v = 0;
        int dead = 0;
        tfrdv_status st;
        tfrdv_code rc;
        if (mode < 6) { /* plain: there is always a value for it unless one was lost */
            rc = tfrdv_recv(x->client, &x->keys[a->t], 0, x->plain_timeout_ns, &v, &dead, &st);
            if (rc != TFRDV_OK) __atomic_add_fetch(&x->plain_failed, 1, __ATOMIC_SEQ_CST);
        } else if (mode < 8) { /* a short timeout */
            rc = tfrdv_recv(x->client, &x->keys[a->t], 0, (int64_t)(1 + eo_rnd(&s) % 2000) * 1000, &v, &dead, &st);
            if (rc == TFRDV_DEADLINE_EXCEEDED) __atomic_add_fetch(&x->timed_out, 1, __ATOMIC_SEQ_CST);
            else if (rc != TFRDV_OK) printf("    short receive: %s %s\n", tfrdv_code_str(rc), st.msg);
        } else { /* cancelled at once or a little later, from this thread */
            eo_one o;
            tfrdv_cancel_mgr* cm = 0;
            tfrdv_args args;
            uint32_t at = eo_rnd(&s) % 4 == 0 ? 0 : eo_rnd(&s) % 1500;
            memset(&o, 0, sizeof o);
            pthread_mutex_init(&o.mu, 0);
            pthread_cond_init(&o.cv, 0);
            memset(&args, 0, sizeof args);
            if (tfrdv_cancel_mgr_create(0, &cm, &st) != TFRDV_OK) break;
            args.cancel = cm;
            if (tfrdv_recv_async(x->client, &x->keys[a->t], &args, eo_done, &o, &st) != TFRDV_OK) printf("    recv_async: %s\n", st.msg);
            eo_sleep_us(at);
            tfrdv_cancel_start(cm);
            pthread_mutex_lock(&o.mu);
            while (!o.done) pthread_cond_wait(&o.cv, &o.mu);
            pthread_mutex_unlock(&o.mu);
            rc = o.st.code;
            v = o.v;
            if (rc == TFRDV_CANCELLED) __atomic_add_fetch(&x->cancelled, 1, __ATOMIC_SEQ_CST);
            else if (rc != TFRDV_OK) printf("    cancelled receive: %s %s\n", tfrdv_code_str(rc), o.st.msg);
            tfrdv_cancel_mgr_destroy(cm);
            pthread_cond_destroy(&o.cv);
            pthread_mutex_destroy(&o.mu);
        }
        if (rc == TFRDV_OK) {
            __atomic_add_fetch(&x->received, 1, __ATOMIC_SEQ_CST);
            eo_take(x, v);
        } else {
            tfrdv_value_release(v);
        }
    }
    return 0;
}
static void* eo_producer(void* p) {
    eo_run* x = (eo_run*)p;
    uint32_t s = x->seed ^ 0x5bd1e995u;
    int j, t;
    tfrdv_status st;
    for (j = 0; j < EO_F; j++)
        for (t = 0; t < EO_T; t++) {
            tfrdv_value* v = eo_val(t * EO_F + j);
            if (tfrdv_send(x->server, &x->keys[t], 0, v, 0, &st) != TFRDV_OK) {
                printf("    send: %s\n", st.msg);
                tfrdv_value_release(v);
            }
            if (eo_rnd(&s) % 4 == 0) eo_sleep_us(eo_rnd(&s) % 300);
        }
    return 0;
}
typedef struct eo_pend { const tfrdv_parsed_key* keys; size_t per_key[EO_T], total; } eo_pend;
static void eo_count_pending(void* u, int64_t step, tfrdv_pending_kind kind, const char* key, size_t key_len, size_t count) {
    eo_pend* p = (eo_pend*)u;
    int t;
    (void)step;
    if (kind != TFRDV_PENDING_SEND) return;
    p->total += count;
    for (t = 0; t < EO_T; t++)
        if (p->keys[t].full.len == key_len && memcmp(p->keys[t].full.ptr, key, key_len) == 0) p->per_key[t] += count;
}
typedef struct eo_drain { eo_run* x; int n, failed; } eo_drain;
static void eo_served(void* u, const tfrdv_status* st, const tfrdv_args* sa, tfrdv_value* v, int dead) {
    eo_drain* d = (eo_drain*)u;
    (void)sa;
    (void)dead;
    if (st->code == TFRDV_OK) {
        d->n++;
        eo_take(d->x, v);
    } else {
        d->failed++;
        printf("    drain: %s %s\n", tfrdv_code_str(st->code), st->msg);
        tfrdv_value_release(v);
    }
}
/* runs the workload; settle(user) returns once the transports have no call in flight. The values
   left are taken from the serving manager's table as a remote request would (tfrdv_mgr_serve,
   step `step`). Prints the counts and returns the number of values lost. */
static int eo_workload(const char* name, tfrdv_rendezvous* client, tfrdv_rendezvous* server, tfrdv_mgr* server_mgr,
                       int64_t step, tfrdv_parsed_key* keys, void (*settle)(void*), void* settle_user, int exact) {
    static eo_run x;
    eo_arg args[EO_T];
    pthread_t th[EO_T], prod;
    eo_pend pend, after;
    eo_drain dr;
    int t, i, dups = 0, lost = 0;
    size_t j;
    int64_t rid = (int64_t)1 << 40;
    memset(&x, 0, sizeof x);
    x.client = client;
    x.server = server;
    x.keys = keys;
    x.seed = (uint32_t)tfrdv_now_ns();
    x.plain_timeout_ns = exact ? (int64_t)5 * 1000000000 : 200000000; /* not exact: lost values make them wait */
    printf("    seed %u\n", x.seed);
    for (t = 0; t < EO_T; t++) {
        args[t].x = &x;
        args[t].t = t;
        pthread_create(&th[t], 0, eo_consumer, &args[t]);
    }
    pthread_create(&prod, 0, eo_producer, &x);
    pthread_join(prod, 0);
    for (t = 0; t < EO_T; t++) pthread_join(th[t], 0);
    settle(settle_user); /* values given back by the transports are in the table now */
    memset(&pend, 0, sizeof pend);
    pend.keys = keys;
    tfrdv_pending(server, eo_count_pending, &pend);
    memset(&dr, 0, sizeof dr);
    dr.x = &x;
    for (t = 0; t < EO_T; t++) /* each completes inline: its value is there */
        for (j = 0; j < pend.per_key[t]; j++)
            tfrdv_mgr_serve(server_mgr, step, keys[t].full.ptr, keys[t].full.len, rid++, 0, eo_served, &dr);
    memset(&after, 0, sizeof after);
    after.keys = keys;
    tfrdv_pending(server, eo_count_pending, &after);
    for (i = 0; i < EO_N; i++) {
        if (x.seen[i] > 1) dups += x.seen[i] - 1;
        if (x.seen[i] == 0) lost++;
    }
    printf("    %s: %d values sent, %d received, %d still buffered, %d lost, %d duplicates, %d corrupt; "
           "%d receives timed out, %d cancelled, %d plain receives failed\n",
           name, EO_N, x.received, dr.n, lost, dups, x.corrupt, x.timed_out, x.cancelled, x.plain_failed);
    TT_CHECK_EQ_INT((size_t)dr.n, pend.total);
    TT_CHECK_EQ_INT(dr.failed, 0);
    TT_CHECK_EQ_INT(after.total, 0);
    TT_CHECK_EQ_INT(dups, 0);
    TT_CHECK_EQ_INT(x.corrupt, 0);
    if (exact) {
        TT_CHECK_EQ_INT(x.received + dr.n, EO_N);
        TT_CHECK_EQ_INT(x.plain_failed, 0);
        TT_CHECK_EQ_INT(lost, 0);
    }
    return lost;
}
#endif
