/* test_verbs_adversary.c - an adversarial round against tfrdv_verbs.h on the stand-in libibverbs
   (tests/verbs/standinverbs.c, built beside this binary; no RDMA device needed): hostile bytes on
   the TCP bootstrap channel, floods of connections, cancels and step cleanups racing the answers,
   timed receives racing their sends. Every race checks that each callback ran exactly once, that
   the statuses are the documented ones, and that nothing leaked (counting allocators, the
   stand-in's live memory regions). Built by `make test` as $(B)/test_verbs_adversary; without
   libibverbs-dev it prints one [SKIP] line. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#ifndef TT_HAVE_IBV
#define TFRDV_VERBS_PROTOCOL_ONLY
#endif
#define TFRDV_VERBS_IMPLEMENTATION
#include "tfrdv_verbs.h"
#include "tt.h"
#include "fixtures.h"
#include <stdlib.h>
#ifdef TT_HAVE_IBV
#include <signal.h>
#include <sys/wait.h>
#include "standin_test.h"

/* the accepting worker is healthy: a real peer connects and fetches through it */
static int still_serves(worker* a, int task, const char* edge) {
    worker b;
    si_fetch f;
    tfrdv_status st;
    int ok;
    if (!siw_make(&b, task, 1, 0, 0)) return 0;
    ok = tfrdv_verbs_connect(b.v, a->name, "127.0.0.1", tfrdv_verbs_port(a->v), &st) == TFRDV_OK;
    if (!ok) printf("    connect: %s\n", st.msg);
    ok = ok && si_send(a, task, 1, edge, 300, 7) && si_fetch_wait(&b, atoi(strrchr(a->name, ':') + 1), 1, edge, &f) == TFRDV_OK &&
         si_bytes_ok(f.val, 300, 7);
    if (ok) si_fetch_fini(&f);
    rm_worker(&b);
    return ok;
}
/* 1 once the listener closed fd (at most ~10 s) */
static int closed_soon(int fd) {
    int i;
    for (i = 0; i < 10000 && peer_state(fd) != 1; i++) sleep_ms(1);
    return peer_state(fd) == 1;
}

/* every kind of malformed bootstrap frame: the listener drops the connection (never crashes,
   hangs or publishes a peer) and keeps serving good peers */
static void test_bootstrap_hostile_frames(void) {
    worker a;
    uint8_t fr[TFRDV_VERBS_INFO_MAX + 64];
    tfrdv_verbs_stats s;
    tfrdv_verbs_info in;
    size_t n;
    int fd, i, kind;
    uint32_t lens[] = {0u, 1u, 3u, (uint32_t)TFRDV_VERBS_INFO_MAX + 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu};
    if (!standin_ok()) return;
    TT_CHECK(siw_make(&a, 0, 1, 0, (int64_t)2 * 1000000000));
    /* hostile lengths, then as many body bytes as fit */
    for (i = 0; i < (int)(sizeof lens / sizeof *lens); i++) {
        fd = tcp_to(tfrdv_verbs_port(a.v));
        TT_CHECK(fd >= 0);
        tfrdv_verbs__put32(fr, lens[i]);
        memset(fr + 4, 0xa5, sizeof fr - 4);
        (void)send(fd, fr, sizeof fr, 0);
        if (!closed_soon(fd)) printf("    length %u not dropped\n", lens[i]);
        TT_CHECK(peer_state(fd) == 1);
        close(fd);
    }
    /* a valid hello whose fields are each pushed out of range */
    for (kind = 0; kind < 11; kind++) {
        n = hello(fr, sizeof fr, "/job:h/replica:0/task:1");
        TT_CHECK(tfrdv_verbs_info_decode(fr + 4, n - 4, &in, 0) == TFRDV_OK);
        switch (kind) {
        case 0: in.ctrl_slots = 0; break;
        case 1: in.ctrl_slots = 0xffffffffu; break;
        case 2: in.ctrl_slot_size = 0; break;
        case 3: in.ctrl_slot_size = 0xffffffffu; break;
        case 4: in.max_requests = 0; break;
        case 5: in.max_requests = 0xffffffffu; break;
        case 6: in.mtu = 0; break;
        case 7: in.mtu = 0xffffffffu; break;
        case 8: in.worker[0] = 0; break;
        case 9: in.ctrl_slot_size = 15; break; /* below one header */
        default: in.qpn = 0xffffffffu; break;
        }
        n = tfrdv_verbs_info_encode(&in, fr + 4, sizeof fr - 4);
        if (!n) continue; /* the encoder itself refuses it */
        tfrdv_verbs__put32(fr, (uint32_t)n);
        fd = tcp_to(tfrdv_verbs_port(a.v));
        TT_CHECK(fd >= 0 && send(fd, fr, n + 4, 0) == (ssize_t)(n + 4));
        (void)send(fd, "\0\0\0\0", 4, MSG_NOSIGNAL); /* READY, should it be answered */
        if (!closed_soon(fd)) printf("    field case %d not dropped\n", kind);
        TT_CHECK(peer_state(fd) == 1);
        close(fd);
    }
    /* a valid frame cut short, then the connection closed; and random garbage bodies */
    for (i = 0; i < 64; i++) {
        size_t k;
        n = hello(fr, sizeof fr, "/job:h/replica:0/task:1");
        fd = tcp_to(tfrdv_verbs_port(a.v));
        TT_CHECK(fd >= 0);
        if (i % 2) {
            for (k = 4; k < n; k++) fr[k] = (uint8_t)(rand() & 0xff);
            (void)send(fd, fr, n, MSG_NOSIGNAL);
            TT_CHECK(closed_soon(fd));
        } else {
            (void)send(fd, fr, 4 + (size_t)i % (n - 4), MSG_NOSIGNAL);
        }
        close(fd);
    }
    tfrdv_verbs_get_stats(&a.v[0], &s);
    TT_CHECK_EQ_INT(s.peers, 0);
    TT_CHECK(still_serves(&a, 1, "after_frames"));
    rm_worker(&a);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
}

