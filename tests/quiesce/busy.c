/* libquiesce_busy.so: code the quiesce tests find threads inside of. One function spins in this library, one
 * waits in a system call made from it (so only its stack shows it is here); both until released. */
#include <unistd.h>

/* Incremented by busy_spin: it stops growing while the spinning thread is stopped. */
volatile unsigned long busy_spins;

void busy_spin(volatile int *release, volatile int *entered) {
    *entered = 1;
    while (!*release)
        busy_spins++;
}

void busy_block(int fd, volatile int *entered) {
    char c;
    *entered = 1;
    while (read(fd, &c, 1) < 0) {
    }
}
