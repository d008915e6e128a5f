/* The context object of the CUDA driver double, which the checkpoint double reads too (both libraries see the
 * same handles): a destroyed context stays allocated and is recognised by `alive`. */
#ifndef DBL_CTX_H
#define DBL_CTX_H

#include <pthread.h>
#include <stddef.h>

#define DBL_CTX_MAGIC 0x43545844u /* "DXTC" */
#define DBL_MAX_ALLOCS 64

struct dbl_alloc {
    void *ptr;
    size_t size;
};

struct dbl_ctx {
    unsigned magic;
    int alive;
    pthread_mutex_t lock;
    struct dbl_alloc allocs[DBL_MAX_ALLOCS];
};

#endif