/* a flood of connections (up to the documented 128 exchanges under way) that open and close at
   once or send one byte each, while a good peer connects: nothing piles up (descriptors), the
   good peer is served */
static int count_fds(void) {
    int n = 0, fd;
    for (fd = 0; fd < 4096; fd++)
        if (fcntl(fd, F_GETFD) != -1) n++;
    return n;
}
static void test_bootstrap_flood(void) {
    worker a;
    int fds[150], i, before, after = 0;
    if (!standin_ok()) return;
    TT_CHECK(siw_make(&a, 0, 1, 0, (int64_t)1 * 1000000000));
    before = count_fds();
    for (i = 0; i < 150; i++) {
        fds[i] = tcp_to(tfrdv_verbs_port(a.v));
        if (fds[i] >= 0 && i % 2) (void)send(fds[i], "\x10", 1, MSG_NOSIGNAL);
        if (fds[i] >= 0 && i % 3 == 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    TT_CHECK(still_serves(&a, 1, "during_flood"));
    for (i = 0; i < 150; i++)
        if (fds[i] >= 0) close(fds[i]);
    /* the listener closes what it accepted once each exchange ends or times out */
    for (i = 0; i < 5000; i++) {
        after = count_fds();
        if (after <= before) break;
        sleep_ms(2);
    }
    TT_CHECK(after <= before);
    rm_worker(&a);
}

/* many receives, each with its own answer racing a cancel or a step cleanup */
typedef struct race {
    int calls[512];
    int ok, cancelled, aborted, other;
    char other_msg[300];
} race;
static race rc_state;
static void race_done(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    int i = (int)(intptr_t)user;
    (void)sa; (void)ra; (void)dead;
    __atomic_add_fetch(&rc_state.calls[i], 1, __ATOMIC_SEQ_CST);
    if (st->code == TFRDV_OK && v && v->size == 64) __atomic_add_fetch(&rc_state.ok, 1, __ATOMIC_SEQ_CST);
    else if (st->code == TFRDV_CANCELLED && strstr(st->msg, "cancelled")) __atomic_add_fetch(&rc_state.cancelled, 1, __ATOMIC_SEQ_CST);
    else if (st->code == TFRDV_ABORTED && strstr(st->msg, "adversary")) __atomic_add_fetch(&rc_state.aborted, 1, __ATOMIC_SEQ_CST);
    else if (__atomic_add_fetch(&rc_state.other, 1, __ATOMIC_SEQ_CST) == 1) snprintf(rc_state.other_msg, sizeof rc_state.other_msg, "%d %s", (int)st->code, st->msg);
    tfrdv_value_release(v);
}
static void race_round(worker* a, worker* b, int64_t step, int n, int how, long delay_us) {
    tfrdv_cancel_mgr* cm = 0;
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    tfrdv_args args;
    char kb[256], edge[32];
    tfrdv_status st;
    struct timespec ts;
    int i, all;
    memset(&rc_state, 0, sizeof rc_state);
    memset(&args, 0, sizeof args);
    TT_CHECK(tfrdv_cancel_mgr_create(0, &cm, &st) == TFRDV_OK);
    args.cancel = cm;
    TT_CHECK(tfrdv_mgr_find(a->m, step, &r, &st) == TFRDV_OK && tfrdv_mgr_initialize(r, 0, &st) == TFRDV_OK);
    for (i = 0; i < n; i++) {
        snprintf(edge, sizeof edge, "race%d", i);
        mk_key(&k, kb, sizeof kb, 1, 0, edge);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k, &args, race_done, (void*)(intptr_t)i, &st), TFRDV_OK);
    }
    for (i = 0; i < n; i++) {
        snprintf(edge, sizeof edge, "race%d", i);
        si_send(b, 0, step, edge, 64, i);
    }
    ts.tv_sec = 0;
    ts.tv_nsec = delay_us * 1000;
    if (delay_us) nanosleep(&ts, 0);
    if (how == 0) tfrdv_cancel_start(cm);
    else tfrdv_abort(r, TFRDV_ABORTED, "adversary aborted the step");
    for (i = 0, all = 0; i < 20000 && !all; i++) {
        int j;
        for (j = 0, all = 1; j < n; j++)
            if (!__atomic_load_n(&rc_state.calls[j], __ATOMIC_SEQ_CST)) all = 0;
        if (!all) sleep_ms(1);
    }
    TT_CHECK(all);
    if (how == 1) tfrdv_mgr_cleanup(a->m, step);
    tfrdv_unref(r);
    tfrdv_mgr_cleanup(b->m, step);
    sleep_ms(2); /* a second callback would show here */
    for (i = 0; i < n; i++)
        if (rc_state.calls[i] != 1) {
            printf("    receive %d completed %d times\n", i, rc_state.calls[i]);
            TT_CHECK_EQ_INT(rc_state.calls[i], 1);
            break;
        }
    if (rc_state.other) printf("    unexpected status: %s\n", rc_state.other_msg);
    TT_CHECK_EQ_INT(rc_state.other, 0);
    TT_CHECK_EQ_INT(rc_state.ok + rc_state.cancelled + rc_state.aborted, n);
    tfrdv_cancel_mgr_destroy(cm);
}
static void cancel_race(int how) {
    worker a, b;
    fx_alloc fa, fm;
    tfrdv_status st;
    int round, totals[2] = {0, 0};
    if (!standin_ok()) return;
    alarm(120);
    memset(&fa, 0, sizeof fa);
    memset(&fm, 0, sizeof fm);
    si_alloc = fx_alloc_hooks(&fa).allocator;
    si_mgr_alloc = fx_alloc_hooks(&fm).allocator;
    TT_CHECK(siw_make(&a, 0, 1, 0, 0) && siw_make(&b, 1, 1, 0, 0));
    TT_CHECK(tfrdv_verbs_connect(a.v, b.name, "127.0.0.1", tfrdv_verbs_port(b.v), &st) == TFRDV_OK);
    for (round = 0; round < (TT_SI_SANITIZED ? 8 : 16); round++) {
        race_round(&a, &b, 100 + round, 256, how, (long)(round % 5) * 250);
        totals[0] += rc_state.ok;
        totals[1] += rc_state.cancelled + rc_state.aborted;
    }
    printf("    %d answered, %d %s\n", totals[0], totals[1], how ? "aborted" : "cancelled");
    TT_CHECK(totals[1] > 0); /* the race was run, not just the answers */
    rm_worker(&a);
    rm_worker(&b);
    TT_CHECK_EQ_INT(fx_live(&fa), 0);
    TT_CHECK_EQ_INT(fx_live(&fm), 0);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    alarm(0);
}
static void test_cancel_races_answers(void) { cancel_race(0); }
static void test_abort_races_answers(void) { cancel_race(1); }

