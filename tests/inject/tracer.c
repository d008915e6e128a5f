/* Holds another process under ptrace (PTRACE_SEIZE, which does not stop it) for argv[2] seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    if (ptrace(PTRACE_SEIZE, atoi(argv[1]), 0, 0) != 0) { perror("PTRACE_SEIZE"); return 1; }
    printf("seized\n");
    fflush(stdout);
    sleep((unsigned)atoi(argv[2]));
    return 0;
}
