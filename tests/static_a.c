/* static_a.c + static_b.c: TFRDV_STATIC gives each TU a private copy; the two link together. */
#define TFRDV_STATIC
#define TFRDV_IMPLEMENTATION
#include "tfrdv.h"
#include <stdio.h>
#include <string.h>

int static_b_check(void);

int main(void) {
    if (strcmp(tfrdv_code_str(TFRDV_CANCELLED), "CANCELLED") != 0) return 1;
    if (!static_b_check()) return 2;
    printf("static: ok\n");
    return 0;
}