/* blocking receives with 10-100 us deadlines racing their sends, on several threads */
typedef struct timed {
    worker *a, *b;
    int base, n, ok, late, other;
} timed;
static void* timed_thread(void* p) {
    timed* t = (timed*)p;
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[256], edge[32];
    tfrdv_status st;
    tfrdv_value* v;
    int i, dead;
    tfrdv_code c;
    if (tfrdv_mgr_find(t->a->m, 7, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK) return 0;
    for (i = 0; i < t->n; i++) {
        snprintf(edge, sizeof edge, "timed%d", t->base + i);
        mk_key(&k, kb, sizeof kb, 1, 0, edge);
        si_send(t->b, 0, 7, edge, 32, i);
        v = 0;
        c = tfrdv_recv(r, &k, 0, (int64_t)(10 + i % 91) * 1000, &v, &dead, &st);
        if (c == TFRDV_OK && v && v->size == 32) t->ok++;
        else if (c == TFRDV_DEADLINE_EXCEEDED && !v) t->late++;
        else if (!t->other++) printf("    timed receive %d: %d %s\n", i, (int)c, st.msg);
        tfrdv_value_release(v);
    }
    tfrdv_unref(r);
    return 0;
}
static void test_timed_receives_flood(void) {
    worker a, b;
    fx_alloc fa;
    tfrdv_status st;
    timed t[2];
    pthread_t th[2];
    int i, n = TT_SI_SANITIZED ? 300 : 1500;
    if (!standin_ok()) return;
    alarm(120);
    memset(&fa, 0, sizeof fa);
    si_alloc = fx_alloc_hooks(&fa).allocator;
    TT_CHECK(siw_make(&a, 0, 1, 0, 0) && siw_make(&b, 1, 1, 0, 0));
    TT_CHECK(tfrdv_verbs_connect(a.v, b.name, "127.0.0.1", tfrdv_verbs_port(b.v), &st) == TFRDV_OK);
    for (i = 0; i < 2; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].a = &a;
        t[i].b = &b;
        t[i].base = i * n;
        t[i].n = n;
        pthread_create(&th[i], 0, timed_thread, &t[i]);
    }
    for (i = 0; i < 2; i++) pthread_join(th[i], 0);
    printf("    %d in time, %d past their deadline\n", t[0].ok + t[1].ok, t[0].late + t[1].late);
    TT_CHECK_EQ_INT(t[0].other + t[1].other, 0);
    TT_CHECK_EQ_INT(t[0].ok + t[0].late + t[1].ok + t[1].late, 2 * n);
    TT_CHECK(still_serves(&b, 2, "after_timers")); /* the pair is still usable */
    tfrdv_mgr_cleanup(a.m, 7);
    tfrdv_mgr_cleanup(b.m, 7);
    rm_worker(&a);
    rm_worker(&b);
    TT_CHECK_EQ_INT(fx_live(&fa), 0);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    alarm(0);
}

