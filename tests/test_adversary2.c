/* test_adversary2.c - attacks on the core's manager and transport contract (tfrdv.h: Transports
   (provider side), Step manager): a hostile pluggable transport, extreme step ids. Each test names
   the attack and checks each callback ran exactly once and nothing leaked. */
#define _POSIX_C_SOURCE 200809L
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <stdint.h>

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"
#define A0 WA "/device:CPU:0"
#define B0 WB "/device:CPU:0"
#define INC_A 0xa7u
#define INC_B 0xb7u

/* a transport that keeps the call, counting its start and cancel calls */
typedef struct hostile {
    tfrdv_call* call;
    int starts, cancels;
    tfrdv_code sync_code; /* nonzero: finish inside start_call with it and `msg` */
    const char* msg;
} hostile;
static void h_start(void* u, tfrdv_call* call) {
    hostile* h = (hostile*)u;
    h->starts++;
    if (h->sync_code != TFRDV_OK) tfrdv_call_finish(call, h->sync_code, h->msg, 0, 0);
    else h->call = call;
}
static void h_cancel(void* u, tfrdv_call* call) {
    hostile* h = (hostile*)u;
    h->cancels++;
    if (h->call == call) { /* a prompt CANCELLED, as the contract asks */
        h->call = 0;
        tfrdv_call_finish(call, TFRDV_CANCELLED, "hostile: cancelled", 0, 0);
    }
}
static tfrdv_mgr* h_mgr(hostile* h, fx_alloc* a, int64_t timeout_ns) {
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, a);
    memset(&c.transport, 0, sizeof c.transport);
    c.transport.user = h;
    c.transport.start_call = h_start;
    c.transport.cancel_call = h_cancel;
    c.call_timeout_ns = timeout_ns;
    return mk(&c);
}
/* a manager on h (call timeout timeout_ns) whose step `step` has one receive in h's hands */
static tfrdv_mgr* h_held(hostile* h, fx_alloc* a, int64_t timeout_ns, int64_t step, tfrdv_rendezvous** r, fx_recv* rec) {
    tfrdv_mgr* m;
    fx_key k;
    memset(h, 0, sizeof *h);
    memset(rec, 0, sizeof *rec);
    *r = 0;
    if (!(m = h_mgr(h, a, timeout_ns))) return 0;
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, step, r, 0), TFRDV_OK);
    key(&k, A0, INC_A, B0, "e");
    TT_CHECK_EQ_INT(tfrdv_recv_async(*r, &k.pk, 0, fx_recv_done, rec, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(h->starts, 1);
    return m;
}

/* A provider finishing synchronously inside start_call with an error whose message is 10 KB of
   control bytes: the receiver gets that code exactly once, the message escaped (no raw control
   byte) and bounded. */
/* Defect: the provider's message reached the receiver (and its logs) with the raw control bytes
   (terminal escape sequences, forged lines). Now each such byte arrives as \xNN. */
static void test_sync_error_finish_with_a_huge_control_byte_message(void) {
    fx_alloc a = {0};
    hostile h;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r = 0;
    fx_key k;
    fx_recv rec;
    static char big[10 * 1024 + 1];
    size_t i;
    int raw = 0;
    for (i = 0; i + 1 < sizeof big; i++) big[i] = (char)(1 + i % 31); /* 0x01..0x1f */
    big[sizeof big - 1] = 0;
    memset(&h, 0, sizeof h);
    h.sync_code = TFRDV_UNAVAILABLE;
    h.msg = big;
    m = h_mgr(&h, &a, 0);
    if (!m) return;
    TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, 5, &r, 0), TFRDV_OK);
    key(&k, A0, INC_A, B0, "e");
    memset(&rec, 0, sizeof rec);
    TT_CHECK_EQ_INT(tfrdv_recv_async(r, &k.pk, 0, fx_recv_done, &rec, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(rec.calls, 1);
    TT_CHECK(rec.st.code != TFRDV_OK);
    for (i = 0; rec.st.msg[i]; i++)
        if ((unsigned char)rec.st.msg[i] < 0x20) raw++;
    TT_CHECK_EQ_INT(raw, 0);
    TT_CHECK_CONTAINS(rec.st.msg, "\\x01\\x02\\x03");
    TT_CHECK(strlen(rec.st.msg) < sizeof rec.st.msg);
    TT_CHECK(!rec.has_value);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(rec.calls, 1);
    FX_CHECK_EMPTY(&a);
}

/* A provider that never finishes: the deadline fires in tfrdv_mgr_expire (DEADLINE_EXCEEDED,
   once), cancel_call reaches the provider, and its CANCELLED finish from inside cancel_call does
   not call the receiver a second time. */
static void test_never_finishing_provider_meets_the_deadline(void) {
    fx_alloc a = {0};
    hostile h;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r;
    fx_recv rec;
    fx_set_now(1000);
    if (!(m = h_held(&h, &a, 50, 6, &r, &rec))) return;
    TT_CHECK_EQ_INT(rec.calls, 0);
    tfrdv_mgr_expire(m, 1000 + 10); /* before the deadline: nothing */
    TT_CHECK_EQ_INT(rec.calls, 0);
    fx_set_now(1000 + 1000);
    tfrdv_mgr_expire(m, 1000 + 1000);
    TT_CHECK_EQ_INT(rec.calls, 1);
    TT_CHECK_EQ_INT(rec.st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(h.cancels >= 1);
    TT_CHECK(h.call == 0);
    tfrdv_mgr_expire(m, INT64_MAX);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(rec.calls, 1);
    fx_set_now(0);
    FX_CHECK_EMPTY(&a);
}

/* A provider holding a call while the step is cleaned up: the receiver gets its answer once
   (cancelled), and the provider's finish from cancel_call is absorbed. */
static void test_cleanup_while_the_provider_holds_the_call(void) {
    fx_alloc a = {0};
    hostile h;
    tfrdv_mgr* m;
    tfrdv_rendezvous* r;
    fx_recv rec;
    if (!(m = h_held(&h, &a, 0, 7, &r, &rec))) return;
    tfrdv_mgr_cleanup(m, 7);
    TT_CHECK_EQ_INT(rec.calls, 1);
    TT_CHECK(rec.st.code != TFRDV_OK);
    TT_CHECK(h.cancels >= 1);
    tfrdv_unref(r);
    tfrdv_mgr_destroy(m);
    TT_CHECK_EQ_INT(rec.calls, 1);
    FX_CHECK_EMPTY(&a);
}

/* Step ids at the edges of int64_t: each starts its own rendezvous, and cleanup of each leaves
   nothing behind. */
static void test_extreme_step_ids(void) {
    fx_alloc a = {0};
    tfrdv_mgr_config c = fx_mgr_config(WB, INC_B, &a);
    tfrdv_mgr* m = mk(&c);
    int64_t ids[3];
    tfrdv_rendezvous* r[3];
    int i;
    ids[0] = INT64_MIN;
    ids[1] = INT64_MAX;
    ids[2] = -1;
    if (!m) return;
    for (i = 0; i < 3; i++) {
        r[i] = 0;
        TT_CHECK_EQ_INT(tfrdv_mgr_start_step(m, ids[i], &r[i], 0), TFRDV_OK);
    }
    TT_CHECK(r[0] != r[1] && r[1] != r[2] && r[0] != r[2]);
    for (i = 0; i < 3; i++) {
        tfrdv_unref(r[i]);
        tfrdv_mgr_cleanup(m, ids[i]);
    }
    tfrdv_mgr_destroy(m);
    FX_CHECK_EMPTY(&a);
}

static void test_no_assert_tripped(void) { TT_CHECK_EQ_INT(tt_asserts, 0); }

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_sync_error_finish_with_a_huge_control_byte_message);
    TT_RUN(test_never_finishing_provider_meets_the_deadline);
    TT_RUN(test_cleanup_while_the_provider_holds_the_call);
    TT_RUN(test_extreme_step_ids);
    TT_RUN(test_no_assert_tripped);
    return TT_MAIN_END();
}
