/* tests/pkg/consumer.c - the program tests/pkg/run.sh builds through each package (pkg-config,
   CMake find_package, add_subdirectory, FetchContent, a meson subproject): the implementation
   macros live here, in the user's one file, as the README asks. A send and a receive on a local
   rendezvous check the value; a tfrdv_tcp client starts and joins its I/O thread, so the threads
   link the package promises is exercised. Prints "consumer OK 42.0 (tfrdv X.Y.Z)"; exit 0 only
   when every step worked. */
#define _GNU_SOURCE
#define TFRDV_IMPLEMENTATION
#define TFRDV_TCP_IMPLEMENTATION
#include "tfrdv.h"
#include "tfrdv_tcp.h"
#include <stdio.h>
#include <string.h>

int main(void) {
    tfrdv_key k; tfrdv_rendezvous* r; tfrdv_status st; tfrdv_value* v; tfrdv_value* got = NULL;
    tfrdv_frame_iter top = {0, 0}; float x = 42; int dead = 0; float y;
    tfrdv_tcp_config tc = tfrdv_tcp_config_init(); /* a client: no listener, one I/O thread */
    tfrdv_tcp* tcp;
    if (tfrdv_key_make(&k, "/job:a/replica:0/task:0/device:CPU:0", 1, "/job:a/replica:0/task:0/device:GPU:0",
                       "edge_1_x", top, &st) != TFRDV_OK || tfrdv_create(NULL, &r, &st) != TFRDV_OK)
        return printf("setup: %s\n", st.msg), 1;
    v = tfrdv_value_new(NULL, TFRDV_DT_FLOAT, 0, NULL, &x, sizeof x);
    if (!v) return printf("tfrdv_value_new failed\n"), 1;
    if (tfrdv_send(r, &k.parsed, NULL, v, 0, &st) != TFRDV_OK) return printf("send: %s\n", st.msg), 1;
    if (tfrdv_recv(r, &k.parsed, NULL, 0, &got, &dead, &st) != TFRDV_OK) return printf("recv: %s\n", st.msg), 1;
    if (!got || dead || got->dtype != TFRDV_DT_FLOAT || got->size != sizeof y)
        return printf("recv: wrong value (dead %d)\n", dead), 1;
    memcpy(&y, got->data, sizeof y);
    tfrdv_value_release(got);
    tfrdv_destroy(r);
    if (y != 42) return printf("recv: got %f, want 42\n", (double)y), 1;
    if (tfrdv_tcp_create(&tc, &tcp, &st) != TFRDV_OK) return printf("tfrdv_tcp_create: %s\n", st.msg), 1;
    tfrdv_tcp_destroy(tcp);
    printf("consumer OK %.1f (tfrdv %s)\n", (double)y, TFRDV_VERSION_STRING);
    return 0;
}