/* the first receive's callback (progress thread) cleans up its own step (action 0) or destroys
   its manager (1) while 63 other answers arrive: each receive completes once, with its value or
   the teardown's status (ABORTED "Cleanup <step>"; for the manager ABORTED "Shutdown" or the
   destroyed transport's UNAVAILABLE) */
static worker* td_host;
static int td_action, td_calls[64], td_done, td_bad;
static void td_cb(void* user, const tfrdv_status* st, const tfrdv_args* sa, const tfrdv_args* ra, tfrdv_value* v, int dead) {
    int i = (int)(intptr_t)user;
    (void)sa; (void)ra; (void)dead;
    if (!(st->code == TFRDV_OK && v) && !(td_action == 0 && st->code == TFRDV_ABORTED && strstr(st->msg, "Cleanup")) &&
        !(td_action == 1 && st->code == TFRDV_ABORTED && strstr(st->msg, "Shutdown")) &&
        !(td_action == 1 && st->code == TFRDV_UNAVAILABLE && strstr(st->msg, "destroyed")) && !td_bad++)
        printf("    receive %d: %d %s\n", i, (int)st->code, st->msg);
    tfrdv_value_release(v);
    if (i == 0 && td_action == 0) tfrdv_mgr_cleanup(td_host->m, 9);
    if (i == 0 && td_action == 1) tfrdv_mgr_destroy(td_host->m);
    __atomic_add_fetch(&td_calls[i], 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&td_done, 1, __ATOMIC_SEQ_CST);
}
static void teardown_in_callback(int action) {
    worker a, b;
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    char kb[256], edge[32];
    tfrdv_status st;
    fx_alloc fa;
    int i;
    if (!standin_ok()) return;
    alarm(60);
    memset(td_calls, 0, sizeof td_calls);
    memset(&fa, 0, sizeof fa);
    td_done = td_bad = 0;
    td_action = action;
    si_alloc = fx_alloc_hooks(&fa).allocator;
    TT_CHECK(siw_make(&a, 0, 1, 0, 0) && siw_make(&b, 1, 1, 0, 0));
    td_host = &a;
    TT_CHECK(tfrdv_verbs_connect(a.v, b.name, "127.0.0.1", tfrdv_verbs_port(b.v), &st) == TFRDV_OK);
    TT_CHECK(tfrdv_mgr_find(a.m, 9, &r, &st) == TFRDV_OK && tfrdv_mgr_initialize(r, 0, &st) == TFRDV_OK);
    for (i = 0; i < 64; i++) {
        snprintf(edge, sizeof edge, "td%d_%d", action, i);
        mk_key(&k, kb, sizeof kb, 1, 0, edge);
        TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k, 0, td_cb, (void*)(intptr_t)i, &st), TFRDV_OK);
    }
    tfrdv_unref(r);
    for (i = 0; i < 64; i++) {
        snprintf(edge, sizeof edge, "td%d_%d", action, i);
        si_send(&b, 0, 9, edge, 16, i);
    }
    for (i = 0; i < 20000 && __atomic_load_n(&td_done, __ATOMIC_SEQ_CST) < 64; i++) sleep_ms(1);
    sleep_ms(5); /* a second completion would show here */
    TT_CHECK_EQ_INT(td_done, 64);
    TT_CHECK_EQ_INT(td_bad, 0);
    for (i = 0; i < 64; i++) TT_CHECK_EQ_INT(td_calls[i], 1);
    if (action == 1) a.m = 0; /* destroyed by the callback */
    tfrdv_mgr_cleanup(b.m, 9);
    rm_worker(&a);
    rm_worker(&b);
    TT_CHECK_EQ_INT(fx_live(&fa), 0);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    alarm(0);
}
static void test_callback_cleans_up_its_step(void) { teardown_in_callback(0); }
static void test_callback_destroys_manager(void) { teardown_in_callback(1); }

