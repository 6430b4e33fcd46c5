/* test_msgmax.c - the build with TFRDV_STATUS_MSG_MAX=16 (defect 5 of the outside review): every
   message is cut to 15 bytes, and no status code may depend on message text. A timed-out
   tfrdv_recv must still be DEADLINE_EXCEEDED (locally and for a remote receive), a cancelled one
   CANCELLED, and every message stays NUL-terminated within its 16 bytes. */
#define _POSIX_C_SOURCE 200809L
#define TFRDV_STATUS_MSG_MAX 16
#define TT_COUNT_ASSERTS
#include "tt.h"
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include "fixtures.h"
#include <pthread.h>

#define WA "/job:a/replica:0/task:0"
#define WB "/job:b/replica:0/task:0"

static void test_local_timed_recv_is_deadline_exceeded(void) {
    tfrdv_rendezvous* r = 0;
    tkey k;
    tfrdv_value* v = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(sizeof st.msg, 16);
    TT_CHECK_EQ_INT(tfrdv_create(0, &r, 0), TFRDV_OK);
    tkey_make(&k, WA "/device:CPU:0", 1, WA "/device:CPU:1", "a_rather_long_edge_name_indeed");
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, 0, 1000000, &v, 0, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK_EQ_INT(st.code, TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(strlen(st.msg) == 15);
    tfrdv_destroy(r);
}
static void* cancel_soon(void* p) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, 0);
    tfrdv_cancel_start((tfrdv_cancel_mgr*)p);
    return 0;
}
static void test_local_timed_recv_cancelled_by_the_user_is_cancelled(void) {
    tfrdv_rendezvous* r = 0;
    tfrdv_cancel_mgr* cm = 0;
    tkey k;
    tfrdv_value* v = 0;
    tfrdv_status st;
    tfrdv_args args;
    pthread_t th;
    TT_CHECK_EQ_INT(tfrdv_create(0, &r, 0), TFRDV_OK);
    TT_CHECK_EQ_INT(tfrdv_cancel_mgr_create(0, &cm, 0), TFRDV_OK);
    tkey_make(&k, WA "/device:CPU:0", 1, WA "/device:CPU:1", "x");
    args = cancel_args(cm);
    pthread_create(&th, 0, cancel_soon, cm);
    TT_CHECK_EQ_INT(tfrdv_recv(r, &k.pk, &args, 5000000000, &v, 0, &st), TFRDV_CANCELLED);
    pthread_join(th, 0);
    tfrdv_cancel_mgr_destroy(cm);
    tfrdv_destroy(r);
}
static void test_remote_timed_recv_is_deadline_exceeded(void) {
    tfrdv_loopback* lb = 0;
    tfrdv_mgr_config ca = tfrdv_mgr_config_init(), cb;
    tfrdv_mgr* ma;
    tfrdv_mgr* mb;
    tfrdv_rendezvous* ra = 0;
    tfrdv_rendezvous* rb = 0;
    fx_key k;
    tfrdv_value* v = 0;
    tfrdv_status st;
    TT_CHECK_EQ_INT(tfrdv_loopback_create(0, &lb, 0), TFRDV_OK);
    ca.worker_name = WA;
    ca.incarnation = 1;
    ca.transport = tfrdv_loopback_transport(lb);
    cb = ca;
    cb.worker_name = WB;
    cb.incarnation = 2;
    ma = mk(&ca);
    mb = mk(&cb);
    tfrdv_loopback_register(lb, WA, ma, 0);
    tfrdv_loopback_register(lb, WB, mb, 0);
    tfrdv_mgr_find(ma, 1, &ra, 0);
    tfrdv_mgr_find(mb, 1, &rb, 0);
    tfrdv_mgr_initialize(ra, 0, 0);
    tfrdv_mgr_initialize(rb, 0, 0);
    key(&k, WB "/device:CPU:0", 2, WA "/device:CPU:0", "remote");
    TT_CHECK_EQ_INT(tfrdv_recv(ra, &k.pk, 0, 2000000, &v, 0, &st), TFRDV_DEADLINE_EXCEEDED);
    TT_CHECK(strlen(st.msg) <= 15);
    tfrdv_unref(ra);
    tfrdv_unref(rb);
    tfrdv_mgr_destroy(ma);
    tfrdv_mgr_destroy(mb);
    tfrdv_loopback_destroy(lb);
}
static void test_long_messages_are_cut_and_terminated(void) {
    tfrdv_parsed_key pk;
    tfrdv_status st;
    memset(&st, 'x', sizeof st);
    TT_CHECK_EQ_INT(tfrdv_key_parse("nonsense-key-that-is-long", 25, &pk, &st), TFRDV_INVALID_ARGUMENT);
    TT_CHECK_EQ_INT(strlen(st.msg), 15);
    TT_CHECK_EQ_INT(tfrdv_status_set(&st, TFRDV_ABORTED, "0123456789abcdefghij"), TFRDV_ABORTED);
    TT_CHECK_STR(st.msg, "0123456789abcde");
}

int main(int argc, char** argv) {
    TT_MAIN_BEGIN(argc, argv);
    TT_RUN(test_local_timed_recv_is_deadline_exceeded);
    TT_RUN(test_local_timed_recv_cancelled_by_the_user_is_cancelled);
    TT_RUN(test_remote_timed_recv_is_deadline_exceeded);
    TT_RUN(test_long_messages_are_cut_and_terminated);
    TT_CHECK_EQ_INT(tt_asserts, 0);
    return TT_MAIN_END();
}
