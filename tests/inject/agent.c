/* A library the injection tests load: its entry point writes a line into the file its argument names and
 * returns 42; a constructor counts how often the library was initialised. */
#include <stdio.h>
#include <unistd.h>

static int constructed;
static int entered;

__attribute__((constructor)) static void init(void) { constructed++; }

int test_agent_entry(const char *path) {
    entered++;
    FILE *f = fopen(path, "a");
    if (!f) return -1;
    fprintf(f, "pid %d constructed %d entered %d\n", (int)getpid(), constructed, entered);
    fclose(f);
    return 42;
}
