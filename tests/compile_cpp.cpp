// compile_cpp.cpp - the implementation compiled as C++ (-fno-exceptions -fno-rtti), plus a tiny
// runtime smoke use: create a local rendezvous, send, recv_async, destroy. Exits 0 on success.
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdio.h>
#include <string.h>

struct got {
    int calls;
    tfrdv_code code;
    tfrdv_value* value;
};
static void on_recv(void* user, const tfrdv_status* status, const tfrdv_args* send_args,
                    const tfrdv_args* recv_args, tfrdv_value* value, int is_dead) {
    got* g = static_cast<got*>(user);
    (void)send_args;
    (void)recv_args;
    (void)is_dead;
    g->calls++;
    g->code = status->code;
    g->value = value;
}

int main() {
    static const char key[] =
        "/job:a/replica:0/task:0/device:CPU:0;0000000000000001;/job:a/replica:0/task:0/device:CPU:0;e;0:0";
    tfrdv_parsed_key pk;
    tfrdv_rendezvous* r = 0;
    tfrdv_status st;
    tfrdv_value v;
    int64_t dims[1] = {1};
    float x = 2.5f;
    got g = {0, TFRDV_UNKNOWN, 0};
    memset(&v, 0, sizeof v);
    v.dtype = 1;
    v.rank = 1;
    v.dims = dims;
    v.data = &x;
    v.size = sizeof x;
    if (tfrdv_key_parse(key, sizeof key - 1, &pk, &st) != TFRDV_OK) return 1;
    if (tfrdv_create(0, &r, &st) != TFRDV_OK) return 2;
    if (tfrdv_send(r, &pk, 0, &v, 0, &st) != TFRDV_OK) return 3;
    if (tfrdv_recv_async(r, &pk, 0, on_recv, &g, 0) != TFRDV_OK) return 4;
    if (g.calls != 1 || g.code != TFRDV_OK || g.value != &v || *(float*)g.value->data != 2.5f) return 5;
    tfrdv_value_release(g.value);
    tfrdv_destroy(r);
    printf("compile_cpp: ok\n");
    return 0;
}
