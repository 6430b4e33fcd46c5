/* link_a.c + link_b.c: the implementation in exactly one TU; both call the API and link. */
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdio.h>
#include <string.h>

int link_b_check(void);

int main(void) {
    char key[128];
    size_t len = 0;
    tfrdv_frame_iter fi;
    fi.frame_id = 0;
    fi.iter_id = 0;
    if (tfrdv_key_create("/cpu:0", 1, "/gpu:0", "e", fi, key, sizeof key, &len, NULL) != TFRDV_OK) return 1;
    if (strcmp(key, "/cpu:0;0000000000000001;/gpu:0;e;0:0") != 0) return 2;
    if (!link_b_check()) return 3;
    printf("link: ok\n");
    return 0;
}
