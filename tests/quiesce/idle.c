/* libquiesce_idle.so: mapped into the target and never run. Built without start files, so the loader runs none of
 * its code either: no address in it is ever pushed on any stack. */
int idle_never_called(int x) { return x + 1; }