/* a peer process killed (SIGKILL) with calls to it in flight: the peer is a forked child holding
   a bootstrap connection that went live (hello, READY); every call fails once, with a status
   naming the peer, within a bounded time: UNAVAILABLE (the connection broke), or, once the broken
   peer was dropped, NOT_FOUND "No worker known as ..." (it has no table address to reconnect) */
static void test_peer_process_killed(void) {
    worker a;
    uint8_t fr[TFRDV_VERBS_INFO_MAX + 4], rep[TFRDV_VERBS_INFO_MAX + 4];
    si_fetch f[100];
    tfrdv_verbs_stats s;
    size_t n, got = 0;
    pid_t child;
    int fd, i, bad = 0;
    if (!standin_ok()) return;
    alarm(60);
    si_call_timeout_ns = (int64_t)30 * 1000000000; /* far beyond the bound checked below */
    TT_CHECK(siw_make(&a, 0, 1, 0, (int64_t)5 * 1000000000));
    fd = tcp_to(tfrdv_verbs_port(a.v));
    TT_CHECK(fd >= 0);
    n = hello(fr, sizeof fr, WORKER(1));
    TT_CHECK(send(fd, fr, n, 0) == (ssize_t)n);
    for (i = 0; i < 5000; i++) {
        ssize_t k = recv(fd, rep + got, sizeof rep - got, MSG_DONTWAIT);
        if (k > 0) got += (size_t)k;
        if (got >= 4 && got >= 4 + (size_t)tfrdv_verbs__get32(rep)) break;
        sleep_ms(1);
    }
    TT_CHECK(send(fd, "\0\0\0\0", 4, 0) == 4);
    for (i = 0; i < 5000; i++) {
        tfrdv_verbs_get_stats(a.v, &s);
        if (s.peers == 1) break;
        sleep_ms(1);
    }
    TT_CHECK_EQ_INT(s.peers, 1);
    child = fork();
    if (child == 0) {
        pause(); /* holds the connection until killed */
        _exit(0);
    }
    close(fd);
    for (i = 0; i < 100; i++) {
        char edge[32];
        snprintf(edge, sizeof edge, "killed%d", i);
        TT_CHECK(si_fetch_start(&a, 1, 1 + i % 3, edge, &f[i]));
    }
    kill(child, SIGKILL);
    waitpid(child, 0, 0);
    for (i = 0; i < 100; i++) {
        tfrdv_code c = si_fetch_end(&f[i]); /* within 20 s (the calls' deadline is 30 s) */
        if ((c != TFRDV_UNAVAILABLE && c != TFRDV_ABORTED && c != TFRDV_NOT_FOUND) || !strstr(f[i].st.msg, "task:1")) {
            if (!bad++) printf("    fetch %d: %d %s\n", i, (int)c, f[i].st.msg);
        }
    }
    TT_CHECK_EQ_INT(bad, 0);
    sleep_ms(5);
    for (i = 0; i < 100; i++) {
        TT_CHECK_EQ_INT(f[i].calls, 1);
        si_fetch_fini(&f[i]);
    }
    rm_worker(&a);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    alarm(0);
}
/* hostile bytes on the control channel: worker b writes crafted control messages into a's ring
   (through its own queue pair, as a modified peer would) while a has a fetch from b in flight.
   a breaks the connection with UNAVAILABLE "protocol error from <b>" (or, for a frame that is
   well formed but wrong for its slot, names the slot); the fetch fails once with that status */
static void inject(worker* from, const char* to, const uint8_t* bytes, size_t len) {
    tfrdv_verbs* v = from->v;
    tfrdv_verbs__todos todo = TFRDV_VERBS__TODOS(v);
    tfrdv_verbs__peer* p;
    pthread_mutex_lock(&v->mu);
    p = tfrdv_verbs__find_peer(v, to, strlen(to));
    if (p && p->state == TFRDV_VERBS__PEER_UP) tfrdv_verbs__post_ctrl(v, p, bytes, len, &todo);
    else printf("    inject: no live peer %s\n", to);
    pthread_mutex_unlock(&v->mu);
    tfrdv_verbs__todo_run(v, &todo);
    tfrdv_verbs__todos_free(&todo);
}
static size_t hostile_msg(int kind, uint8_t* buf, size_t cap) {
    tfrdv_verbs__msg m;
    int64_t dims[2] = {4, 4};
    size_t n;
    memset(&m, 0, sizeof m);
    memset(buf, 0, cap);
    switch (kind) {
    case 0: return 3;                                     /* shorter than a header */
    case 1: m.type = TFRDV_VERBS__CREDIT; n = tfrdv_verbs__encode(&m, buf, cap); buf[1] = 99; return n; /* unknown type */
    case 2: m.type = TFRDV_VERBS__CREDIT; n = tfrdv_verbs__encode(&m, buf, cap); buf[0] = 7; return n;  /* unknown version */
    case 3: memset(buf, 0xff, 64); return 64;             /* all ones */
    case 4: /* an answer for a slot never requested */
        m.type = TFRDV_VERBS__META; m.slot = 0xfffe; m.meta.dtype = 4; m.meta.rank = 2; m.meta.dims = dims; m.meta.size = 16;
        return tfrdv_verbs__encode(&m, buf, cap);
    case 5: /* an error answer for a slot never requested, with hostile text */
        m.type = TFRDV_VERBS__ERROR; m.slot = 77 | (9u << 16); m.code = TFRDV_INTERNAL; m.text = "x\n\x1b[2J"; m.text_len = 6;
        return tfrdv_verbs__encode(&m, buf, cap);
    case 6: /* a re-request for a slot that waits for none */
        m.type = TFRDV_VERBS__RE_REQUEST; m.slot = 3; m.addr = 0x1000; m.rkey = 5; m.cap = 1u << 30;
        return tfrdv_verbs__encode(&m, buf, cap);
    case 7: /* a request for a slot out of range */
        m.type = TFRDV_VERBS__REQUEST; m.slot = 0xffff; m.key = "k"; m.key_len = 1;
        return tfrdv_verbs__encode(&m, buf, cap);
    case 8: /* a request whose key length runs past the message */
        m.type = TFRDV_VERBS__REQUEST; m.key = "a;b;c;d;0:0"; m.key_len = 11;
        n = tfrdv_verbs__encode(&m, buf, cap);
        return n - 6;
    default: /* more credits returned than the ring holds */
        m.type = TFRDV_VERBS__CREDIT;
        n = tfrdv_verbs__encode(&m, buf, cap);
        return n;
    }
}
static void test_hostile_control_messages(void) {
    worker a, b;
    uint8_t buf[512];
    si_fetch f;
    tfrdv_status st;
    tfrdv_code c;
    int kind;
    if (!standin_ok()) return;
    alarm(120);
    for (kind = 0; kind < 10; kind++) {
        size_t n;
        TT_CHECK(siw_make(&a, 0, 1, 0, 0) && siw_make(&b, 1, 1, 0, 0));
        TT_CHECK(tfrdv_verbs_connect(a.v, b.name, "127.0.0.1", tfrdv_verbs_port(b.v), &st) == TFRDV_OK);
        TT_CHECK(si_fetch_start(&a, 1, 1, "never_sent", &f));
        sleep_ms(5); /* the request reached b */
        n = hostile_msg(kind, buf, sizeof buf);
        if (kind == 9) { /* the header's credit word: post_ctrl writes its own, so patch after */
            tfrdv_verbs* v = b.v;
            tfrdv_verbs__peer* p;
            pthread_mutex_lock(&v->mu);
            p = tfrdv_verbs__find_peer(v, a.name, strlen(a.name));
            if (p) p->cr.owed += 100000; /* b hands back far more credits than a's ring has */
            pthread_mutex_unlock(&v->mu);
        }
        inject(&b, a.name, buf, n);
        c = si_fetch_end(&f);
        if (c != TFRDV_UNAVAILABLE || !strstr(f.st.msg, "task:1") || !strstr(f.st.msg, "protocol error"))
            printf("    hostile message %d: %d %s\n", kind, (int)c, f.st.msg);
        TT_CHECK_EQ_INT(c, TFRDV_UNAVAILABLE);
        TT_CHECK_CONTAINS(f.st.msg, "protocol error");
        TT_CHECK(strchr(f.st.msg, '\x1b') == 0 && strchr(f.st.msg, '\n') == 0);
        sleep_ms(2);
        TT_CHECK_EQ_INT(f.calls, 1);
        si_fetch_fini(&f);
        rm_worker(&a);
        rm_worker(&b);
        TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    }
    alarm(0);
}
/* a META answer for a real request announcing a value far beyond anything allocatable (2^62
   bytes): the receive fails with a status naming the size and the limit; nothing is allocated
   for it, the connection stays up (the next fetch of the key works), the cache keeps no such size */
static void test_hostile_meta_size(void) {
    worker a, b;
    uint8_t buf[512];
    si_fetch f, g;
    tfrdv_status st;
    tfrdv_verbs__msg m;
    tfrdv_verbs__peer* p;
    int64_t dims[1];
    uint32_t slot = 0xffffffffu;
    size_t n;
    uint32_t i;
    if (!standin_ok()) return;
    alarm(60);
    TT_CHECK(siw_make(&a, 0, 1, 0, 0) && siw_make(&b, 1, 1, 0, 0));
    TT_CHECK(tfrdv_verbs_connect(a.v, b.name, "127.0.0.1", tfrdv_verbs_port(b.v), &st) == TFRDV_OK);
    TT_CHECK(si_fetch_start(&a, 1, 1, "huge", &f));
    sleep_ms(5);
    pthread_mutex_lock(&a.v->mu);
    p = tfrdv_verbs__find_peer(a.v, b.name, strlen(b.name));
    for (i = 0; p && i < p->nreq_slots; i++)
        if (p->reqs[i]) slot = p->reqs[i]->idx | ((uint32_t)p->reqs[i]->gen << 16);
    pthread_mutex_unlock(&a.v->mu);
    TT_CHECK(slot != 0xffffffffu);
    memset(&m, 0, sizeof m);
    dims[0] = (int64_t)1 << 62;
    m.type = TFRDV_VERBS__META;
    m.slot = slot;
    m.meta.dtype = TFRDV_DT_UINT8;
    m.meta.rank = 1;
    m.meta.dims = dims;
    m.meta.size = (uint64_t)1 << 62;
    n = tfrdv_verbs__encode(&m, buf, sizeof buf);
    inject(&b, a.name, buf, n);
    TT_CHECK_EQ_INT(si_fetch_end(&f), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(f.st.msg, "4611686018427387904");
    TT_CHECK_CONTAINS(f.st.msg, "task:1");
    printf("    %s\n", f.st.msg);
    si_fetch_fini(&f);
    /* the connection is still usable and the cached metadata was not poisoned */
    TT_CHECK(si_send(&b, 0, 1, "huge", 100, 4));
    TT_CHECK_EQ_INT(si_fetch_wait(&a, 1, 1, "huge", &g), TFRDV_OK);
    TT_CHECK(si_bytes_ok(g.val, 100, 4));
    si_fetch_fini(&g);
    tfrdv_mgr_cleanup(b.m, 1);
    rm_worker(&a);
    rm_worker(&b);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    alarm(0);
}
/* the metadata cache remembers a shape the receiver's alloc hook could not take (5000 bytes; the
   hook gives at most 1000): the next fetch of the key, whose value is small, asks without a
   buffer instead of failing on the stale cached size */
static tfrdv_value* small_alloc(void* user, int32_t dtype, int32_t rank, const int64_t* dims, uint64_t size) {
    tfrdv_value* v;
    int64_t* d;
    (void)user;
    if (size > 1000) return 0;
    v = (tfrdv_value*)calloc(1, sizeof *v + 8 * (size_t)rank + (size_t)size + 1);
    if (!v) return 0;
    d = (int64_t*)(v + 1);
    v->dtype = dtype;
    v->rank = rank;
    if (rank) memcpy(d, dims, 8 * (size_t)rank);
    v->dims = d;
    v->data = (char*)(d + rank);
    v->size = size;
    v->release = si_val_free;
    return v;
}
static tfrdv_code fetch_small(worker* dst, int64_t step, const char* edge, si_fetch* f) {
    tfrdv_rendezvous* r = 0;
    tfrdv_parsed_key k;
    tfrdv_args args;
    char kb[256];
    tfrdv_status st;
    memset(f, 0, sizeof *f);
    memset(&args, 0, sizeof args);
    pthread_mutex_init(&f->mu, 0);
    args.alloc_fn = small_alloc;
    mk_key(&k, kb, sizeof kb, 1, 0, edge);
    if (tfrdv_mgr_find(dst->m, step, &r, &st) != TFRDV_OK || tfrdv_mgr_initialize(r, 0, &st) != TFRDV_OK ||
        tfrdv_recv_async(r, &k, &args, si_done, f, 0) != TFRDV_OK) {
        if (r) tfrdv_unref(r);
        return TFRDV_INTERNAL;
    }
    tfrdv_unref(r);
    return si_fetch_end(f);
}
static void test_stale_cached_shape(void) {
    worker a, b;
    si_fetch f;
    tfrdv_status st;
    if (!standin_ok()) return;
    alarm(60);
    TT_CHECK(siw_make(&a, 0, 1, 0, 0) && siw_make(&b, 1, 1, 0, 0));
    TT_CHECK(tfrdv_verbs_connect(a.v, b.name, "127.0.0.1", tfrdv_verbs_port(b.v), &st) == TFRDV_OK);
    TT_CHECK(si_send(&b, 0, 1, "shrinks", 5000, 1));
    TT_CHECK_EQ_INT(fetch_small(&a, 1, "shrinks", &f), TFRDV_RESOURCE_EXHAUSTED);
    TT_CHECK_CONTAINS(f.st.msg, "5000 bytes");
    si_fetch_fini(&f);
    TT_CHECK(si_send(&b, 0, 2, "shrinks", 100, 2));
    TT_CHECK_EQ_INT(fetch_small(&a, 2, "shrinks", &f), TFRDV_OK);
    TT_CHECK(si_bytes_ok(f.val, 100, 2));
    si_fetch_fini(&f);
    tfrdv_mgr_cleanup(b.m, 1);
    tfrdv_mgr_cleanup(b.m, 2);
    rm_worker(&a);
    rm_worker(&b);
    TT_CHECK_EQ_INT(standin_live_mrs(), 0);
    alarm(0);
}
#endif

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
#ifdef TT_HAVE_IBV
    { /* the stand-in libibverbs is built beside this binary */
        const char* slash = strrchr(argv[0], '/');
        snprintf(standin, sizeof standin, "%.*s/libstandinverbs.so", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    }
    signal(SIGPIPE, SIG_IGN);
    TT_RUN(test_bootstrap_hostile_frames);
    TT_RUN(test_bootstrap_flood);
    TT_RUN(test_cancel_races_answers);
    TT_RUN(test_abort_races_answers);
    TT_RUN(test_timed_receives_flood);
    TT_RUN(test_callback_cleans_up_its_step);
    TT_RUN(test_callback_destroys_manager);
    TT_RUN(test_peer_process_killed);
    TT_RUN(test_hostile_control_messages);
    TT_RUN(test_hostile_meta_size);
    TT_RUN(test_stale_cached_shape);
#else
    printf("[SKIP] test_verbs_adversary: no libibverbs-dev\n");
#endif
    return TT_MAIN_END();
}
